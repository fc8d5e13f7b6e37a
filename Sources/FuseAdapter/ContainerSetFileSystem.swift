import ContainerFormat
import Foundation
import FuseKernel
import Synchronization
import SyncAttributes

/// Why `mkdir` at the top could not make a container now (EAGAIN: try again once online).
public enum ContainerMakerError: Error, CustomStringConvertible {
    case storeUnreachable(String)

    public var description: String {
        switch self {
        case .storeUnreachable(let why): "the store is out of reach (\(why)); try again once it answers"
        }
    }
}

/// `mount --all`: every container of a store under one kernel connection, one folder each at
/// the top, named as macOS names them (`ContainerFolder`). The top folder is this type's own;
/// everything below a container's folder is that container's `FuseFileSystem`, found by the
/// node number: each container's numbers start at its slot's base (`base(ofSlot:)`), the
/// top folder is node 1 (slot 0).
///
/// Across containers nothing moves or links: rename, link and copy_file_range say EXDEV,
/// as between two filesystems (mv and cp copy instead). The top folder holds only container
/// folders: mkdir makes a container (`makeContainer`), every other change there is EPERM.
public final class ContainerSetFileSystem: MountedFileSystem {
    public let options: FuseMountOptions
    /// Made on `mkdir` at the top with the container's name; returns once the container is
    /// a member (`add`). Throws (logged): `ContainerMakerError.storeUnreachable` is EAGAIN
    /// to the caller, anything else EIO.
    public typealias ContainerMaker = @Sendable (_ container: String) async throws -> Void

    private struct Member {
        let container: String
        let folder: String
        let fileSystem: FuseFileSystem
    }

    private struct State {
        var bySlot: [UInt64: Member] = [:]
        var byFolder: [String: UInt64] = [:]
        var session: KernelSession?
        var offered: KernelInit?
        var listings: [UInt64: [String]] = [:]
        var nextListing: UInt64 = 1
    }

    private let state = Mutex(State())
    private let kernel = KernelCache()
    private let makeContainer: ContainerMaker
    /// Where `statfs` looks while no container is mounted (the caches' disk).
    private let cacheRoot: String
    private let mountedAt = Timestamp.now()
    private static let slotShift: UInt64 = 40

    public init(options: FuseMountOptions, cacheRoot: String, makeContainer: @escaping ContainerMaker) {
        self.options = options
        self.cacheRoot = cacheRoot
        self.makeContainer = makeContainer
    }

    /// The first node number of the container in `slot` (slots start at 1; each holds 2^40
    /// numbers).
    public static func base(ofSlot slot: UInt64) -> UInt64 { slot << slotShift }

    /// The top folder's node (the kernel's root), which a container root's `..` names.
    public static let topFolderNode = KernelProtocol.rootNode

    /// Makes `fileSystem` (built with `base(ofSlot: slot)`) the folder of `container`.
    public func add(container: String, slot: UInt64, fileSystem: FuseFileSystem) {
        let folder = ContainerFolder.name(of: container)
        let (session, offered) = state.withLock { state in
            state.bySlot[slot] = Member(container: container, folder: folder, fileSystem: fileSystem)
            state.byFolder[folder] = slot
            return (state.session, state.offered)
        }
        if let offered { fileSystem.connected(offered) }
        if let session { fileSystem.attach(session) }
        // The top folder's listing and link count changed.
        kernel.run { [kernel] in kernel.invalidateInodeNow(Self.topFolderNode) }
    }

    /// The containers mounted, by folder name.
    public var containers: [(container: String, folder: String)] {
        state.withLock { state in state.bySlot.values.map { ($0.container, $0.folder) } }.sorted { $0.folder < $1.folder }
    }

    private var members: [FuseFileSystem] { state.withLock { $0.bySlot.values.map(\.fileSystem) } }

    private func member(of node: UInt64) -> FuseFileSystem? {
        state.withLock { $0.bySlot[node >> Self.slotShift]?.fileSystem }
    }

    private func member(named folder: String) -> FuseFileSystem? {
        state.withLock { state in state.byFolder[folder].flatMap { state.bySlot[$0]?.fileSystem } }
    }

    private static func sameContainer(_ first: UInt64, _ second: UInt64) -> Bool {
        first >> slotShift == second >> slotShift
    }

    // MARK: KernelFileSystem

    public func attach(_ session: KernelSession?) {
        kernel.attach(session)
        let members = state.withLock { state in
            state.session = session
            return state.bySlot.values.map(\.fileSystem)
        }
        for member in members { member.attach(session) }
    }

