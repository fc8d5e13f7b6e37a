import BlobStore
import CLinux
import ContainerFormat
import Foundation
import SystemPackage
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The files of the cache folder: one content file per item, and chunks copied aside
/// (staged) until uploaded because their content file was about to change.
struct LocalFiles: Sendable {
    let root: String
    /// Which letters of an id name the folder of its content file.
    let contentFolders: ContentFolders
    private let namesSynced = SyncedNames()
    /// The chunks copied aside, known without a syscall: most chunks never are, and an
    /// upload or an unstage asked the disk for each (an open and an unlink failing per file).
    private let staged: StagedHashes
    /// New files' cache files, made ahead with their ids.
    private let newFiles: NewContentFiles
    /// Where new small files' bytes rest instead of a cache file each.
    let staging: StagingLog

    init(root: String, stagingSegmentSize: UInt64) throws {
        self.root = root
        let folders = try LocalFiles.prepareContentFolders(in: root)
        contentFolders = folders
        newFiles = NewContentFiles(listPath: "\(root)/spares") {
            LocalFiles.contentPath($0, root: root, folders: folders)
        }
        staging = try StagingLog(folder: "\(root)/staging", segmentSize: stagingSegmentSize)
        for folder in ["staged", "tmp"] {
            try FileManager.default.createDirectory(atPath: "\(root)/\(folder)", withIntermediateDirectories: true)
        }
        let found = (FileManager.default.enumerator(atPath: "\(root)/staged")?.allObjects as? [String] ?? [])
            .compactMap { ChunkHash(hex: String($0.split(separator: "/").last ?? "")) }
        staged = StagedHashes(Set(found))
    }

