import BlobStore
import ContainerFormat
import Foundation
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// New small files without a cache file of their own (docs/ARCHITECTURE.md, "The path of a
/// small file"): written through the daemon into memory, appended to the staging log at their
/// close, and given a cache file only when something opens them again.
extension Replica {
    /// `create` of a file expected small (`SmallFileBursts`): the item is made and queued as
    /// `makeFileForWriting` makes it, without a cache file; its bytes are kept in memory
    /// (`writeInMemory`) until its close (`closeInMemory`). The handle has no descriptor:
    /// anything but an in-order write moves the file out first (`moveOutOfMemory`).
    /// `answer`: called with both once the create is decided (`NewFileAnswer`).
    public func makeFileInMemory(
        _ name: String, in parent: ItemID, mode: UInt32, owner: Owner = .root, umask: UInt32? = nil,
        answer: ((ItemAttributes, OpenFile) -> Void)? = nil
    ) throws(ReplicaError) -> (attributes: ItemAttributes, file: OpenFile) {
        if let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        let id = RandomID.makeItemID()
        let file = OpenFile(id: id, writable: true, fd: FileDescriptor(rawValue: -1))
        inMemory.add(id)
        do {
            let attributes = try createOpened(
                id, name, in: parent, mode: mode, owner: owner, umask: umask,
                answer: answer.map { answer in { answer($0, file) } })
            return (attributes, file)
        } catch {
            _ = inMemory.take(id)
            throw error
        }
    }

    /// The largest new file kept in memory; a larger one moves to a cache file of its own.
    public static let largestFileInMemory = FilesInMemory.largest

    /// Whether the staging log can take new files now: not when the cache's disk is nearly
    /// full (a file kept in memory would meet the full disk only at its close, when no one
    /// can be told), checked at most every 100 ms.
    public var takesFilesInMemory: Bool { inMemory.roomChecked(at: files.root) }

    /// A write into a file kept in memory, taken if it continues the file from its end and
    /// the file stays small; false if not (move the file out first, then write as usual).
    public func writeInMemory(_ id: ItemID, offset: UInt64, bytes: UnsafeRawBufferPointer) -> Bool {
        inMemory.append(id, offset: offset, bytes: bytes)
    }

    /// The size of a file kept in memory (what `stat` shows while it is written), nil for
    /// any other file.
    func sizeInMemory(_ id: ItemID) -> UInt64? {
        inMemory.size(of: id)
    }

    /// Gives a file kept in memory its cache file, with the bytes so far written into it as
    /// any write is: from here on it is an ordinary file being written. Returns the file the
    /// handle that made it goes on with (the same at every call, until that handle's close);
    /// nil if `id` was never kept in memory.
    public func moveOutOfMemory(_ id: ItemID) throws(ReplicaError) -> OpenFile? {
        try inMemory.moving(id) { () throws(ReplicaError) -> OpenFile? in
            if let moved = inMemory.movedOut(id) { return moved }
            guard let bytes = inMemory.take(id) else { return nil }
            let fd: FileDescriptor
            do {
                fd = try files.openContent(id, writable: true)
            } catch {
                inMemory.putBack(id, bytes)
                throw .localFailure("cannot make the cache file of \(id)", error)
            }
            let file = OpenFile(id: id, writable: true, fd: fd)
            if !bytes.isEmpty {
                do throws(ReplicaError) {
                    try write(file, offset: 0, data: bytes)
                } catch {
                    try? fd.close()
                    inMemory.putBack(id, bytes)
                    throw error
                }
            }
            inMemory.noteMovedOut(id, file)
            return file
        }
    }

    /// `release` of the handle that made a file kept in memory: its bytes go to the staging
    /// log and its version is queued, as a close queues any file. False if the file was
    /// moved out meanwhile: close the file `moveOutOfMemory` gave instead.
    public func closeInMemory(_ file: OpenFile) -> Bool {
        let id = file.id
        // As a move out of memory: an open meanwhile then finds the file in the log.
        // nil: not queued; else whether this was the last close of a file removed meanwhile.
        let closed = inMemory.moving(id) { () -> Bool? in
            guard let bytes = inMemory.take(id) else { return nil }
            do throws(ReplicaError) {
                return try queueFromMemory(id, bytes)
            } catch {
                // The log could not take it (a full disk): a cache file then, as any file.
                inMemory.putBack(id, bytes)
                logger.warning("\(error.message); \(id) goes to a cache file of its own")
                return nil
            }
        }
        if closed == true { reclaimDeletedContent(among: [id]) }
        return closed != nil
    }

    /// The close of the handle that made a file moved out of memory: the file it went on with.
    public func movedOutOfMemory(_ id: ItemID) -> OpenFile? {
        inMemory.takeMovedOut(id)
    }

