import ContainerFormat
import Foundation
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Cache files for new files, made ahead on a background queue, each already under its
/// final name: the item id a create takes with its file is chosen when the file is made. A
/// create takes one instead of making a file in a content folder, a directory operation that
/// was 15 us (tmpfs) to 23 us (ext4 with a journal) of every create's answer; and nothing
/// names the file later (an unnamed `O_TMPFILE` file and its `linkat` cost 27 us of the
/// daemon's time per file, against 15 for a file made with its name).
///
/// A file made ahead but never recorded (the daemon killed with spares in hand, or before a
/// create it was taken for committed) would stay in the cache for good: every id is written
/// to a list before its file is made (`spares` in the cache folder, one write per round),
/// and at the next start the listed files no item or content record names are removed. The
/// list is cut down when it grows long (`trim`).
final class NewContentFiles: Sendable {
    private let path: @Sendable (ItemID) -> String
    /// The ids of files made ahead that may not be recorded: one per line.
    private let listPath: String
    private let spares = Mutex(Spares())
    /// Background QoS (nice 10 on Linux): refills yield to the creates they are for.
    private let maker = DispatchQueue(label: "icloudfs.new-content-files", qos: .background)

    /// Spares kept: a burst of creates takes them faster than they are made, and the refill
    /// starts at a quarter.
    static let kept = 64
    /// Listed ids past which a refill trims the list: 46 KiB of ids, at most a second of
    /// checks at the next start.
    static let listLimit = 2_000

    private struct Spares {
        var files: [(id: ItemID, fd: Int32)] = []
        /// Off until `start`, and during a round.
        var refilling = true
        var listed = 0
        /// After `stop`: a round under way removes what it made.
        var stopped = false
        /// Whether an id is recorded (an item or a content record), and a way to record
        /// everything queued so far: `trim` needs both. Set by `start`.
        var unrecorded: (@Sendable ([ItemID]) -> [ItemID])?
        var recordQueued: (@Sendable () throws -> Void)?
    }

    init(listPath: String, path: @escaping @Sendable (ItemID) -> String) {
        self.listPath = listPath
        self.path = path
    }

    deinit {
        for spare in spares.withLock({ $0.files }) { Glibc.close(spare.fd) }
    }

    /// Removes the files an earlier run made ahead that nothing recorded (`unrecorded`: of
    /// the ids given, those no item or content record names), then starts making spares.
    /// `recordQueued` commits every queued change (the state database's flush): `trim`
    /// calls it before it forgets ids.
    func start(
        unrecorded: @escaping @Sendable ([ItemID]) -> [ItemID], recordQueued: @escaping @Sendable () throws -> Void
    ) {
        for id in unrecorded(listedIDs()) { unlink(path(id)) }
        _ = truncate(listPath, 0)
        spares.withLock { spares in
            spares.unrecorded = unrecorded
            spares.recordQueued = recordQueued
        }
        maker.async { [self] in refill() }
    }

    /// Removes the spares not taken (at unmount); their ids stay listed for the next start,
    /// which finds their files gone.
    func stop() {
        let left = spares.withLock { spares in
            defer { spares.files = [] }
            spares.stopped = true
            return spares.files
        }
        remove(left)
        maker.sync {}  // a round under way ends (and removes what it made)
    }

    private func remove(_ files: [(id: ItemID, fd: Int32)]) {
        for spare in files {
            Glibc.close(spare.fd)
            unlink(path(spare.id))
        }
    }

    /// A new, empty cache file and the id it was made for, or nil when no spare is ready
    /// (the caller chooses an id and makes its file).
    func take() -> (id: ItemID, fd: FileDescriptor)? {
        let (spare, refill) = spares.withLock { spares -> ((id: ItemID, fd: Int32)?, Bool) in
            let spare = spares.files.popLast()
            let refill = !spares.refilling && spares.files.count <= NewContentFiles.kept / 4
            if refill { spares.refilling = true }
            return (spare, refill)
        }
        if refill { maker.async { [self] in self.refill() } }  // off the create's path
        return spare.map { ($0.id, FileDescriptor(rawValue: $0.fd)) }
    }

    private func refill() {
        defer { spares.withLock { $0.refilling = false } }
        trimIfLong()
        let wanted = NewContentFiles.kept - spares.withLock { $0.files.count }
        guard wanted > 0 else { return }
        let ids = (0..<wanted).map { _ in RandomID.makeItemID() }
        // Listed before made: a file that exists is listed. No room for the list, no spares.
        guard append(ids) else { return }
        var made: [(id: ItemID, fd: Int32)] = []
        for id in ids {
            // No room, no descriptors: this round ends.
            guard let fd = try? LocalFiles.openCacheFile(path(id), writable: true, exclusive: true) else { break }
            made.append((id, fd.rawValue))
        }
        let unwanted = spares.withLock { spares -> [(id: ItemID, fd: Int32)] in
            spares.listed += ids.count
            if spares.stopped { return made }
            spares.files += made
            return []
        }
        remove(unwanted)
    }

    /// Cuts the list down to the ids not recorded yet, once it holds `listLimit`: those the
    /// state names are committed first (`recordQueued`), then left out, as are those whose
    /// file is gone. An id taken since the look stays listed, checked again later.
    private func trimIfLong() {
        let (listed, unrecordedOf, recordQueued) = spares.withLock { ($0.listed, $0.unrecorded, $0.recordQueued) }
        guard listed >= NewContentFiles.listLimit, let unrecordedOf, let recordQueued else { return }
        // Unrecorded with no file: its create failed or was undone (a temporary file), or a
        // spare was removed at an unmount. Nothing to remove at a start.
        let unrecorded = unrecordedOf(listedIDs()).filter { access(path($0), F_OK) == 0 }
        do {
            try recordQueued()
        } catch {
            return  // a full disk: the list stays as it is
        }
        let staging = listPath + ".new"
        guard write(unrecorded, to: staging, options: [.create, .truncate]), rename(staging, listPath) == 0 else { return }
        spares.withLock { $0.listed = unrecorded.count }
    }

    private func append(_ ids: [ItemID]) -> Bool {
        write(ids, to: listPath, options: [.create, .append])
    }

    private func write(_ ids: [ItemID], to target: String, options: FileDescriptor.OpenOptions) -> Bool {
        let text = ids.map { $0.rawValue + "\n" }.joined()
        do {
            let fd = try FileDescriptor.open(
                target, .writeOnly, options: options.union(.closeOnExec), permissions: [.ownerReadWrite])
            return try fd.closeAfter {
                try fd.writeAll(text.utf8)
                return true
            }
        } catch {
            return false
        }
    }

    /// The listed ids; a line that is not an item id (a damaged list) is skipped, never
    /// taken for a path.
    private func listedIDs() -> [ItemID] {
        guard let text = try? String(contentsOfFile: listPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").filter(RandomID.isItemID).map { ItemID(String($0)) }
    }
}
