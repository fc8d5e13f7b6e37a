import BlobStore
import Synchronization

/// A task that runs until stopped, woken early by `wakeup` and, where the store can notify,
/// by new objects under a prefix: the replica's sync loop and the key-value store's. The one
/// owner of its task. Also the loop of `mount --all` that finds new containers.
public final class BackgroundLoop: Sendable {
    public let wakeup = WakeupSignal()
    private let task = Mutex<Task<Void, Never>?>(nil)

    public init() {}

    /// Runs `body` on a task of its own, unless it runs already.
    public func start(notifiedBy store: any BlobStore, under prefix: String, _ body: @escaping @Sendable () async -> Void) {
        task.withLock { task in
            guard task == nil else { return }
            // Background priority: its pushes and pulls yield to the kernel's requests.
            task = Task.detached(priority: .background) { [wakeup] in
                let watcher = store.changeNotifications(prefix: prefix).map { changes in
                    Task {
                        for await _ in changes { wakeup.signal() }
                    }
                }
                await body()
                watcher?.cancel()
            }
        }
    }

    /// Cancels the task, wakes it, and returns once it has ended.
    public func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        wakeup.signal()
        await running?.value
    }
}

/// A failure that repeats until it clears (a full disk, a store out of reach): logged at its
/// first occurrence and when it clears, not at every retry.
final class FailureStreak: Sendable {
    private let failing = Mutex(false)

    /// True for the first failure of a streak.
    func failed() -> Bool {
        failing.withLock { failing in
            defer { failing = true }
            return !failing
        }
    }

    /// True if this success ends a streak.
    func succeeded() -> Bool {
        failing.withLock { failing in
            defer { failing = false }
            return failing
        }
    }
}
