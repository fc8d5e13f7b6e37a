#if THREAD_SANITIZER
#if canImport(Glibc)
import Glibc
#endif

/// Only in ThreadSanitizer builds (`Scripts/test --sanitize thread` defines
/// THREAD_SANITIZER): a mutex TSan can see. `Synchronization.Mutex` takes a contended lock
/// inside the runtime (a priority-inheritance futex), which TSan does not instrument, so it
/// reports races between closures that both hold the lock. A pthread mutex is intercepted.
/// Modules that use `Mutex` name this one instead in such builds (their `Mutex` typealias).
public final class InstrumentedMutex<Value: ~Copyable>: @unchecked Sendable {
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init(_ initialValue: consuming sending Value) {
        value = initialValue
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
#endif
