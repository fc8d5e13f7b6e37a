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
    /// Background QoS: libdispatch runs it on threads at nice 10, so the kernel's requests
    /// (and the programs waiting on them) go first on a busy machine.
    private let queue = DispatchQueue(label: "icloudfs.commits", qos: .background)
    /// Files whose commit is waiting to start.
    private let waiting = Mutex<Set<ItemID>>([])
    /// Commits waiting for their delay to pass (not on the queue yet), under one timer: a
    /// timer per commit woke libdispatch's timer thread once per file (when a flush still
    /// asked for one per `close`, a sixth of the daemon's context switches in a burst of
    /// small files).
    private let delayed = Mutex(DelayedJobs())

    private struct DelayedJobs {
        var jobs: [(deadline: DispatchTime, job: @Sendable () -> Void)] = []
        /// The deadline the timer is set for; nil when none is.
        var timer: DispatchTime?
    }

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
        let (seconds, attoseconds) = delay.components
        let deadline = DispatchTime.now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
        let setTimer = delayed.withLock { delayed -> Bool in
            delayed.jobs.append((deadline, job))
            guard delayed.timer.map({ deadline < $0 }) ?? true else { return false }
            delayed.timer = deadline
            return true
        }
        if setTimer { runDelayedJobs(at: deadline) }
    }

    /// How much sooner than asked a delayed commit may run.
    static let leeway = DispatchTimeInterval.milliseconds(10)

    /// At `deadline`, runs the delayed jobs due by then and sets the timer for the next one.
    /// A timer replaced by an earlier one does nothing when it fires.
    private func runDelayedJobs(at deadline: DispatchTime) {
        queue.asyncAfter(deadline: deadline) { [self] in
            let (due, next) = delayed.withLock { delayed -> ([@Sendable () -> Void], DispatchTime?) in
                guard delayed.timer == deadline else { return ([], nil) }
                // Jobs due within the leeway run now: a burst adds one every fraction of a
                // millisecond, and a timer for each would be a timer per file again.
                let horizon = DispatchTime.now() + BackgroundCommits.leeway
                let due = delayed.jobs.filter { $0.deadline <= horizon }.map(\.job)
                delayed.jobs.removeAll { $0.deadline <= horizon }
                delayed.timer = delayed.jobs.map(\.deadline).min()
                return (due, delayed.timer)
            }
            for job in due { job() }
            if let next { runDelayedJobs(at: next) }
        }
    }

    /// A commit of `id` still waiting will find nothing to do: the caller queues the file
    /// itself (a release after an fsync).
    func forgetWaiting(_ id: ItemID) {
        _ = waiting.withLock { $0.remove(id) }
    }

    /// Returns once every job added before the call has run (delayed ones too).
    func drain() async {
        while true {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                queue.async { done.resume() }
            }
            guard delayed.withLock({ !$0.jobs.isEmpty }) else { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}
