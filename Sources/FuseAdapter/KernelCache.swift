import ContainerFormat
import Dispatch
import FuseKernel
import Synchronization

/// The kernel's caches of one mounted session, and the one place that tells the kernel to
/// drop them.
///
/// A notification can block: dropping pages waits for reads of them in progress, which our
/// own tasks answer. So notifications run on a thread of their own, never on Swift's few
/// cooperative threads (blocking those could leave no thread to answer the read).
final class KernelCache: Sendable {
    private let session = Mutex<KernelSession?>(nil)
    private let queue = DispatchQueue(label: "icloudfs.kernel-cache")
    /// When a remote change last changed each inode's content (recent ones only).
    private let contentChangedAt = Mutex<[UInt64: ContinuousClock.Instant]>([:])

    /// How long after a remote change the kernel may still hold an inode's old size: a
    /// lookup or listing answered just before the invalidation can be cached for the
    /// attribute timeout (`FuseFileSystem.attributeTimeout`), with margin.
    static let staleWindow = Duration.seconds(3)

    func attach(_ session: KernelSession?) {
        self.session.withLock { $0 = session }
    }

    /// Runs `body` on the notification thread, after `delay`.
    func run(after delay: Duration = .zero, _ body: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds), execute: body)
    }

    /// Drops cached attributes and pages of `inode`; returns when the kernel has.
    func invalidateInode(_ inode: UInt64) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async {
                self.invalidateInodeNow(inode)
                continuation.resume()
            }
        }
    }

    /// As `invalidateInode`, blocking: for the kernel layer's worker threads only, never a task's.
    func invalidateInodeAndWait(_ inode: UInt64) {
        queue.sync { invalidateInodeNow(inode) }
    }

    /// On the notification thread only (see `run`).
    func invalidateInodeNow(_ inode: UInt64) {
        dispatchPrecondition(condition: .onQueue(queue))
        current?.invalidateInode(inode)
    }

    /// Drops the cached attributes of `inode` only (a read moved its access time). Never
    /// blocks for long, so any thread may call it: without pages to drop the kernel waits
    /// for no read in progress.
    func invalidateAttributes(_ inode: UInt64) {
        current?.invalidateInode(inode, attributesOnly: true)
    }

    /// Drops the cached name `name` in `folder`. On the notification thread only.
    func invalidateEntryNow(_ folder: UInt64, _ name: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        current?.invalidateEntry(folder, NameBytes.bytes(name))
    }

    /// The session's requests by kind since the mount (for `status`).
    var requestCounts: [String: Int] { current?.requestCounts ?? [:] }

    /// A remote change changed the content of `inode`.
    func noteContentChanged(_ inode: UInt64) {
        let now = ContinuousClock.now
        contentChangedAt.withLock { changed in
            // Old entries go now and then, not at every change (a pull may change thousands).
            if changed.count >= 4096 { changed = changed.filter { now - $0.value < Self.staleWindow } }
            changed[inode] = now
        }
    }

    /// Whether a remote change changed `inode`'s content within `staleWindow`: an `open`
    /// then drops the kernel's cached size and pages first, or reads of the new content
    /// could be cut to the old size.
    func contentChangedRecently(_ inode: UInt64) -> Bool {
        contentChangedAt.withLock { $0[inode].map { ContinuousClock.now - $0 < Self.staleWindow } ?? false }
    }

    private var current: KernelSession? { session.withLock { $0 } }
}
