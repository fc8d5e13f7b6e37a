import Dispatch

/// Runs blocking system calls (fsync, large reads, hashing) on Dispatch's thread pool so that
/// they never stall Swift's cooperative executor, which has only one thread per core.
public enum BlockingIO {
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try body() })
            }
        }
    }
}
