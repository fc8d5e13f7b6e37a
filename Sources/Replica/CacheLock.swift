import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// One device per cache folder. Two daemons on one cache each pushed the other's queued
/// changes, made conflicted copies of their own files and crashed; `umount` returns before the
/// daemon has finished, so `umount && mount` started a second one on the same cache.
///
/// The lock is a `flock` on `CACHE/lock`, which the kernel drops when the holder dies. The
/// file says who holds it and whether that holder is stopping: a new device waits for a
/// stopping one (the daemon of a mount just unmounted), and fails at once, naming the holder,
/// when the holder is serving. A mount of all containers also holds its cache root's.
public final class CacheLock: Sendable {
    /// What the lock file says of its holder.
    struct Holder: Equatable {
        var pid: Int32
        var stopping: Bool
        var owner: String

        var line: String { "\(pid) \(stopping ? "stopping" : "serving") \(owner)\n" }

        init(pid: Int32, stopping: Bool, owner: String) {
            self.pid = pid
            self.stopping = stopping
            self.owner = owner
        }

        /// `PID serving|stopping OWNER`; nil for anything else (a file being rewritten).
        init?(line: String) {
            let fields = line.trimmingCharacters(in: .newlines).split(separator: " ", maxSplits: 2)
            guard fields.count == 3, let pid = Int32(fields[0]), ["serving", "stopping"].contains(fields[1]) else { return nil }
            self.init(pid: pid, stopping: fields[1] == "stopping", owner: String(fields[2]))
        }
    }

    private let descriptor: Mutex<Int32?>
    private let owner: String

    private init(descriptor: Int32, owner: String) {
        self.descriptor = Mutex(descriptor)
        self.owner = owner
    }

    static func path(in folder: String) -> String { "\(folder)/lock" }

    /// Takes the lock of `folder`. While a stopping device holds it, waits up to `wait`;
    /// while a serving one does, up to `grace` (it may have been unmounted and not have
    /// noticed yet). Throws `busy`, naming the holder, when it stays held.
    public static func acquire(
        folder: String, owner: String, wait: Duration = .seconds(60), grace: Duration = .seconds(3)
    ) async throws -> CacheLock {
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = path(in: folder)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw ReplicaError.local("cannot open \(path): \(String(cString: strerror(errno)))")
        }
        let clock = ContinuousClock()
        let start = clock.now
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let failure = errno
            guard failure == EWOULDBLOCK || failure == EINTR else {
                close(fd)
                throw ReplicaError.local("cannot lock \(path): \(String(cString: strerror(failure)))")
            }
            let holder = readHolder(fd)
            let waited = clock.now - start
            if waited >= (holder?.stopping == true ? wait : grace) {
                close(fd)
                throw ReplicaError.busy(busyMessage(folder: folder, holder: holder, waited: waited))
            }
            do {
                try await Task.sleep(for: .milliseconds(50))
            } catch {
                close(fd)
                throw error
            }
        }
        let lock = CacheLock(descriptor: fd, owner: owner)
        lock.write(Holder(pid: getpid(), stopping: false, owner: owner))
        return lock
    }

    private static func busyMessage(folder: String, holder: Holder?, waited: Duration) -> String {
        guard let holder else {
            return "the cache \(folder) is in use by another icloudfs process: unmount it first, or give this mount its own cache (-o cache=DIR)"
        }
        if holder.stopping {
            return "the cache \(folder) is still held by \(holder.owner) (pid \(holder.pid)), which has been stopping for \(waited.components.seconds) s: wait for it to finish, then mount again"
        }
        return "the cache \(folder) is in use by \(holder.owner) (pid \(holder.pid)): unmount it first, or give this mount its own cache (-o cache=DIR)"
    }

    private static func readHolder(_ fd: Int32) -> Holder? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return Holder(line: String(decoding: buffer[..<count], as: UTF8.self))
    }

    private func write(_ holder: Holder) {
        descriptor.withLock { fd in
            guard let fd else { return }
            let bytes = Array(holder.line.utf8)
            // Best effort: the lock itself is the flock; the text only names the holder.
            _ = ftruncate(fd, 0)
            _ = pwrite(fd, bytes, bytes.count, 0)
        }
    }

    /// The device has begun to stop: a new one may wait for it rather than fail.
    public func markStopping() {
        write(Holder(pid: getpid(), stopping: true, owner: owner))
    }

    /// The device has fully stopped (its last state recorded): another may take the cache.
    public func release() {
        descriptor.withLock { fd in
            guard let held = fd else { return }
            _ = ftruncate(held, 0)
            close(held)
            fd = nil
        }
    }

    deinit { release() }
}
