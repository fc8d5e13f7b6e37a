import CFuse3
import ContainerFormat
import Foundation
import Replica
import Synchronization

/// A mounted filesystem: the libfuse session, its mount point and its loop.
public final class FuseSession: @unchecked Sendable {
    // SAFETY: `session` is created in `mount`, used by the loop thread and, through
    // `KernelCache` (detached first), by notifications; destroyed after the loop ends.
    private var session: OpaquePointer?
    private let fileSystem: FuseFileSystem
    private let userdata: Unmanaged<FuseFileSystem>
    public let mountPoint: String

    /// Mounts `fileSystem` at `mountPoint`; throws with a one-line reason on failure.
    public init(fileSystem: FuseFileSystem, mountPoint: String) throws {
        self.fileSystem = fileSystem
        self.mountPoint = mountPoint
        userdata = Unmanaged.passRetained(fileSystem)
        var ops = FuseOperations.table()
        let arguments = ["icloudfs", "-o", fileSystem.options.kernelOptions] + (fileSystem.options.debug ? ["-d"] : [])
        var cArguments = arguments.map { strdup($0) }
        defer { cArguments.forEach { free($0) } }
        session = cArguments.withUnsafeMutableBufferPointer { buffer in
            var args = fuse_args(argc: Int32(buffer.count), argv: buffer.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, userdata.toOpaque())
        }
        guard let session else {
            userdata.release()
            throw FuseError.cannotMount("libfuse refused the options \(fileSystem.options.kernelOptions)")
        }
        guard fuse_session_mount(session, mountPoint) == 0 else {
            fuse_session_destroy(session)
            self.session = nil
            userdata.release()
            throw FuseError.cannotMount(
                "cannot mount on \(mountPoint): is it an existing empty folder, and is /dev/fuse usable (fuse3 installed, root or user_allow_other)?")
        }
        fileSystem.kernel.attach(session)
        fileSystem.replica.setChangeObserver { [weak self] ids in self?.invalidate(ids) }
    }

    /// Serves requests until the filesystem is unmounted (or SIGINT/SIGTERM/SIGHUP), then
    /// unmounts and releases the session. Blocks the calling thread.
    public func run() {
        guard let session else { return }
        fuse_set_signal_handlers(session)
        let config = fuse_loop_cfg_create()
        fuse_loop_cfg_set_max_threads(config, 16)
        fuse_loop_cfg_set_clone_fd(config, 0)
        _ = icloudfs_session_loop_mt(session, config)
        fuse_loop_cfg_destroy(config)
        fileSystem.replica.setChangeObserver(nil)
        fileSystem.kernel.attach(nil)
        fuse_remove_signal_handlers(session)
        fuse_session_unmount(session)
        fuse_session_destroy(session)
        self.session = nil
        userdata.release()
    }

    /// Tells the kernel to forget cached attributes, names and pages of changed items, and
    /// again a moment later: a lookup or listing answered just before the change can reach
    /// the kernel after the first invalidation and cache the old name or size again.
    private func invalidate(_ ids: Set<ItemID>) {
        let kernel = fileSystem.kernel
        kernel.run { [weak self] in self?.invalidateNow(ids) }
        kernel.run(after: .milliseconds(100)) { [weak self] in self?.invalidateNow(ids) }
    }

    private func invalidateNow(_ ids: Set<ItemID>) {
        let kernel = fileSystem.kernel
        let replica = fileSystem.replica
        var folders = Set<UInt64>()
        for id in ids {
            if let inode = replica.existingInode(of: id), let known = fileSystem.inodes.lookupEntry(inode) {
                // Only a name that is gone is invalidated: dropping a live dentry would break
                // programs whose working directory it is.
                let parent = try? replica.parent(of: id)
                let name = try? replica.name(of: id)
                let parentInode = parent.flatMap { $0 == .root ? UInt64(FUSE_ROOT_ID) : replica.existingInode(of: $0) }
                if parentInode != known.parent || name != known.name {
                    kernel.invalidateEntryNow(known.parent, known.name)
                    folders.insert(known.parent)
                }
                kernel.invalidateInodeNow(inode)
            }
            if let parent = try? replica.parent(of: id) {
                if let folder = parent == .root ? UInt64(FUSE_ROOT_ID) : replica.existingInode(of: parent) {
                    folders.insert(folder)
                }
            }
        }
        for folder in folders {
            kernel.invalidateInodeNow(folder)
        }
    }
}

public enum FuseError: Error, CustomStringConvertible {
    case cannotMount(String)

    public var description: String {
        switch self {
        case .cannotMount(let why): why
        }
    }
}
