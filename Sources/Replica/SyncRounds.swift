import Synchronization

/// The sync loop's rounds, for whoever waits for uploads to finish (`waitUntilUploaded`,
/// `icloudfs sync --wait`): each ended round wakes every watcher to look again, instead of
/// each looking every few milliseconds.
final class SyncRounds: Sendable {
    private let watchers = Mutex<(next: Int, all: [Int: AsyncStream<Void>.Continuation])>((0, [:]))

    /// A stream with an element after each round that ends from now on (the latest only,
    /// if the watcher looks less often), until the watcher's task is cancelled.
    func watch() -> AsyncStream<Void> {
        let (rounds, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let number = watchers.withLock { watchers in
            defer { watchers.next += 1 }
            watchers.all[watchers.next] = continuation
            return watchers.next
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.watchers.withLock { $0.all.removeValue(forKey: number) }
        }
        return rounds
    }

    func ended() {
        for watcher in watchers.withLock({ Array($0.all.values) }) { watcher.yield() }
    }
}
