import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Watches one folder with inotify and yields when a file appears in it (created, linked or
/// renamed in). A thread blocks in `poll(2)`; it ends when the stream's consumer goes away.
/// The folder must exist (nil otherwise): making it is the store's, which knows its root.
enum FolderWatcher {
    static func stream(folder: String) -> AsyncStream<Void>? {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, folder, UInt32(IN_CREATE | IN_MOVED_TO)) >= 0 else {
            close(fd)
            return nil
        }
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let stopped = Stopped()
        continuation.onTermination = { _ in stopped.set() }
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            var request = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while !stopped.isSet {
                request.revents = 0
                guard poll(&request, 1, 500) > 0 else { continue }
                while read(fd, &buffer, buffer.count) > 0 {}
                continuation.yield()
            }
            close(fd)
        }
        thread.start()
        return stream
    }

    private final class Stopped: @unchecked Sendable {
        // SAFETY: a flag written once by the stream's termination handler and polled by the
        // watcher thread; the lock orders the two.
        private let lock = NSLock()
        private var value = false

        var isSet: Bool { lock.withLock { value } }
        func set() { lock.withLock { value = true } }
    }
}
