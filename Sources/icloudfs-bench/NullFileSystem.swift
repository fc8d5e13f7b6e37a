import FuseKernel
import Glibc
import Synchronization

/// `icloudfs-bench null-mount`: icloudfs's own kernel layer (`FuseKernel`) serving a
/// filesystem that does as little as one can, as `Scripts/bench-lib/nullfs.c` does on
/// libfuse: names and sizes in memory, written bytes dropped. What W3 and W7 cost on it is
/// what our kernel layer costs; the rest of icloudfs's time is the replica's.
///
/// `keeping` bounds a design's cost of keeping written bytes at all: `.log` appends every
/// write to one file (a staging log), `.filePerItem` makes an ext4 file per created file and
/// writes into it (a cache file per item), `.passthroughFilePerItem` too, and has the kernel
/// write into it (FUSE passthrough, as `passthrough_hp` and icloudfs do).
final class NullFileSystem: KernelFileSystem {
    enum Keeping {
        case nothing
        case log(path: String)
        case filePerItem(folder: String)
        case passthroughFilePerItem(folder: String)
    }

    private struct Node {
        var mode: UInt32
        var size: Int
    }

    private struct Names {
        var nodes: [UInt64: Node] = [KernelProtocol.rootNode: Node(mode: S_IFDIR | 0o755, size: 0)]
        var children: [UInt64: [KernelName: UInt64]] = [:]
        var next: UInt64 = 2
    }

    private let names = Mutex(Names())
    private let keeping: Keeping
    /// `.log`: the log's descriptor and where the next write goes.
    private let log: Mutex<(fd: Int32, end: Int)>
    /// `.filePerItem`: each created file's descriptor, by node.
    private let itemFiles = Mutex<[UInt64: Int32]>([:])
    /// `.passthroughFilePerItem`: the connection backing files are registered on, and each
    /// created file's descriptor and backing id, by node.
    private let channel = Mutex<KernelChannel?>(nil)
    private let backingFiles = Mutex<[UInt64: (fd: Int32, id: Int32)]>([:])

