import CFuse3
import Synchronization

/// The kernel's caches of one mounted session, and the one place that tells the kernel to
/// drop them (libfuse allows these notifications from any thread).
final class KernelCache: Sendable {
    private struct Session: @unchecked Sendable {
        // SAFETY: only used under the lock; the session detaches before libfuse destroys it.
        let pointer: OpaquePointer?
    }

    private let session = Mutex(Session(pointer: nil))

    func attach(_ session: OpaquePointer?) {
        self.session.withLock { $0 = Session(pointer: session) }
    }

    /// Drops cached attributes and pages of `inode`.
    func invalidateInode(_ inode: UInt64) {
        session.withLock { session in
            guard let pointer = session.pointer else { return }
            _ = fuse_lowlevel_notify_inval_inode(pointer, inode, 0, 0)
        }
    }

    /// Drops the cached name `name` in `folder`. Never from within a request on that folder:
    /// the kernel holds its lock then, and this would wait for it.
    func invalidateEntry(_ folder: UInt64, _ name: String) {
        session.withLock { session in
            guard let pointer = session.pointer else { return }
            _ = fuse_lowlevel_notify_inval_entry(pointer, folder, name, name.utf8.count)
        }
    }
}
