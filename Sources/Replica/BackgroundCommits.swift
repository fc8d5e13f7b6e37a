import Dispatch

/// What a close leaves to do (chunk the written file and queue its new version), run in
/// order on one background thread so that `close(2)` returns at once, as it does on a local
/// filesystem. A file waiting here still counts as open and dirty: conflicts, unlinks and
/// `isUploaded` treat it as they treat a file still being written.
///
/// At most `limit` jobs wait: past that the caller waits for a slot, so a burst of closes
/// (tar x) cannot pile up open descriptors.
final class BackgroundCommits: Sendable {
    private let queue = DispatchQueue(label: "icloudfs.commits")
    private let slots: DispatchSemaphore

    init(limit: Int = 64) {
        slots = DispatchSemaphore(value: limit)
    }

    func add(_ job: @escaping @Sendable () -> Void) {
        slots.wait()
        queue.async { [slots] in
            job()
            slots.signal()
        }
    }

    /// Returns once every job added before the call has run.
    func drain() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async { done.resume() }
        }
    }
}
