import CLinux
import ContainerFormat
import Foundation
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Cache files for new files, made ahead with no name (`O_TMPFILE`) on a background queue: a
/// create takes one instead of making a file in a content folder, a directory operation that
/// was 15 us (tmpfs) to 23 us (ext4 with a journal) of every create's answer. A taken file
/// gets its name (`linkat`) off that path: before the state database commits anything
/// (`nameAll`, run before every transaction), so that a recorded file has its cache file as
/// before, and before anything opens it by name (`name`). A crash before then loses the file
/// with its record, as a crash before the record did.
final class NewContentFiles: Sendable {
    /// Where the spares are made: the content folder, on the disk their names go to.
    private let folder: String
    private let path: @Sendable (ItemID) -> String
    private let spares: Mutex<Spares>
    /// Taken and not named yet, each with a descriptor of its own (the taker's may close
    /// first, and an unnamed file goes with its last descriptor).
    private let unnamed = Mutex<[ItemID: Int32]>([:])
    /// Held while naming: a name asked for while `nameAll` gives it waits until it is given.
    private let naming = Mutex(())
    /// Background QoS (nice 10 on Linux): refills yield to the creates they are for.
    private let maker = DispatchQueue(label: "icloudfs.new-content-files", qos: .background)
    /// `linkat` through `/proc/self/fd`: `AT_EMPTY_PATH` needs `CAP_DAC_READ_SEARCH`.
    private let namesByProcPath = Atomic<Bool>(false)

    /// Spares kept: a burst of creates takes them faster than they are made (two system
    /// calls each, a create and a link, against one), and the refill starts at a quarter.
    static let kept = 64

    private struct Spares {
        var descriptors: [Int32] = []
        var refilling = true  // the first round starts with the mount
        /// The cache's filesystem makes no `O_TMPFILE` files: every create makes a named one.
        var unsupported = false
    }

    init(folder: String, path: @escaping @Sendable (ItemID) -> String) {
        self.folder = folder
        self.path = path
        spares = Mutex(Spares())
        maker.async { [self] in refill() }
    }

    deinit {
        for fd in spares.withLock({ $0.descriptors }) { Glibc.close(fd) }
        for fd in unnamed.withLock({ $0.values }) { Glibc.close(fd) }
    }

    /// A new, empty cache file for `id` to write, or nil when no spare is ready (the caller
    /// makes a named one).
    func take(for id: ItemID) -> FileDescriptor? {
        let (spare, refill) = spares.withLock { spares -> (Int32?, Bool) in
            guard !spares.unsupported else { return (nil, false) }
            let spare = spares.descriptors.popLast()
            let refill = !spares.refilling && spares.descriptors.count <= NewContentFiles.kept / 4
            if refill { spares.refilling = true }
            return (spare, refill)
        }
        if refill { maker.async { [self] in self.refill() } }  // off the create's path
        guard let spare else { return nil }
        let taker = fcntl(spare, F_DUPFD_CLOEXEC, 0)
        guard taker >= 0 else {
            Glibc.close(spare)
            return nil
        }
        unnamed.withLock { $0[id] = spare }
        return FileDescriptor(rawValue: taker)
    }

    /// Gives the cache file of `id` its name if it has none yet.
    func name(_ id: ItemID) throws {
        guard unnamed.withLock({ $0[id] != nil }) else { return }
        try naming.withLock { _ in
            guard let fd = unnamed.withLock({ $0[id] }) else { return }  // `nameAll` named it
            try link(fd, as: path(id))
            unnamed.withLock { $0[id] = nil }
            Glibc.close(fd)
        }
    }

    /// Gives every taken file its name. On failure (a full disk) the rest stay unnamed, for
    /// the next call.
    func nameAll() throws {
        guard !unnamed.withLock({ $0.isEmpty }) else { return }
        try naming.withLock { _ in
            for (id, fd) in unnamed.withLock({ Array($0) }) {
                try link(fd, as: path(id))
                unnamed.withLock { $0[id] = nil }
                Glibc.close(fd)
            }
        }
    }

    /// The cache file of `id` goes: unnamed, it is dropped with its last descriptor.
    func discard(_ id: ItemID) {
        guard unnamed.withLock({ $0[id] != nil }) else { return }
        naming.withLock { _ in
            if let fd = unnamed.withLock({ $0.removeValue(forKey: id) }) { Glibc.close(fd) }
        }
    }

    private func refill() {
        let wanted = NewContentFiles.kept - spares.withLock { $0.descriptors.count }
        var made: [Int32] = []
        var unsupported = false
        for _ in 0..<max(wanted, 0) {
            let fd = Glibc.open(folder, ICLOUDFS_O_TMPFILE_BIT | O_DIRECTORY | O_RDWR | O_CLOEXEC, 0o600)
            if fd >= 0 {
                made.append(fd)
                continue
            }
            // EOPNOTSUPP (or EISDIR, EINVAL from older kernels): not on this filesystem. Other
            // errors (no room, no descriptors left) end this round only.
            unsupported = errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL
            break
        }
        spares.withLock { spares in
            spares.descriptors += made
            spares.refilling = false
            spares.unsupported = spares.unsupported || unsupported
        }
    }

    /// Fails only where the name cannot be made (no room: retried with the next transaction,
    /// which waits for it), not for a folder or a file in the way.
    private func link(_ fd: Int32, as target: String) throws {
        var failure = attemptLink(fd, target)
        if failure == EEXIST, unlink(target) == 0 {  // a leftover of that name: this file is newer
            failure = attemptLink(fd, target)
        }
        // Its folder not made yet (a cache with two-letter folders makes them on first use) or
        // removed by hand: made, as `LocalFiles.openContent` does.
        if failure == ENOENT, mkdir((target as NSString).deletingLastPathComponent, 0o700) == 0 {
            failure = attemptLink(fd, target)
        }
        if failure != 0 { throw Errno(rawValue: failure) }
    }

    /// 0, or the errno of the failure.
    private func attemptLink(_ fd: Int32, _ target: String) -> Int32 {
        if !namesByProcPath.load(ordering: .relaxed) {
            if linkat(fd, "", AT_FDCWD, target, ICLOUDFS_AT_EMPTY_PATH) == 0 { return 0 }
            // ENOENT: without the capability the empty path is looked up as a name.
            guard errno == ENOENT else { return errno }
        }
        guard linkat(AT_FDCWD, "/proc/self/fd/\(fd)", AT_FDCWD, target, AT_SYMLINK_FOLLOW) == 0 else { return errno }
        namesByProcPath.store(true, ordering: .relaxed)
        return 0
    }
}