    /// Before anything works on `id`'s cache file (an open, a truncate): one kept in memory
    /// or resting in the staging log gets it.
    func giveCacheFile(_ id: ItemID) throws(ReplicaError) {
        _ = try moveOutOfMemory(id)
        try materialize(id)
    }

    /// Gives a file whose bytes rest in the staging log a cache file of its own (an open,
    /// a truncate, a write: whatever works on the cache file). Nothing to do for any other.
    func materialize(_ id: ItemID) throws(ReplicaError) {
        guard state.withLock({ $0.content[id]?.staged != nil }) else { return }
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            guard let location = state.withLock({ $0.content[id]?.staged }) else { return }
            do {
                let bytes = try files.staging.read(location)
                let fd = try LocalFiles.openCacheFile(files.contentPath(id), writable: true)
                defer { try? fd.close() }
                try FileIO.writeAll(fd, bytes, offset: 0)
                guard ftruncate(fd.rawValue, off_t(bytes.count)) == 0 else { throw Errno(rawValue: errno) }
            } catch {
                throw .localFailure("cannot move \(id) out of the staging log into its cache file", error)
            }
            let record = state.withLock { state -> ContentRecord? in
                guard state.content[id]?.staged == location else { return nil }
                state.content[id]?.staged = nil  // lets the location go
                return state.content[id]
            }
            if let record { database.saveContentSoon(id, record) }
        }
    }

    /// Once a second (the sync loop's cache pass): the held pieces of one mostly let-go
    /// segment move to the log's end, and segments no one holds are removed once neither
    /// memory nor the database names them (a record's move out is saved a moment after it
    /// is made: a crash before that finds the segment still there).
    func tidyStagingLog() {
        let sparse = files.staging.sparseSegments().first
        if let sparse { compactStagingSegment(sparse) }
        defer { if sparse != nil { CrashPoint.stagingCompacted.reach() } }
        let dropped = files.staging.dropped
        guard !dropped.isEmpty else { return }
        do {
            // Commits the saves still waiting first.
            let named = try database.write { db in try database.stagedSegments(db) }
            let held = state.withLock { state in Set(state.content.values.compactMap { $0.staged?.segment }) }
            files.staging.removeDropped(except: named.union(held))
        } catch {
            logger.warning("cannot read \(files.databasePath) before removing staging log segments: \(error); tried again in a second")
        }
    }

    /// Moves the pieces records hold in `segment` to the log's end, each as `materialize`
    /// moves one out (under its file lock: an open meanwhile waits, then finds it moved).
    private func compactStagingSegment(_ segment: UInt32) {
        let held = state.withLock { state in
            state.content.compactMap { id, record in record.staged.flatMap { $0.segment == segment ? (id, $0) : nil } }
        }
        for (id, location) in held {
            fileLocks.withLock(id) {
                let moved: StagingLog.Location
                do {
                    moved = try files.staging.move(location)
                } catch {
                    return logger.warning("cannot move \(id) within the staging log: \(error)")
                }
                let record = state.withLock { state -> ContentRecord? in
                    guard state.content[id]?.staged == location else { return nil }
                    state.content[id]?.staged = moved  // lets the old location go
                    return state.content[id]
                }
                if let record { database.saveContentSoon(id, record) } else { files.staging.letGo(moved) }
            }
        }
        logger.debug("moved \(held.count) file(s) out of staging log segment \(segment)")
    }

    /// Where `piece` of `id` is, when the file rests in the staging log (its bytes there, nil
    /// if they cannot be read); nil when the file is in its cache file (read it there).
    func stagedBytes(of piece: ContentChunker.Piece, in id: ItemID) -> Data?? {
        guard let location = state.withLock({ $0.content[id]?.staged }) else { return nil }
        guard piece.offset + UInt64(piece.ref.size) <= UInt64(location.size) else { return .some(nil) }
        let within = StagingLog.Location(
            segment: location.segment, offset: location.offset + piece.offset, size: piece.ref.size)
        return .some(try? files.staging.read(within))
    }

    /// Queues a file kept in memory: chunks cut from the bytes, the bytes appended to the
    /// staging log, the version queued as `commit` queues one; and counts its handle's close
    /// in the same hold of the state lock (`countClose`, whose answer it returns).
    private func queueFromMemory(_ id: ItemID, _ bytes: Data) throws(ReplicaError) -> Bool {
        let pieces = ContentChunker(chunker: chunker).pieces(of: bytes)
        var location: StagingLog.Location?
        // Zeros too: upload makes them anew, but the file has no other copy to be read from.
        if !bytes.isEmpty {
            do {
                location = try files.staging.append(bytes)
            } catch {
                throw .localFailure("cannot append \(id) to the staging log", error)
            }
        }
        let (save, lastCloseOfDeleted) = state.withLock { state -> (ContentRecord?, Bool) in
            guard var record = state.content[id] else {
                // Gone meanwhile (its folder removed on another device): nothing to keep.
                if let location { files.staging.letGo(location) }
                return (nil, countClose(id, &state))
            }
            record.staged = location
            let now = Timestamp.now()
            if !bytes.isEmpty || state.dirtyMtime[id] != nil {
                state.dirtyMtime[id] = state.dirtyMtime[id] ?? now
            }
            let save = queueVersion(
                of: id, pieces, size: UInt64(bytes.count), record: record, stagesChunks: true, stillWritten: false,
                &state)
            return (save, countClose(id, &state))
        }
        if let save { database.saveContentSoon(id, save) }
        return lastCloseOfDeleted
    }

    /// At unmount: files still kept in memory get their cache files (queued at the next
    /// mount, as any file written and not closed).
    func moveAllOutOfMemory() {
        for id in inMemory.ids {
            do {
                if let file = try moveOutOfMemory(id) { try? file.fd.close() }
            } catch {
                logger.error("\(error.message): its bytes written since its create are lost")
            }
        }
    }
}

