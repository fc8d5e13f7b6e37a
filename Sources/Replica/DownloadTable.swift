import Synchronization

/// Chunk downloads in flight, so that concurrent reads of one chunk fetch it once.
final class DownloadTable: Sendable {
    private let running = Mutex<[String: Task<Void, any Error>]>([:])

    /// The download running for `key`, or a new one running `body`; `isNew` says which. The
    /// download leaves the table when it ends.
    func start(_ key: String, _ body: @escaping @Sendable () async throws -> Void) -> (task: Task<Void, any Error>, isNew: Bool) {
        running.withLock { running in
            if let task = running[key] { return (task, false) }
            // Its removal waits for this lock: it can never come before the insertion below.
            let task = Task { [self] in
                defer { _ = self.running.withLock { $0.removeValue(forKey: key) } }
                try await body()
            }
            running[key] = task
            return (task, true)
        }
    }
}