    /// A new cache spreads content files over one folder per last letter of their ids, all
    /// made here: creating a file never waits for a new folder (a folder made per new file was
    /// a quarter of the daemon's time in a burst of small creates). Caches made before keep
    /// their folders: of the first letter (ids were random then; new ones, which begin with
    /// the time, now go mostly to one of them), or of two, made on first use.
    private static func prepareContentFolders(in root: String) throws -> ContentFolders {
        let content = "\(root)/content"
        if access("\(content)/\(lastLetterMarker)", F_OK) == 0 { return .lastLetter }
        if access("\(content)/\(oneLetterMarker)", F_OK) == 0 { return .leading(1) }
        if access(content, F_OK) == 0 { return .leading(2) }
        // Made aside and renamed into place: a cache never holds a half-made content folder.
        let staging = "\(root)/content.new"
        try? FileManager.default.removeItem(atPath: staging)
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        for letter in RandomID.itemIDAlphabet {
            // EEXIST: a folder whose names ignore case already has the other case's folder.
            guard mkdir("\(staging)/\(letter)", 0o700) == 0 || errno == EEXIST else { throw Errno(rawValue: errno) }
        }
        let markerFile = open("\(staging)/\(lastLetterMarker)", O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard markerFile >= 0, close(markerFile) == 0, rename(staging, content) == 0 else { throw Errno(rawValue: errno) }
        return .lastLetter
    }

    private static let lastLetterMarker = ".last-letter-folders"
    private static let oneLetterMarker = ".one-letter-folders"

    var databasePath: String { "\(root)/state.sqlite" }

    /// Space set aside while the cache disk has room, given back when it is full: the state
    /// database then still has room to record that deleted files left the cache, and `rm`
    /// frees a full cache (without it, recording the deletion itself failed for lack of space).
    var reservePath: String { "\(root)/reserve" }
    static let reserveSize = 4 << 20

    /// Makes the reserve if it is missing; quietly does nothing where there is no room.
    func keepReserve() {
        let fd = open(reservePath, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_size < LocalFiles.reserveSize else { return }
        if posix_fallocate(fd, 0, off_t(LocalFiles.reserveSize)) != 0 { _ = ftruncate(fd, 0) }
    }

    /// Frees the reserve; false when there was none to free.
    func releaseReserve() -> Bool {
        var info = stat()
        guard stat(reservePath, &info) == 0, info.st_blocks > 0 else { return false }
        return unlink(reservePath) == 0
    }

    /// The space the content file of `id` takes on the cache disk (its blocks: holes take
    /// none), or nil if it cannot be measured.
    func spaceTaken(byContentOf id: ItemID) -> UInt64? {
        var info = stat()
        guard stat(contentPath(id), &info) == 0 else { return nil }
        return UInt64(max(info.st_blocks, 0)) * 512
    }

    func contentPath(_ id: ItemID) -> String {
        LocalFiles.contentPath(id, root: root, folders: contentFolders)
    }

    private static func contentPath(_ id: ItemID, root: String, folders: ContentFolders) -> String {
        "\(root)/content/\(folders.folder(of: id))/\(id.rawValue)"
    }

    func stagedPath(_ hash: ChunkHash) -> String {
        "\(root)/staged/\(hash.hex.prefix(2))/\(hash.hex)"
    }

    /// A new file's id and its content file, empty: one made ahead if there is one.
    func openNewContent() throws -> (id: ItemID, fd: FileDescriptor) {
        if let spare = newFiles.take() { return spare }
        let id = RandomID.makeItemID()
        return (id, try openContent(id, writable: true))
    }

    /// Starts making new files' content files ahead, once the state is loaded: files made
    /// ahead by an earlier run that nothing recorded go first (see `NewContentFiles`).
    func startNewContent(
        unrecorded: @escaping @Sendable ([ItemID]) -> [ItemID], recordQueued: @escaping @Sendable () throws -> Void
    ) {
        newFiles.start(unrecorded: unrecorded, recordQueued: recordQueued)
    }

    /// Removes the content files made ahead and not taken (at unmount).
    func stopNewContent() {
        newFiles.stop()
    }

    /// Opens (creating if needed) the content file of `id`.
    func openContent(_ id: ItemID, writable: Bool) throws -> FileDescriptor {
        try LocalFiles.openCacheFile(contentPath(id), writable: writable)
    }

    /// Opens a cache file, creating it if needed (`exclusive`: only a new one), and its
    /// folder if that is missing (a cache with two-letter folders makes them on first use,
    /// or one was removed by hand). Without moving its access time: the mount keeps its
    /// own, and a look at a cache file (a close's chunking, an upload) would otherwise write
    /// its inode to the disk's journal.
    static func openCacheFile(_ path: String, writable: Bool, exclusive: Bool = false) throws -> FileDescriptor {
        let options: FileDescriptor.OpenOptions = exclusive ? [.create, .exclusiveCreate, .closeOnExec] : [.create, .closeOnExec]
        let mode: FileDescriptor.AccessMode = writable ? .readWrite : .readOnly
        func open() throws -> FileDescriptor {
            do {
                return try FileDescriptor.open(
                    path, mode, options: options.union(.init(rawValue: ICLOUDFS_O_NOATIME)), permissions: [.ownerReadWrite])
            } catch Errno.notPermitted {
                // O_NOATIME needs the file's owner: a cache file another user made (a cache
                // used with sudo once) is opened as before.
                return try FileDescriptor.open(path, mode, options: options, permissions: [.ownerReadWrite])
            }
        }
        do {
            return try open()
        } catch Errno.noSuchFileOrDirectory {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            return try open()
        }
    }

    func removeContent(_ id: ItemID) {
        unlink(contentPath(id))
        namesSynced.remove(id)  // a new file of that name is a new name
    }

    /// Starts flushing the content file of `id` on another thread (an fsync lets its disk
    /// write overlap the chunking of the file); `wait()` returns the outcome.
    func startSyncingContent(_ id: ItemID) -> ContentFlush {
        let flush = ContentFlush()
        let path = contentPath(id)
        DispatchQueue.global().async {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            let failure = fd < 0 ? errno : (fsync(fd) == 0 ? 0 : errno)
            if fd >= 0 { close(fd) }
            flush.finish(failure)
        }
        return flush
    }

    /// Flushes the content file of `id` and its folder entry.
    func syncContent(_ id: ItemID) throws {
        let fd = try openContent(id, writable: false)
        defer { try? fd.close() }
        guard fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
        // Its name in its folder, once: a file's later syncs need only its bytes.
        guard !namesSynced.contains(id) else { return }
        try FileIO.syncDirectory(FilePath((contentPath(id) as NSString).deletingLastPathComponent))
        namesSynced.insert(id)
    }

    /// Copies a chunk's bytes aside until it is uploaded (content-addressed: staging the same
    /// chunk twice is harmless). Synced before it returns: the bytes it keeps are about to be
    /// overwritten in their content file, and the queued version naming them may be durable.
    func stage(_ hash: ChunkHash, _ bytes: Data) throws {
        let path = stagedPath(hash)
        if staged.contains(hash) { return }
        let temporary = "\(root)/tmp/\(hash.hex).\(UInt64.random(in: 0...UInt64.max))"
        let fd = try FileDescriptor.open(
            temporary, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: [.ownerReadWrite])
        do {
            try FileIO.writeAll(fd, bytes, offset: 0)
            guard fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
            try fd.close()
        } catch {
            try? fd.close()
            unlink(temporary)
            throw error
        }
        let folder = (path as NSString).deletingLastPathComponent
        if rename(temporary, path) != 0 {
            // The folder for this hash prefix is made on first use only (no stat per chunk).
            guard errno == ENOENT, mkdir(folder, 0o700) == 0 || errno == EEXIST, rename(temporary, path) == 0 else {
                let error = Errno(rawValue: errno)
                unlink(temporary)
                throw error
            }
        }
        try FileIO.syncDirectory(FilePath(folder))
        staged.insert(hash)
    }

    func isStaged(_ hash: ChunkHash) -> Bool {
        staged.contains(hash)
    }

    func readStaged(_ hash: ChunkHash) -> Data? {
        staged.contains(hash) ? FileManager.default.contents(atPath: stagedPath(hash)) : nil
    }

    func unstage(_ hash: ChunkHash) {
        if staged.remove(hash) { unlink(stagedPath(hash)) }
    }
}

/// An fsync running on another thread (see `LocalFiles.startSyncingContent`).
final class ContentFlush: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let failure = Mutex<Int32>(0)

    fileprivate func finish(_ error: Int32) {
        failure.withLock { $0 = error }
        done.signal()
    }

    /// Waits for the flush (again: returns at once); throws its error.
    func wait() throws {
        done.wait()
        done.signal()
        let error = failure.withLock { $0 }
        if error != 0 { throw Errno(rawValue: error) }
    }
}

/// Content files whose names are known to be on disk (their folder synced once this run).
private final class StagedHashes: Sendable {
    private let hashes: Mutex<Set<ChunkHash>>

