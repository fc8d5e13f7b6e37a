#if THREAD_SANITIZER
import BlobStore

/// In ThreadSanitizer builds, a mutex TSan can see (see `InstrumentedMutex`).
typealias Mutex = InstrumentedMutex
#endif
