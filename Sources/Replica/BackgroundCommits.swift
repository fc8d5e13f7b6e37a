import ContainerFormat
import Dispatch
import Synchronization

/// What a close or an fsync leaves to do (chunk the written file and queue its new
/// version), run in order on one background thread so that `close(2)` returns at once, as
/// it does on a local filesystem. A file waiting here still counts as open and dirty:
/// conflicts, unlinks and `isUploaded` treat it as they treat a file still being written.
///
/// Adding never waits: the callers are the kernel's requests, and one file being queued
/// must not hold up requests for others. Jobs hold no descriptor (a commit opens the file
/// itself), so a burst of closes (tar x) costs a little memory, not open files; and a
/// commit asked for a file that already has one waiting adds nothing.
final class BackgroundCommits: Sendable {
    private let queue = DispatchQueue(label: "icloudfs.commits")
    /// Files whose commit is waiting to start.
    private let waiting = Mutex<Set<ItemID>>([])
    /// Commits waiting for their delay to pass (not on the queue yet).
    private let delayed = Mutex(0)

    func add(_ job: @escaping @Sendable () -> Void) {
        queue.async(execute: job)
    }

    /// Runs `commit` for `id` after `delay`, unless one is already waiting: that one, when
    /// it starts, chunks whatever the file holds by then. (A database fsyncs its log after
    /// every transaction: a delay makes a run of them one commit, not one each.)
    func addCommit(of id: ItemID, after delay: Duration = .zero, _ commit: @escaping @Sendable () -> Void) {
        guard waiting.withLock({ $0.insert(id).inserted }) else { return }
        let job: @Sendable () -> Void = { [self] in
            // From here on, a new write needs a new commit; none if a release took it over.
            guard waiting.withLock({ $0.remove(id) != nil }) else { return }
            commit()
        }
        guard delay > .zero else { return queue.async(execute: job) }
        delayed.withLock { $0 += 1 }
        let (seconds, attoseconds) = delay.components
        let deadline = DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        queue.asyncAfter(deadline: deadline) { [self] in
            job()
            delayed.withLock { $0 -= 1 }
        }
    }

    /// A commit of `id` still waiting will find nothing to do: the caller queues the file
    /// itself (a release after a flush).
    func forgetWaiting(_ id: ItemID) {
        _ = waiting.withLock { $0.remove(id) }
    }

    /// Returns once every job added before the call has run (delayed ones too).
    func drain() async {
        while true {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                queue.async { done.resume() }
            }
            guard delayed.withLock({ $0 > 0 }) else { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