    public func connect(_ offered: KernelInit) -> ConnectionSettings {
        let members = state.withLock { state in
            state.offered = offered
            return state.bySlot.values.map(\.fileSystem)
        }
        for member in members { member.connected(offered) }
        return FuseFileSystem.settings(offered, options)
    }

    public func forget(_ node: UInt64, _ count: UInt64) {
        member(of: node)?.forget(node, count)
    }

    public func serve(_ request: Request, _ operation: FuseKernel.Operation) {
        switch operation {
        case .lookup(let parent, let name) where parent == Self.topFolderNode:
            return lookupTop(request, NameBytes.string(name))
        case .lookup(let parent, let name) where name == Array("..".utf8):
            // A container root's `..` is the top folder.
            if let member = member(of: parent), parent == member.rootNode { return request.entry(topEntry()) }
        case .getattr(Self.topFolderNode):
            return request.attributes(topAttributes(), timeout: 1)
        case .mkdir(Self.topFolderNode, let name, _, _):
            return mkdirTop(request, NameBytes.string(name))
        case .opendir(Self.topFolderNode, _):
            let folders = containers.map(\.folder)
            let handle = state.withLock { state in
                defer { state.nextListing += 1 }
                state.listings[state.nextListing] = folders
                return state.nextListing
            }
            return request.opened(OpenReply(handle: handle))
        case .readdir(Self.topFolderNode, let handle, let offset, let size, let plus):
            return readdirTop(request, handle, Int(offset), size, plus: plus)
        case .releasedir(Self.topFolderNode, let handle):
            state.withLock { _ = $0.listings.removeValue(forKey: handle) }
            return request.ok()
        case .fsyncdir(Self.topFolderNode, _):
            return request.ok()
        case .getxattr(Self.topFolderNode, let name, let size):
            return getxattrTop(request, NameBytes.string(name), size)
        case .listxattr(Self.topFolderNode, let size):
            // Nothing is listed there (the containers attribute is asked by name).
            return size == 0 ? request.xattrSize(0) : request.reply(bytes: [])
        case .setattr(Self.topFolderNode, _):
            // tar and rsync set the times and owner of the folder they fill: accepted and
            // left as they are (the top folder is this mount's, not the store's).
            return request.attributes(topAttributes(), timeout: 1)
        case .statfs(let node):
            if let member = member(of: node) ?? members.first { return member.serve(request, operation) }
            var info = statvfs()
            if statvfs(cacheRoot, &info) != 0 { info = statvfs() }
            info.f_namemax = 255
            return request.statfs(info)
        case .rename(let parent, _, let newParent, _, _):
            if parent == Self.topFolderNode || newParent == Self.topFolderNode { return refuseAtTop(request) }
            if !Self.sameContainer(parent, newParent) { return request.error(EXDEV) }
        case .link(let node, let newParent, _):
            if newParent == Self.topFolderNode { return refuseAtTop(request) }
            if !Self.sameContainer(node, newParent) { return request.error(EXDEV) }
        case .copyFileRange(let sourceNode, _, _, let targetNode, _, _, _):
            if !Self.sameContainer(sourceNode, targetNode) { return request.error(EXDEV) }
        default:
            break
        }
        guard let node = Self.node(of: operation) else { return request.error(ENOSYS) }
        if node == Self.topFolderNode { return refuseAtTop(request) }
        guard let member = member(of: node) else { return request.error(ENOENT) }
        member.serve(request, operation)
    }

    /// Every other operation on the top folder: it holds only containers.
    private func refuseAtTop(_ request: Request) {
        switch request.operation {
        case "open": request.error(EISDIR)
        case "readlink": request.error(EINVAL)
        case "setxattr", "removexattr": request.error(ENOTSUP)
        default: request.error(EPERM)
        }
    }

    // MARK: The top folder

    private func topAttributes() -> stat {
        var result = Glibc.stat()
        result.st_ino = UInt(Self.topFolderNode)
        result.st_mode = S_IFDIR | (0o755 & ~options.umask)
        result.st_nlink = UInt(2 + state.withLock { $0.bySlot.count })
        result.st_uid = options.uid ?? getuid()
        result.st_gid = options.gid ?? getgid()
        result.st_blksize = 4096
        let time = Glibc.timespec(tv_sec: Int(mountedAt.seconds), tv_nsec: Int(mountedAt.nanoseconds))
        result.st_mtim = time
        result.st_ctim = time
        result.st_atim = time
        return result
    }

    private func topEntry() -> Entry {
        // Generation 0: the kernel's own root inode has it.
        Entry(node: Self.topFolderNode, generation: 0, attributes: topAttributes(), entryTimeout: 1, attributeTimeout: 1)
    }

