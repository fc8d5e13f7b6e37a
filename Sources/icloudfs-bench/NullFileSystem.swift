import FuseKernel
import Glibc
import Synchronization

/// `icloudfs-bench null-mount`: icloudfs's own kernel layer (`FuseKernel`) serving a
/// filesystem that does as little as one can, as `Scripts/bench-lib/nullfs.c` does on
/// libfuse: names and sizes in memory, written bytes dropped. What W3 and W7 cost on it is
/// what our kernel layer costs; the rest of icloudfs's time is the replica's.
final class NullFileSystem: KernelFileSystem {
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

    func connect(_ offered: KernelInit) -> ConnectionSettings {
        var settings = ConnectionSettings()
        // As FuseFileSystem asks (the kernel then asks `security.capability` once per file).
        settings.capabilities = [.asyncRead, .atomicTruncate, .bigWrites, .parallelDirectoryOperations, .handleKillPrivilegesV2]
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
            request.created(entry(node, info), OpenReply(handle: node))
        case .open(let node, _, _):
            request.opened(OpenReply(handle: node))
        case .write(let node, _, let offset, let bytes, _):
            names.withLock { names in
                guard var info = names.nodes[node] else { return }
                info.size = max(info.size, Int(offset) + bytes.count)
                names.nodes[node] = info
            }
            request.written(bytes.count)
        case .read:
            request.reply(bytes: [])
        case .flush, .release, .releasedir, .fsync, .fsyncdir:
            request.ok()
        case .opendir(let node, _):
            request.opened(OpenReply(handle: node))
        case .getxattr, .listxattr:
            request.error(ENODATA)
        default:
            request.error(ENOSYS)
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

/// Mounts a `NullFileSystem` at `mountPoint` and serves it until it is unmounted.
func nullMount(at mountPoint: String) throws {
    let session = try KernelSession(
        fileSystem: NullFileSystem(), mountPoint: mountPoint, options: KernelMountOptions(source: "null"))
    session.run()
}