    init(keeping: Keeping) throws {
        self.keeping = keeping
        var fd: Int32 = -1
        if case .log(let path) = keeping {
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw NullMountError.cannotOpen(path, errno) }
        }
        log = Mutex((fd, 0))
    }

    func attach(_ channel: KernelChannel) {
        self.channel.withLock { $0 = channel }
    }

    func connect(_ offered: KernelInit) -> ConnectionSettings {
        var settings = ConnectionSettings()
        // As FuseFileSystem asks (the kernel then asks `security.capability` once per file).
        settings.capabilities = [.asyncRead, .atomicTruncate, .bigWrites, .parallelDirectoryOperations, .handleKillPrivilegesV2]
        if case .passthroughFilePerItem = keeping { settings.capabilities.insert(.passthrough) }
        return settings
    }

    func forget(_ node: UInt64, _ count: UInt64) {}

    func serve(_ request: Request, _ operation: Operation) {
        switch operation {
        case .lookup(let parent, let name):
            let found = names.withLock { names in names.children[parent]?[name].map { ($0, names.nodes[$0]!) } }
            guard let (node, info) = found else { return request.error(ENOENT) }
            request.entry(entry(node, info))
        case .getattr(let node):
            guard let info = names.withLock({ $0.nodes[node] }) else { return request.error(ENOENT) }
            request.attributes(stat(node, info), timeout: 1)
        case .setattr(let node, _):
            guard let info = names.withLock({ $0.nodes[node] }) else { return request.error(ENOENT) }
            request.attributes(stat(node, info), timeout: 1)
        case .mkdir(let parent, let name, let mode, _):
            let (node, info) = add(parent, name, S_IFDIR | (mode & 0o7777))
            request.entry(entry(node, info))
        case .create(let parent, let name, let mode, _, _):
            let (node, info) = add(parent, name, S_IFREG | (mode & 0o7777))
            switch keeping {
            case .filePerItem(let folder):
                let fd = open("\(folder)/\(node)", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return request.error(errno) }
                itemFiles.withLock { $0[node] = fd }
            case .passthroughFilePerItem(let folder):
                let fd = open("\(folder)/\(node)", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return request.error(errno) }
                guard let channel = channel.withLock({ $0 }), case .success(let id) = channel.openBacking(fd) else {
                    close(fd)
                    return request.error(EIO)
                }
                backingFiles.withLock { $0[node] = (fd, id) }
                return request.created(entry(node, info), OpenReply(handle: node, flags: .passthrough, backingID: id))
            case .nothing, .log:
                break
            }
            request.created(entry(node, info), OpenReply(handle: node))
        case .open(let node, _, _):
            request.opened(OpenReply(handle: node))
        case .write(let node, _, let offset, let bytes, _):
            names.withLock { names in
                guard var info = names.nodes[node] else { return }
                info.size = max(info.size, Int(offset) + bytes.count)
                names.nodes[node] = info
            }
            guard keep(bytes, of: node, at: offset) else { return request.error(EIO) }
            request.written(bytes.count)
        case .read:
            request.reply(bytes: [])
        case .release(let node, _):
            request.ok()
            if let fd = itemFiles.withLock({ $0.removeValue(forKey: node) }) { close(fd) }
            if let (fd, id) = backingFiles.withLock({ $0.removeValue(forKey: node) }) {
                channel.withLock { $0 }?.closeBacking(id)
                close(fd)
            }
        case .flush, .releasedir, .fsync, .fsyncdir:
            request.ok()
        case .opendir(let node, _):
            request.opened(OpenReply(handle: node))
        case .getxattr, .listxattr:
            request.error(ENODATA)
        default:
            request.error(ENOSYS)
        }
    }

    /// Keeps written bytes as `keeping` says; false if the write failed.
    private func keep(_ bytes: UnsafeRawBufferPointer, of node: UInt64, at offset: UInt64) -> Bool {
        switch keeping {
        case .nothing:
            return true
        case .log:
            return log.withLock { log in
                guard pwrite(log.fd, bytes.baseAddress, bytes.count, off_t(log.end)) == bytes.count else { return false }
                log.end += bytes.count
                return true
            }
        case .filePerItem, .passthroughFilePerItem:  // the second's writes never come here
            guard let fd = itemFiles.withLock({ $0[node] }) else { return true }
            return pwrite(fd, bytes.baseAddress, bytes.count, off_t(offset)) == bytes.count
        }
    }

    private func add(_ parent: UInt64, _ name: KernelName, _ mode: UInt32) -> (UInt64, Node) {
        names.withLock { names in
            let node = names.next
            names.next += 1
            let info = Node(mode: mode, size: 0)
            names.nodes[node] = info
            names.children[parent, default: [:]][name] = node
            return (node, info)
        }
    }

    private func entry(_ node: UInt64, _ info: Node) -> Entry {
        Entry(node: node, generation: 1, attributes: stat(node, info), entryTimeout: 1, attributeTimeout: 1)
    }

    private func stat(_ node: UInt64, _ info: Node) -> Glibc.stat {
        var result = Glibc.stat()
        result.st_ino = UInt(node)
        result.st_mode = info.mode
        result.st_nlink = info.mode & S_IFMT == S_IFDIR ? 2 : 1
        result.st_size = info.size
        result.st_blksize = 4096
        return result
    }
}

enum NullMountError: Error, CustomStringConvertible {
    case cannotOpen(String, Int32)

    var description: String {
        switch self {
        case .cannotOpen(let path, let code): "cannot open \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// Mounts a `NullFileSystem` at `mountPoint` and serves it until it is unmounted.
func nullMount(at mountPoint: String, keeping: NullFileSystem.Keeping) throws {
    let fileSystem = try NullFileSystem(keeping: keeping)
    let session = try KernelSession(
        fileSystem: fileSystem, mountPoint: mountPoint, options: KernelMountOptions(source: "null"))
    fileSystem.attach(session.channel)
    session.run()
}