    private func lookupTop(_ request: Request, _ name: String) {
        if name == "." || name == ".." { return request.entry(topEntry()) }
        guard let member = member(named: name) else { return request.error(ENOENT) }
        do {
            request.entry(try member.rootEntry(parent: Self.topFolderNode, name: name))
        } catch {
            request.error(error)
        }
    }

    private func mkdirTop(_ request: Request, _ folder: String) {
        if member(named: folder) != nil { return request.error(EEXIST) }
        guard let container = ContainerFolder.container(named: folder) else {
            FuseLog.logger.error(
                "mkdir \(folder): not a container name (letters, digits, - and _ in parts joined by ~, as iCloud~com~example~app)")
            return request.error(EINVAL)
        }
        Task { [self] in
            do {
                try await makeContainer(container)
            } catch {
                FuseLog.logger.error("mkdir \(folder): cannot create container \(container): \(error)")
                return request.error(error is ContainerMakerError ? EAGAIN : EIO)
            }
            lookupTop(request, folder)
        }
    }

    private func readdirTop(_ request: Request, _ handle: UInt64, _ offset: Int, _ size: Int, plus: Bool) {
        // Offset 0 again is a rewind: the containers as they are now.
        let current = offset == 0 ? containers.map(\.folder) : nil
        guard let folders = state.withLock({ state -> [String]? in
            guard state.listings[handle] != nil else { return nil }
            if let current { state.listings[handle] = current }
            return state.listings[handle]
        }) else { return request.error(EBADF) }
        var buffer = DirectoryBuffer(capacity: size)
        let count = 2 + folders.count
        var index = max(0, offset)
        while index < count {
            let next = UInt64(index + 1)
            let added: Bool
            if index < 2 {
                // `.` and `..`: the top folder itself; never looked up from a listing.
                let name = Array((index == 0 ? "." : "..").utf8)
                added =
                    plus
                    ? buffer.addPlus(entry: nil, name: name, inode: Self.topFolderNode, mode: S_IFDIR, nextOffset: next)
                    : buffer.add(name: name, inode: Self.topFolderNode, mode: S_IFDIR, nextOffset: next)
            } else {
                let folder = folders[index - 2]
                guard let member = member(named: folder), let entry = try? member.uncountedRootEntry() else {
                    index += 1
                    continue
                }
                let name = Array(folder.utf8)
                if plus {
                    added = buffer.addPlus(entry: entry, name: name, inode: entry.node, mode: S_IFDIR, nextOffset: next)
                    if added { member.countLookup(entry, parent: Self.topFolderNode, name: folder) }
                } else {
                    added = buffer.add(name: name, inode: entry.node, mode: S_IFDIR, nextOffset: next)
                }
            }
            guard added else { break }
            index += 1
        }
        request.reply(buffer)
    }

    /// `user.icloud.containers` on the top folder: each container's name, one per line
    /// (`icloudfs containers`); nothing else is kept there.
    private func getxattrTop(_ request: Request, _ name: String, _ size: Int) {
        guard SyncAttribute(name: name) == .containers else { return request.error(ENODATA) }
        let value = Array(containers.map(\.container).joined(separator: "\n").utf8)
        if size == 0 { return request.xattrSize(value.count) }
        guard size >= value.count else { return request.error(ERANGE) }
        request.reply(bytes: value)
    }

    /// The node an operation acts on (the folder, for those naming a child).
    private static func node(of operation: FuseKernel.Operation) -> UInt64? {
        switch operation {
        case .lookup(let node, _), .getattr(let node), .setattr(let node, _), .readlink(let node),
            .symlink(let node, _, _), .mknod(let node, _, _, _, _), .mkdir(let node, _, _, _), .unlink(let node, _),
            .rmdir(let node, _), .rename(let node, _, _, _, _), .link(_, let node, _), .open(let node, _, _),
            .create(let node, _, _, _, _), .tmpfile(let node, _, _, _), .read(let node, _, _, _),
            .write(let node, _, _, _, _), .flush(let node, _), .release(let node, _), .fsync(let node, _),
            .opendir(let node, _), .readdir(let node, _, _, _, _), .releasedir(let node, _), .fsyncdir(let node, _),
            .statfs(let node), .setxattr(let node, _, _, _), .getxattr(let node, _, _), .listxattr(let node, _),
            .removexattr(let node, _), .lseek(let node, _, _, _), .fallocate(let node, _, _, _, _),
            .copyFileRange(let node, _, _, _, _, _, _):
            node
        case .forget, .initialize, .interrupt, .destroy, .unsupported:
            nil
        }
    }
}