/// New files kept in memory while they are written (`Replica.makeFileInMemory`): their bytes,
/// and the files moved out meanwhile for the handles that made them. Its own lock: a write
/// into one takes no other.
final class FilesInMemory: Sendable {
    /// The largest file kept in memory; past it, a file moves to a cache file.
    static let largest = 256 << 10
    /// All files kept in memory at once at most (a program holding many new files open):
    /// a write past it moves its file to a cache file.
    static let largestTotal = 64 << 20
    /// Room the cache's disk must have for new files to be kept in memory.
    static let roomNeeded: UInt64 = 256 << 20

    private struct State {
        var bytes: [ItemID: Data] = [:]
        var total = 0
        var movedOut: [ItemID: OpenFile] = [:]
        var roomCheckedAt: ContinuousClock.Instant?
        var hasRoom = false
    }

    private let state = Mutex(State())
    /// One move out of memory per file at a time (`moving`).
    private let moves = FileLocks()

    func add(_ id: ItemID) {
        state.withLock { $0.bytes[id] = Data() }
    }

    func append(_ id: ItemID, offset: UInt64, bytes: UnsafeRawBufferPointer) -> Bool {
        state.withLock { state in
            guard let size = state.bytes[id]?.count, offset == UInt64(size), size + bytes.count <= FilesInMemory.largest,
                state.total + bytes.count <= FilesInMemory.largestTotal
            else { return false }
            state.bytes[id]!.append(bytes.bindMemory(to: UInt8.self))
            state.total += bytes.count
            return true
        }
    }

    func size(of id: ItemID) -> UInt64? {
        state.withLock { $0.bytes[id].map { UInt64($0.count) } }
    }

    var ids: [ItemID] { state.withLock { Array($0.bytes.keys) } }

    func take(_ id: ItemID) -> Data? {
        state.withLock { state in
            guard let bytes = state.bytes.removeValue(forKey: id) else { return nil }
            state.total -= bytes.count
            return bytes
        }
    }

    func putBack(_ id: ItemID, _ bytes: Data) {
        state.withLock { state in
            state.bytes[id] = bytes
            state.total += bytes.count
        }
    }

    func noteMovedOut(_ id: ItemID, _ file: OpenFile) {
        state.withLock { $0.movedOut[id] = file }
    }

    func movedOut(_ id: ItemID) -> OpenFile? {
        state.withLock { $0.movedOut[id] }
    }

    func takeMovedOut(_ id: ItemID) -> OpenFile? {
        state.withLock { $0.movedOut.removeValue(forKey: id) }
    }

    func moving<T, E: Error>(_ id: ItemID, _ body: () throws(E) -> T) throws(E) -> T {
        try moves.withLock(id, body)
    }

    /// Whether the disk holding `folder` has `roomNeeded` free, asked at most every 100 ms.
    func roomChecked(at folder: String) -> Bool {
        let now = ContinuousClock.now
        let known = state.withLock { state -> Bool? in
            guard let at = state.roomCheckedAt, now - at < .milliseconds(100) else { return nil }
            return state.hasRoom
        }
        if let known { return known }
        var info = statvfs()
        let hasRoom = statvfs(folder, &info) == 0 && UInt64(info.f_bavail) * UInt64(info.f_frsize) >= FilesInMemory.roomNeeded
        state.withLock {
            $0.roomCheckedAt = now
            $0.hasRoom = hasRoom
        }
        return hasRoom
    }
}
