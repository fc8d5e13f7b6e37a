import Synchronization
import ContainerFormat
import Foundation
import FuseKernel
import Replica

/// The filesystem the kernel talks to: translates each FUSE operation into one replica
/// call and answers it. No sync logic lives here.
public final class FuseFileSystem: KernelFileSystem {
    let replica: Replica
    public let options: FuseMountOptions
    let numbers: NodeNumbers
    let inodes: InodeTable
    let files = HandleTable<OpenHandle>()
    /// Which processes are making small files one after another (a create's guess).
    let bursts = Mutex(SmallFileBursts())
    let passthroughs = PassthroughFiles()
    let listings = HandleTable<FolderListing>()
    let kernel = KernelCache()
    let hydration: HydrationRefusals
    /// Attributes and names change remotely; invalidations keep the kernel honest, and
    /// these bound how stale it can be if one is missed.
    let attributeTimeout = 1.0
    let entryTimeout = 1.0

    /// The node of the root's `..`: the root itself, or under `mount --all` the top folder.
    let rootParent: UInt64

    /// `nodeBase`: added to every node number (`NodeNumbers.base`); `rootParent`: the node
    /// the root's `..` names (nil: the root itself).
    public init(
        replica: Replica, options: FuseMountOptions, nodeBase: UInt64 = 0, rootParent: UInt64? = nil
    ) throws(ReplicaError) {
        self.replica = replica
        self.options = options
        numbers = NodeNumbers(saved: try replica.savedNodeNumbers(), base: nodeBase) { [replica] in
            replica.saveNodeNumbers($0)
        }
        inodes = InodeTable(base: nodeBase)
        hydration = HydrationRefusals(programs: options.noHydrate)
        self.rootParent = rootParent ?? numbers.root
    }

    /// The root's node.
    var rootNode: UInt64 { numbers.root }

    func id(_ inode: UInt64) throws(ReplicaError) -> ItemID {
        guard let id = numbers.item(inode) else { throw .notFound }
        return id
    }

    /// The kernel's node (inode number) of `id`.
    func node(_ id: ItemID) -> UInt64 { numbers.number(of: id) }

    /// What `stat` shows of an item whose node is `node`.
    /// `refreshed`: `attributes` were taken after the replica looked at the local copy
    /// (`setAttributes` with times does), so a file the kernel writes needs no second look.
    func stat(of attributes: ItemAttributes, node: UInt64, refreshed: Bool = false) -> stat {
        var attributes = attributes
        // While the kernel writes the file itself (passthrough), the replica learns its size
        // and times from the local copy, now.
        if !refreshed, attributes.kind == .file, passthroughs.isWritten(node),
            let current = try? replica.refreshedAttributes(of: attributes.id)
        {
            attributes = current
        }
        var result = Glibc.stat()
        result.st_ino = UInt(node)
        let type: UInt32
        switch attributes.kind {
        case .file: type = S_IFREG
        case .folder: type = S_IFDIR
        case .symlink: type = S_IFLNK
        case .fifo: type = S_IFIFO
        case .socket: type = S_IFSOCK
        case .characterDevice: type = S_IFCHR
        case .blockDevice: type = S_IFBLK
        case .hardLink: type = S_IFREG  // never shown: a name of one is shown as its item
        }
        result.st_rdev = UInt(attributes.device)
        result.st_mode = type | (attributes.mode & ~options.umask & 0o7777)
        result.st_nlink = UInt(attributes.linkCount)
        let owner = shownOwner(of: attributes)
        result.st_uid = owner.uid
        result.st_gid = owner.gid
        result.st_size = Int(attributes.size)
        result.st_blksize = 1 << 20  // tools size their buffers by this: 1 MiB requests
        result.st_blocks = Int((attributes.allocatedSize + 511) / 512)
        func timespec(_ time: Timestamp) -> Glibc.timespec {
            Glibc.timespec(tv_sec: Int(time.seconds), tv_nsec: Int(time.nanoseconds))
        }
        result.st_mtim = timespec(attributes.mtime)
        result.st_ctim = timespec(attributes.ctime)
        result.st_atim = timespec(attributes.atime)
        return result
    }

    /// The owner `stat` shows: the stored one, unless the mount options name another.
    func shownOwner(of attributes: ItemAttributes) -> Owner {
        Owner(uid: options.uid ?? attributes.owner.uid, gid: options.gid ?? attributes.owner.gid)
    }

    /// An entry for the kernel, counted as one lookup.
    /// `fresh`: `attributes` are a new file's, whose local copy nothing wrote yet (the
    /// replica is then not asked again: `stat(of:node:refreshed:)`).
    func entry(_ attributes: ItemAttributes, parent: UInt64, name: String, fresh: Bool = false) -> Entry {
        let entry = uncountedEntry(attributes, fresh: fresh)
        inodes.remember(entry.node, parent: parent, name: name)
        return entry
    }

    /// An entry not yet counted as a lookup (a listing counts only those that fit).
    func uncountedEntry(_ attributes: ItemAttributes, fresh: Bool = false) -> Entry {
        let node = node(attributes.id)
        // The kernel's own root inode has generation 0; every other node 1.
        return Entry(
            node: node, generation: node == KernelProtocol.rootNode ? 0 : 1,
            attributes: stat(of: attributes, node: node, refreshed: fresh), entryTimeout: entryTimeout,
            attributeTimeout: attributeTimeout)
    }

    /// Runs `body` and answers with its error if it throws.
    func answer(_ request: Request, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
            request.error(error)
        }
    }

    /// Runs `body` on a task: for replies that wait (downloads, queuing a file).
    func answerLater(_ request: Request, _ body: @escaping @Sendable () async throws -> Void) {
        Task {
            do {
                try await body()
            } catch {
                request.error(error)
            }
        }
    }
}

extension Request {
    /// The caller, as an owner of what it makes.
    var owner: Owner { Owner(uid: caller.uid, gid: caller.gid) }

    /// Answers with the errno `error` stands for (`FuseErrno`).
    func error(_ error: any Error) {
        self.error(FuseErrno.code(for: error, in: operation))
    }
}

/// An open file as the kernel holds it: the replica's handle, and how the kernel serves it.
struct OpenHandle: Sendable {
    var file: OpenFile
    let node: UInt64
    let mode: PassthroughFiles.Mode
    /// The process that made the file with this open (`create`), for `SmallFileBursts`.
    var creator: Int32? = nil
    /// Made as a new file kept in memory (`Replica.makeFileInMemory`); its `file` has no
    /// descriptor until the file is moved out of memory.
    var madeInMemory = false

    var isInMemory: Bool { madeInMemory && file.descriptor < 0 }
}

extension Request {
    /// Answers a read with bytes of the file's local copy.
    func data(_ bytes: CachedBytes) {
        reply(file: bytes.fd, offset: bytes.offset, count: bytes.count)
    }
}