    init(_ found: Set<ChunkHash>) { hashes = Mutex(found) }

    func contains(_ hash: ChunkHash) -> Bool { hashes.withLock { $0.contains(hash) } }
    func insert(_ hash: ChunkHash) { hashes.withLock { _ = $0.insert(hash) } }
    /// Whether it was there.
    func remove(_ hash: ChunkHash) -> Bool { hashes.withLock { $0.remove(hash) != nil } }
}

private final class SyncedNames: Sendable {
    private let ids = Mutex<Set<ItemID>>([])

    func contains(_ id: ItemID) -> Bool { ids.withLock { $0.contains(id) } }
    func insert(_ id: ItemID) { ids.withLock { _ = $0.insert(id) } }
    func remove(_ id: ItemID) { ids.withLock { _ = $0.remove(id) } }
}

/// Which letters of an item's id name the folder of its content file (`content/X/ID`).
enum ContentFolders: Sendable {
    /// The last: random in ids made since they begin with the time (`RandomID.makeItemID`).
    case lastLetter
    /// The first one or two (caches made before).
    case leading(Int)

    func folder(of id: ItemID) -> Substring {
        switch self {
        case .lastLetter: id.rawValue.suffix(1)
        case .leading(let letters): id.rawValue.prefix(letters)
        }
    }
}
