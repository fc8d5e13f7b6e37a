import Synchronization

/// Chunk downloads in flight, so that concurrent reads of one chunk fetch it once.
final class DownloadTable: Sendable {
    private let running = Mutex<[String: Task<Void, any Error>]>([:])

    /// Runs `body` for `key` unless it is running already, and waits for it either way.
    func run(_ key: String, _ body: @escaping @Sendable () async throws -> Void) async throws {
        let task = running.withLock { running in
            if let task = running[key] { return task }
            let task = Task { try await body() }
            running[key] = task
            return task
        }
        defer { _ = running.withLock { $0.removeValue(forKey: key) } }
        try await task.value
    }
}
