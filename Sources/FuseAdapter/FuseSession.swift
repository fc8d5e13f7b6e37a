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
        // As the kernel will show it; resolved now, as later it would ask this filesystem.
        let resolvedMountPoint = realpath(mountPoint, nil).map { path in
            defer { free(path) }
            return String(cString: path)
        }
        guard fuse_session_mount(session, mountPoint) == 0 else {
            fuse_session_destroy(session)
            self.session = nil
            userdata.release()
            throw FuseError.cannotMount(
                "cannot mount on \(mountPoint): is it an existing empty folder, and is /dev/fuse usable (fuse3 installed, root or user_allow_other)?")
        }
        if let problem = KernelReadAhead.raise(forMountAt: resolvedMountPoint ?? mountPoint) {
            FuseLog.logger.debug("read-ahead left at the kernel's default: \(problem)")
        }
        fileSystem.kernel.attach(session)
        fileSystem.replica.setChangeObserver { [weak self] ids in self?.invalidate(ids) }
    }

    /// Serves requests until the filesystem is unmounted (or SIGINT/SIGTERM/SIGHUP), then
    /// unmounts and releases the session. Blocks the calling thread.
    public func run() {
        guard let session else { return }
        fuse_set_signal_handlers(session)
        let signalWatch = watchForExitSignal(session)
        let config = fuse_loop_cfg_create()
        fuse_loop_cfg_set_max_threads(config, 16)
        fuse_loop_cfg_set_clone_fd(config, 0)
        _ = icloudfs_session_loop_mt(session, config)
        fuse_loop_cfg_destroy(config)
        fileSystem.replica.setChangeObserver(nil)
        fileSystem.kernel.attach(nil)
        fuse_remove_signal_handlers(session)
        // Unmounting also ends a wake-up request of the watch that came after the loop
        // had already stopped (a signal that interrupted a worker's read ends it alone).
        fuse_session_unmount(session)
        signalWatch.stop()
        fuse_session_destroy(session)
        self.session = nil
        userdata.release()
    }

    /// libfuse's signal handlers only mark the session as ended; its threads notice at the
    /// next request. This watch makes that request (opening the mount point: an `opendir`
    /// always reaches the filesystem, a `stat` may be answered from the kernel's cache) once
    /// the session is marked, so SIGTERM, SIGINT and SIGHUP unmount at once.
    private func watchForExitSignal(_ session: OpaquePointer) -> SignalWatch {
        let watch = SignalWatch()
        let address = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(session)))
        let mountPoint = self.mountPoint
        DispatchQueue.global().async {
            defer { watch.finished.signal() }
            let session = OpaquePointer(bitPattern: address)!
            while !watch.stopping.load(ordering: .relaxed) {
                if fuse_session_exited(session) != 0 {
                    let fd = open(mountPoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                    if fd >= 0 { close(fd) }
                    return
                }
                usleep(100_000)
            }
        }
        return watch
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

/// The thread of `FuseSession.watchForExitSignal`; `stop()` returns once it has ended (before
/// the session it looks at is destroyed).
private final class SignalWatch: Sendable {
    let stopping = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)

    func stop() {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
    }
}
