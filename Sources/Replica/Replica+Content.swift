import BlobStore
import CLinux
import ContainerFormat
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// An open file: what `open`/`create` hand to the FUSE layer and `read`/`write` take.
public final class OpenFile: Sendable {
    public let id: ItemID
    public let writable: Bool
    let fd: FileDescriptor

    /// The local copy's descriptor (open for reading and writing), for the kernel to use as
    /// a passthrough backing file. Valid until the file is closed.
    public var descriptor: Int32 { fd.rawValue }

    init(id: ItemID, writable: Bool, fd: FileDescriptor) {
        self.id = id
        self.writable = writable
        self.fd = fd
    }
}

/// Bytes of an open file's local copy: `count` bytes at `offset` of descriptor `fd` (valid
/// while the file is open).
public struct CachedBytes: Sendable {
    public let fd: Int32
    public let offset: UInt64
    public let count: Int

    /// Up to `count` bytes from `offset` of `file`, whose content is `size` bytes long.
    init(_ file: OpenFile, offset: UInt64, count: Int, size: UInt64) {
        let end = min(offset + UInt64(count), size)
        fd = file.fd.rawValue
        self.offset = offset
        self.count = end > offset ? Int(end - offset) : 0
    }
}

/// File content: placeholders filled on read, local writes, and queuing a written file.
extension Replica {
    /// `open`: for writing without truncation the whole current version is downloaded first,
    /// so that the queued version is complete.
    public func open(_ id: ItemID, write: Bool, truncate: Bool) async throws(ReplicaError) -> OpenFile {
        guard needsDownloadToOpen(write: write, truncate: truncate) else {
            return try openWithoutDownload(id, write: write, truncate: truncate)
        }
        // Counted as open from before the download: the cache bound or an evict must not
        // take bytes away between the download and the open.
        state.withLock { $0.openingForWrite[id, default: 0] += 1 }
        defer {
            state.withLock { state in
                state.openingForWrite[id, default: 1] -= 1
                if state.openingForWrite[id] == 0 { state.openingForWrite[id] = nil }
            }
        }
        try await downloadAll(id)
        return try openWithoutDownload(id, write: write, truncate: truncate)
    }

    /// Whether `open` downloads first: only to write without truncating.
    public func needsDownloadToOpen(write: Bool, truncate: Bool) -> Bool {
        write && !truncate
    }

    /// `open` when nothing needs downloading first (see `needsDownloadToOpen`): answers at
    /// once, on the caller's thread.
    public func openWithoutDownload(_ id: ItemID, write: Bool, truncate: Bool) throws(ReplicaError) -> OpenFile {
        let kind = state.withLock { ($0.view.liveItem(id) ?? $0.anonymousFiles[id])?.kind }
        guard let kind else { throw .notFound }
        guard kind == .file else { throw kind == .folder ? .isAFolder : .invalidArgument("not a file") }
        try giveCacheFile(id)
        let fd: FileDescriptor
        do {
            fd = try files.openContent(id, writable: true)
        } catch {
            throw .localFailure("cannot open the cache file of \(id)", error)
        }
        state.withLock { noteOpened(id, &$0) }
        let file = OpenFile(id: id, writable: write, fd: fd)
        if write && truncate { try resizeLocal(file.id, to: 0) }
        return file
    }

    /// One more open of `id` (its close goes through `closeSoon` or `close`).
    func noteOpened(_ id: ItemID, _ state: inout ReplicaState) {
        if state.openCount[id] == nil { state.versionAtOpen[id] = state.view.item(id)?.chunks }
        state.openCount[id, default: 0] += 1
        // A save (or an unlink) is based on the version that was opened, even if a remote
        // version arrives while the file is open: that one then stays.
        if state.openedBase[id] == nil { state.openedBase[id] = state.device.base(of: id) }
    }

    /// `read`: makes the range present (the chunks it touches are downloaded first, the rest
    /// of the file then in the background) and says where its bytes are: the caller hands
    /// them to the kernel straight from the cache file (splice), without copying them here.
    public func readable(_ file: OpenFile, offset: UInt64, count: Int) async throws(ReplicaError) -> CachedBytes {
        let plan = try prepareRead(file.id, offset..<offset + UInt64(count), wholeWindows: true)
        if !plan.missing.isEmpty {
            try await fetch(file.id, plan.missing, version: plan.chunks)
            startBackgroundDownload(file.id)
        }
        return CachedBytes(file, offset: offset, count: count, size: plan.size)
    }

    /// `read` when the range is present locally: answered at once, on the caller's thread;
    /// nil when something must be downloaded first (use `readable`).
    public func readableIfPresent(_ file: OpenFile, offset: UInt64, count: Int) throws(ReplicaError) -> CachedBytes? {
        let plan = try prepareRead(file.id, offset..<offset + UInt64(count))
        guard plan.missing.isEmpty else { return nil }
        return CachedBytes(file, offset: offset, count: count, size: plan.size)
    }

    /// `read` into memory.
    public func read(_ file: OpenFile, offset: UInt64, count: Int) async throws(ReplicaError) -> Data {
        let bytes = try await readable(file, offset: offset, count: count)
        do {
            return try FileIO.read(file.fd, offset: bytes.offset, count: bytes.count)
        } catch {
            throw .localFailure("cannot read the cache file of \(file.id)", error)
        }
    }

    /// The largest file a container holds, 1 TiB (iCloud Drive's is 50 GB): past it a
    /// `truncate`, `fallocate` or write fails with EFBIG, as on a disk whose files are
    /// smaller. A sparse file's holes still cost a chunk reference per 4 MiB (a file of
    /// 1 PB would need hundreds of millions).
    public static let largestFile: UInt64 = 1 << 40

    static func checkFileSize(_ size: UInt64) throws(ReplicaError) {
        guard size <= largestFile else {
            throw .tooLarge("\(size) bytes is past the largest file icloudfs keeps (\(largestFile) bytes)")
        }
    }

    /// `write` of bytes in memory.
    public func write(_ file: OpenFile, offset: UInt64, data: Data) throws(ReplicaError) {
        _ = try write(file, offset: offset, count: data.count) { fd in
            try FileIO.writeAll(FileDescriptor(rawValue: fd), data, offset: offset)
            return data.count
        }
    }

    /// `write`: `copy` puts (at most `count`) bytes into the local file (given as a
    /// descriptor, so the caller can splice them from the kernel) and returns how many; they
    /// are queued when the file is closed. Returns the count.
    public func write(
        _ file: OpenFile, offset: UInt64, count: Int, copy: (Int32) throws -> Int
    ) throws(ReplicaError) -> Int {
        guard file.writable else { throw .invalidArgument("file not open for writing") }
        try Replica.checkFileSize(offset + UInt64(count))
        let id = file.id
        return try fileLocks.withLock(id) { () throws(ReplicaError) -> Int in
            try copyQueuedBytesAside(of: id, in: offset..<offset + UInt64(count))
            // The first write into a clean copy is recorded before its bytes land: after a
            // crash, a cache file that differs from its record is known as written (and
            // queued as it is), never read as the version it was.
            let firstWrite = state.withLock { state in
                state.content[id]?.dirty == true ? nil : recordBeforeWrite(id, &state).with(dirty: true)
            }
            if let firstWrite { try saveContent(id, firstWrite) }
            state.withLock { $0.writesInFlight[id, default: 0] += 1 }
            let copied = Result { try copy(file.fd.rawValue) }
            return try state.withLock { state throws(ReplicaError) in
                state.writesInFlight[id, default: 1] -= 1
                if state.writesInFlight[id] == 0 { state.writesInFlight[id] = nil }
                state.writeGeneration[id, default: 0] += 1
                let count: Int
                switch copied {
                case .success(let copiedCount): count = copiedCount
                case .failure(let error): throw .localFailure("cannot write the cache file of \(id)", error)
                }
                var record = recordBeforeWrite(id, &state)
                let end = offset + UInt64(count)
                if !record.dirty { state.changedSinceClean[id] = ByteRanges() }
                // A write past the end leaves a hole of zeros that are this file's own bytes.
                if offset > record.size {
                    record.present.insert(record.size..<offset)
                    state.changedSinceClean[id]?.insert(record.size..<offset)
                }
                record.present.insert(offset..<end)
                state.changedSinceClean[id]?.insert(offset..<end)
                record.size = max(record.size, end)
                record.dirty = true
                state.content[id] = record
                let now = Timestamp.now()
                state.dirtyMtime[id] = now
                state.dirtyCtime[id] = now
                return count
            }
        }
    }

    /// The content record a write into `id` starts from. A placeholder written without its
    /// download keeps its size, its bytes missing: `commit` then refuses it instead of
    /// queuing zeros or a cut file.
    func recordBeforeWrite(_ id: ItemID, _ state: inout ReplicaState) -> ContentRecord {
        if let record = state.content[id] { return record }
        guard let item = state.view.liveItem(id), item.size > 0 else { return .empty }
        return ContentRecord(chunks: item.chunks, size: item.size, present: ByteRanges(), dirty: false, pinned: false, lastAccess: 0)
    }

    /// `copy_file_range` between two open files: the source range is made present (as a read
    /// would), then copied into the target's local file inside the kernel, as a write of the
    /// target. Returns the count copied (fewer at the end of the source).
    public func copyRange(
        from source: OpenFile, at offset: UInt64, to target: OpenFile, at targetOffset: UInt64, count: Int
    ) async throws(ReplicaError) -> Int {
        refreshIfWrittenOutside(source.id)
        refreshIfWrittenOutside(target.id)
        let bytes = try await readable(source, offset: offset, count: count)
        guard bytes.count > 0 else { return 0 }
        return try write(target, offset: targetOffset, count: bytes.count) { fd in
            try FileIO.copyRange(
                from: source.fd, at: bytes.offset, to: FileDescriptor(rawValue: fd), at: targetOffset, count: bytes.count)
        }
    }

    /// `SEEK_DATA` (`toData`) or `SEEK_HOLE` from `offset`: nil past the end (ENXIO). Holes
    /// are the local copy's, once it is whole; bytes not downloaded yet count as data.
    public func seek(_ file: OpenFile, from offset: UInt64, toData: Bool) throws(ReplicaError) -> UInt64? {
        refreshIfWrittenOutside(file.id)
        let record = state.withLock { $0.content[file.id] }
        let size: UInt64
        if let record { size = record.size } else { size = try attributes(of: file.id).size }
        guard offset < size else { return nil }
        guard let record, record.isComplete else { return toData ? offset : size }
        let found = Glibc.lseek(file.fd.rawValue, off_t(offset), toData ? ICLOUDFS_SEEK_DATA : ICLOUDFS_SEEK_HOLE)
        if found < 0 {
            if errno == ENXIO { return toData ? nil : size }
            throw .localFailure("cannot seek in the cache file of \(file.id)", Errno(rawValue: errno))
        }
        return min(UInt64(found), size)
    }

    /// What `fallocate` asks of a range.
    public enum Allocation: Sendable {
        /// Space for the range (the cache disk's); past the end the file grows with zeros,
        /// unless `keepSize`.
        case reserve(keepSize: Bool)
        /// The range reads as zeros; the size stays.
        case punchHole
        /// The range reads as zeros; past the end the file grows, unless `keepSize`.
        case zero(keepSize: Bool)
    }

    /// `fallocate` on a file open for writing. Zeroed bytes are a change of the file, as a
    /// write (holes in the local copy); reserved space is the cache disk's only.
    public func allocate(_ file: OpenFile, at offset: UInt64, count: UInt64, _ allocation: Allocation) async throws(ReplicaError) {
        guard file.writable else { throw .invalidArgument("file not open for writing") }
        try Replica.checkFileSize(offset + count)
        refreshIfWrittenOutside(file.id)
        let end = offset + count
        let size = try attributes(of: file.id).size
        switch allocation {
        case .reserve(let keepSize):
            if !keepSize, end > size { try resizeLocal(file.id, to: end) }
            do {
                try FileIO.reserve(file.fd, offset: offset, count: count)
            } catch {
                throw .localFailure("cannot reserve space in the cache file of \(file.id)", error)
            }
        case .punchHole, .zero(keepSize: true):
            let end = min(end, size)
            guard offset < end else { return }
            _ = try write(file, offset: offset, count: Int(end - offset)) { fd in
                try FileIO.zero(FileDescriptor(rawValue: fd), offset: offset, count: Int(end - offset))
                return Int(end - offset)
            }
        case .zero(keepSize: false):
            if end > size { try resizeLocal(file.id, to: end) }
            _ = try write(file, offset: offset, count: Int(count)) { fd in
                try FileIO.zero(FileDescriptor(rawValue: fd), offset: offset, count: Int(count))
                return Int(count)
            }
        }
    }

    /// Queues the written file now. With `durable`, returns only once the queued version
    /// survives a power loss. Runs on the caller's thread (chunking a large file takes a
    /// while: not on a task).
    public func commit(_ file: OpenFile, durable: Bool) throws(ReplicaError) {
        try commit(file.id, durable: durable, reading: file.fd)
    }

    /// After an fsync: queues the written file in the background (`BackgroundCommits`),
    /// after `delay`, and not before `commitDelayWhileWrittenOutside` while the kernel writes
    /// the file (passthrough): queued while still open, its chunks are copied aside first
    /// (the kernel could still change them), which a close coming soon spares.
    public func commitSoon(_ file: OpenFile, after delay: Duration = .zero) {
        guard file.writable else { return }
        let writtenOutside = state.withLock { $0.outsideWriters[file.id] != nil }
        let delay = writtenOutside ? max(delay, Replica.commitDelayWhileWrittenOutside) : delay
        commits.addCommit(of: file.id, after: delay) { [self] in
            logQueuingFailure { () throws(ReplicaError) in try commit(file.id, durable: false) }
        }
    }

    /// `fsync`: returns once the bytes written through `file` survive a power loss (its
    /// content file, and the cache state that marks it written: a mount queues a file
    /// written before a crash). Queuing the version follows in the background, so an fsync
    /// does not wait for the file to be chunked.
    public func sync(_ file: OpenFile) throws(ReplicaError) {
        try makeDurable(file.id)
        commitSoon(file, after: Replica.commitDelayAfterSync)
    }

    /// An fsync's commit waits this long, so that a database's run of transactions (each
    /// ends with an fsync of its growing log) is chunked once, not once per transaction:
    /// the end of a growing file is read and hashed again at each commit.
    static let commitDelayAfterSync = Duration.milliseconds(100)
    /// How long a commit of a file the kernel writes waits for its close (see `commitSoon`).
    static let commitDelayWhileWrittenOutside = Duration.milliseconds(50)

    /// `release`: a written file is queued, and counts as open until then. A small one
    /// (`largestFileQueuedAtRelease`) is queued here, on the caller's thread, read through
    /// the handle's own descriptor: the kernel's release has been answered (see
    /// `FuseFileSystem.release`), and a hop to another thread and a second open would cost
    /// more than the chunking. A larger one closes now and is queued in the background
    /// (after any `commitSoon` of the same handle). Either way an fsync's commit still
    /// waiting has nothing left to do: this one queues what the file holds at its close.
    public func closeSoon(_ file: OpenFile) {
        guard file.writable else {
            return logQueuingFailure { () throws(ReplicaError) in try close(file) }
        }
        commits.forgetWaiting(file.id)
        let small = state.withLock { ($0.content[file.id]?.size ?? 0) <= Replica.largestFileQueuedAtRelease }
        if small {
            defer { try? file.fd.close() }
            return logQueuingFailure { () throws(ReplicaError) in try release(file.id, reading: file.fd) }
        }
        try? file.fd.close()
        commits.add { [self] in
            logQueuingFailure { () throws(ReplicaError) in try release(file.id) }
        }
    }

    /// The largest file `closeSoon` queues on the caller's thread (chunked in about a
    /// millisecond): what `tar x` and `git checkout` write most.
    static let largestFileQueuedAtRelease: UInt64 = 1 << 20

    /// Queuing after close has no caller to report to: the error goes to the log, and the
    /// file stays dirty (queued at its next close, or by the next mount).
    private func logQueuingFailure(_ body: () throws(ReplicaError) -> Void) {
        do {
            try body()
        } catch {
            logger.error("\(error.message); the bytes stay in the cache and are queued at the next close or mount")
        }
    }

    /// Closes the handle now; a written file is queued first (on the caller's thread, as
    /// `commit`). `release` goes through `closeSoon`.
    public func close(_ file: OpenFile) throws(ReplicaError) {
        try? file.fd.close()
        try release(file.id)
    }

    /// The end of a close, its descriptor closed: queues the file, then it no longer counts
    /// as open.
    private func release(_ id: ItemID, reading descriptor: FileDescriptor? = nil) throws(ReplicaError) {
        defer { noteClosed(id) }
        try commit(id, durable: false, reading: descriptor)
    }

    /// One open of `id` fewer, after its close queued the file.
    func noteClosed(_ id: ItemID) {
        let lastCloseOfDeleted = state.withLock { countClose(id, &$0) }
        // Removed while open: its space comes back at its last close (`rm` of a file
        // still being closed on a full disk), not at the next pass.
        if lastCloseOfDeleted { reclaimDeletedContent(among: [id]) }
    }

    /// One open of `id` fewer; at the last, what the opens kept goes. Returns whether that
    /// was the last close of a file removed meanwhile (its space is then reclaimed).
    func countClose(_ id: ItemID, _ state: inout ReplicaState) -> Bool {
        state.openCount[id, default: 1] -= 1
        guard state.openCount[id] == 0 else { return false }
        state.openCount[id] = nil
        state.openedBase[id] = nil
        state.versionAtOpen[id] = nil
        state.unlinkedHere.remove(id)
        state.anonymousFiles[id] = nil
        return !state.view.isLive(id)
    }

    /// `setattr` with a size: truncates or extends (with zeros) and queues the result.
    public func truncate(_ id: ItemID, to size: UInt64) async throws(ReplicaError) -> ItemAttributes {
        try Replica.checkFileSize(size)  // before a download it would not need
        try giveCacheFile(id)
        refreshIfWrittenOutside(id)
        if size > 0 { try await downloadAll(id) }
        try resizeLocal(id, to: size)
        let isOpen = state.withLock { $0.openCount[id] != nil }
        if !isOpen {
            do {
                try await BlockingIO.run { [self] in try commit(id, durable: false) }
            } catch {
                throw ReplicaError.wrapping(error)
            }
        }
        return try attributes(of: id)
    }

    // MARK: - Internals

    struct ReadPlan {
        var size: UInt64
        var chunks: [ChunkRef]
        var missing: [ContentChunker.Piece]
    }

    /// Decides under the state lock what a read needs. A new version first gets a new local
    /// copy (`startNewCopy`, its file I/O outside the state lock). `wholeWindows`: a sequential
    /// read fetches every chunk of the aligned windows the range touches (`WindowedLanding`),
    /// so that its own fetches land whole windows too (else a reader ahead of the background
    /// download lands the file chunk by chunk).
    func prepareRead(_ id: ItemID, _ range: Range<UInt64>, wholeWindows: Bool = false) throws(ReplicaError) -> ReadPlan {
        while true {
            let plan = try state.withLock { state throws(ReplicaError) -> ReadPlan? in
                state.content[id]?.lastAccess = Int64(Timestamp.now().seconds)
                let record = state.content[id] ?? .empty
                // A file written locally, or one deleted while open, reads its local bytes.
                guard !record.dirty, state.view.liveItem(id)?.kind == .file else {
                    // Bytes of the version it was based on that were never downloaded before
                    // the write (it was evicted meanwhile) are not zeros: an error, not data.
                    let end = min(range.upperBound, record.size)
                    if record.dirty, range.lowerBound < end, !record.present.missing(in: range.lowerBound..<end).isEmpty {
                        throw .local("bytes of \(id) in \(range.lowerBound)..<\(end) were not downloaded before it was written")
                    }
                    return ReadPlan(size: record.size, chunks: record.chunks, missing: [])
                }
                guard versionToStart(id, state) == nil else { return nil }
                // A reader going on from where the copy ends (or at the file's start) reads on:
                // its fetch takes whole windows. A reader jumping ahead gets its chunks alone.
                let readsOn = wholeWindows
                    && (range.lowerBound == 0 || record.present.contains(range.lowerBound - 1..<range.lowerBound))
                let wanted = readsOn ? WindowedLanding.windows(around: range) : range
                let (start, end) = (wanted.lowerBound, min(wanted.upperBound, record.size))
                let gaps = start < end ? record.present.missing(in: start..<end) : []
                return ReadPlan(size: record.size, chunks: record.chunks, missing: Replica.pieces(record.chunks, covering: gaps))
            }
            if let plan { return plan }
            try startNewCopy(of: id)
        }
    }

    /// The item whose current version the local copy of `id` must start over for (it holds
    /// another version, or none yet); nil when it holds the current one, is written locally,
    /// or keeps the version that was opened.
    private func versionToStart(_ id: ItemID, _ state: ReplicaState) -> Item? {
        let record = state.content[id] ?? .empty
        guard !record.dirty, let item = state.view.liveItem(id), item.kind == .file else { return nil }
        guard state.content[id] == nil || !state.keepsOpenedVersion(item, record) else { return nil }
        guard record.chunks != item.chunks || record.size != item.size || state.content[id] == nil else { return nil }
        return item
    }

    /// Starts the local copy of `id` over, empty (sparse) at the size of its current
    /// version; the chunks of queued versions it still holds are copied aside first.
    private func startNewCopy(of id: ItemID) throws(ReplicaError) {
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            guard let item = state.withLock({ versionToStart(id, $0) }) else { return }
            try copyQueuedBytesAside(of: id, in: 0..<UInt64.max)
            try setLength(of: id, to: item.size)
            let record = state.withLock { state -> ContentRecord? in
                // Another version may have arrived meanwhile: then the read starts over.
                guard let current = versionToStart(id, state), current.chunks == item.chunks, current.size == item.size
                else { return nil }
                let record = ContentRecord(
                    chunks: item.chunks, size: item.size, present: ByteRanges(), dirty: false,
                    pinned: state.content[id]?.pinned ?? false, lastAccess: Int64(Timestamp.now().seconds))
                state.content[id] = record
                return record
            }
            if let record { try saveContent(id, record) }
        }
    }

    /// The chunks (with their offsets) that overlap any of `ranges`.
    static func pieces(_ chunks: [ChunkRef], covering ranges: [Range<UInt64>]) -> [ContentChunker.Piece] {
        guard !ranges.isEmpty else { return [] }
        return ContentChunker.Piece.layout(chunks).filter { piece in ranges.contains { $0.overlaps(piece.range) } }
    }

    /// Downloads every missing chunk of the current version.
    public func downloadAll(_ id: ItemID) async throws(ReplicaError) {
        let plan = try prepareRead(id, 0..<UInt64.max)
        try await fetch(id, plan.missing, version: plan.chunks)
    }

    /// Starts downloading a file (a folder: everything below it) and returns at once
    /// (`user.icloud.download`, startDownloadingUbiquitousItem).
    public func startDownload(_ id: ItemID) {
        let wanted = state.withLock { state in
            state.view.liveItem(id).map { files(below: $0, state) } ?? []
        }
        for file in wanted { startBackgroundDownload(file) }
    }

    /// Queues a whole-file download behind the others; at most two run at once, so reads
    /// (which fetch directly) keep priority.
    func startBackgroundDownload(_ id: ItemID) {
        let startWorker = state.withLock { state -> Bool in
            guard state.downloadRequested.insert(id).inserted else { return false }
            state.downloadQueue.append(id)
            guard state.downloadWorkers < 2 else { return false }
            state.downloadWorkers += 1
            return true
        }
        guard startWorker else { return }
        Task.detached { [self] in
            while let next = state.withLock({ state -> ItemID? in
                guard !state.downloadQueue.isEmpty else {
                    state.downloadWorkers -= 1
                    return nil
                }
                return state.downloadQueue.removeFirst()
            }) {
                try? await downloadAll(next)
                _ = state.withLock { $0.downloadRequested.remove(next) }
            }
            enforceCacheBound()
        }
    }

    /// Chunk fetches one file download keeps in flight: enough to hide the store's latency
    /// and spread verification over the cores.
    static let fetchesInFlight = 8

    /// Fetches chunks (`fetchesInFlight` at once) into the content file of `id`, if it
    /// still holds `version` when each arrives, in aligned windows (`WindowedLanding`).
    func fetch(_ id: ItemID, _ pieces: [ContentChunker.Piece], version: [ChunkRef]) async throws(ReplicaError) {
        guard !pieces.isEmpty else { return }
        state.withLock { _ = $0.downloading.insert(id) }
        defer { state.withLock { _ = $0.downloading.remove(id) } }
        let landing = WindowedLanding(pieces.map(\.range))
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                var started = 0
                for (index, piece) in pieces.enumerated() {
                    if started >= Replica.fetchesInFlight {
                        try await group.next()
                        try recordLandedChunk(id, version: version)
                    }
                    landing.fetching(index)
                    group.addTask { try await self.fetch(id, piece, index, landing, version: version) }
                    started += 1
                }
                while try await group.next() != nil {
                    try recordLandedChunk(id, version: version)
                }
            }
            state.withLock { _ = $0.downloadErrors.removeValue(forKey: id) }
        } catch {
            let wrapped = ReplicaError.wrapping(error)
            state.withLock { $0.downloadErrors[id] = wrapped.description }
            logger.error("download of \(id) failed: \(wrapped)")
            throw wrapped
        }
    }

    /// Downloaded chunks between two records of a download's progress in the database.
    static let chunksPerProgressRecord = 64

    /// Counts a chunk of `id` landed and records which bytes of it are present once
    /// `chunksPerProgressRecord` have landed since the last record, or the copy is whole; if
    /// it still holds `version` (a local write or a newer version records itself). Not per
    /// chunk, nor per read that fetched one: the record names every chunk of the file, so a
    /// record per 1 MiB read of a cold file cost a sixth of the daemon's time (W1 on S3). A
    /// crash before a record only means those chunks are downloaded again.
    private func recordLandedChunk(_ id: ItemID, version: [ChunkRef]) throws(ReplicaError) {
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            let record = state.withLock { state -> ContentRecord? in
                guard let record = state.content[id], record.chunks == version, !record.dirty else {
                    state.chunksSinceProgressRecord[id] = nil
                    return nil
                }
                let unrecorded = state.chunksSinceProgressRecord[id, default: 0] + 1
                guard unrecorded >= Replica.chunksPerProgressRecord || record.isComplete else {
                    state.chunksSinceProgressRecord[id] = unrecorded
                    return nil
                }
                state.chunksSinceProgressRecord[id] = nil
                return record
            }
            if let record { try saveContent(id, record) }
        }
    }

    /// Fetches piece `index` of a download and returns once its bytes are in the content file.
    /// A read fetching the same chunk meanwhile is joined, not repeated.
    private func fetch(
        _ id: ItemID, _ piece: ContentChunker.Piece, _ index: Int, _ landing: WindowedLanding, version: [ChunkRef]
    ) async throws {
        let (download, isNew) = downloads.start("\(id)/\(piece.offset)/\(piece.ref.hash)") { [self] in
            let bytes: WindowedLanding.Bytes
            do {
                // A run of zeros is not downloaded: it becomes a hole, and a sparse file stays sparse.
                if chunker.isZeroRunChunk(piece.ref) {
                    bytes = .zeros
                } else {
                    let packed = synced.withLock { $0.packedChunks[piece.ref.hash] }
                    if packed == nil, let local = await localChunk(piece.ref) {
                        bytes = .data(local)
                    } else {
                        bytes = .data(try await readChunk(piece.ref, of: id))
                    }
                    state.withLock { _ = $0.storedChunks.insert(piece.ref.hash) }
                }
            } catch {
                try? await land(landing.notComing(index), of: id, version: version, landing)
                throw error
            }
            try await land(landing.arrived(index, bytes), of: id, version: version, landing)
            try await landing.landed(index)
        }
        if !isNew { try await land(landing.notComing(index), of: id, version: version, landing) }
        try await download.value
    }

    /// A directory store's chunk, read from its file and checked, without the waits and
    /// retries of `readChunk`; nil where the store has no local files, or when anything
    /// failed (`readChunk` then fetches it, with its waits and retries: a chunk another device
    /// is still uploading, a store out of reach).
    private func localChunk(_ ref: ChunkRef) async -> Data? {
        try? await BlockingIO.run { [self] () throws -> Data? in
            guard let chunk = try container.openChunk(ref) else { return nil }
            return try container.read(chunk, of: ref)
        }
    }

    /// Makes a download's `writes` in the content file of `id` (each under the file's lock,
    /// if it still holds `version`: a local write or a newer version must not get these
    /// bytes) and counts their bytes present. Every write is reported to `landing`, made or
    /// failed; the first failure is thrown.
    private func land(
        _ writes: [WindowedLanding.Write], of id: ItemID, version: [ChunkRef], _ landing: WindowedLanding
    ) async throws {
        guard !writes.isEmpty else { return }
        try await BlockingIO.run { [self] in
            var firstError: (any Error)?
            for write in writes {
                do {
                    try land(write, of: id, version: version)
                    landing.finished(write, error: nil)
                } catch {
                    landing.finished(write, error: error)
                    firstError = firstError ?? error
                }
            }
            if let firstError { throw firstError }
        }
    }

    private func land(_ write: WindowedLanding.Write, of id: ItemID, version: [ChunkRef]) throws {
        try fileLocks.withLock(id) {
            @Sendable func holdsVersion(_ state: ReplicaState) -> Bool {
                state.content[id].map { $0.chunks == version && !$0.dirty } ?? false
            }
            guard state.withLock({ holdsVersion($0) }) else { return }
            let fd = try FileDescriptor.open(files.contentPath(id), .readWrite, options: [.closeOnExec])
            defer { try? fd.close() }
            if write.isZeros {
                try FileIO.zero(fd, offset: write.range.lowerBound, count: write.range.count)
            } else {
                try FileIO.writeAll(fd, write.parts, offset: write.range.lowerBound)
            }
            state.withLock { state in
                guard holdsVersion(state) else { return }
                state.content[id]?.present.insert(write.range)
            }
        }
    }

    /// Reads a chunk of `id`. While another device is still uploading the item's content
    /// (metadata first), a missing chunk is waited for, up to `pendingContentWait`; while
    /// the store cannot be reached, up to `offlineWait`, with `downloadingError` saying why
    /// (a network blip of a second or two must not fail programs).
    private func readChunk(_ ref: ChunkRef, of id: ItemID) async throws -> Data {
        let start = ContinuousClock.now
        let deadline = start + configuration.pendingContentWait
        var retry = Duration.milliseconds(100)
        while true {
            // Looked up on each try: a pull meanwhile may have moved it (a repack).
            let packed = synced.withLock { $0.packedChunks[ref.hash] }
            do {
                return try await container.readChunk(ref, packedAt: packed)
            } catch let error as StoreError {
                if case .unavailable = error {
                    guard !configuration.offline, ContinuousClock.now - start < configuration.offlineWait else { throw error }
                    state.withLock { $0.downloadErrors[id] = ReplicaError.store(error).description }
                    try await Task.sleep(for: retry)
                    retry = min(retry * 2, .seconds(1))
                    continue
                }
                guard case .notFound = error else { throw error }
                let movedMeanwhile = synced.withLock { $0.packedChunks[ref.hash] != packed }
                let pending = state.withLock { $0.view.item(id)?.isContentPending == true }
                // The entry saying where the chunks went may have landed since the look-up above.
                if movedMeanwhile { continue }
                guard pending else { throw error }
                guard ContinuousClock.now < deadline else {
                    throw ReplicaError.contentNotUploaded(
                        "the device that wrote this file has not finished uploading it "
                            + "(waited \(configuration.pendingContentWait)); try again later")
                }
                // The entry that says the chunks are stored may name the packs they went into:
                // the background loop pulls now rather than at its next poll.
                loop.wakeup.signal()
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Sets the local file's length (its content must be present up to `size`).
    func resizeLocal(_ id: ItemID, to size: UInt64) throws(ReplicaError) {
        try Replica.checkFileSize(size)
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            // Counted as a write in flight: a commit chunking meanwhile starts again after it.
            try state.withLock { state throws(ReplicaError) in
                guard state.itemOfOpenHandle(id) != nil || state.content[id] != nil else { throw .notFound }
                state.writesInFlight[id, default: 0] += 1
            }
            defer {
                state.withLock { state in
                    state.writesInFlight[id, default: 1] -= 1
                    if state.writesInFlight[id] == 0 { state.writesInFlight[id] = nil }
                }
            }
            try copyQueuedBytesAside(of: id, in: size..<UInt64.max)
            // Recorded first, then done, then shown: a record that cannot be saved (a full
            // disk) leaves the file, the database and memory as they were.
            let (previous, record) = state.withLock { state in
                let previous = state.content[id]
                var record = previous ?? .empty
                if size > record.size { record.present.insert(record.size..<size) }
                record.present.truncate(to: size)
                record.size = size
                record.dirty = true
                return (previous, record)
            }
            try saveContent(id, record)
            do throws(ReplicaError) {
                try setLength(of: id, to: size)
            } catch {
                try? saveContent(id, previous)
                throw error
            }
            state.withLock { state in
                if previous?.dirty != true { state.changedSinceClean[id] = ByteRanges() }
                // Cut away, or grown with zeros: either way those bytes are not the old ones.
                let oldSize = previous?.size ?? 0
                state.changedSinceClean[id]?.insert(min(size, oldSize)..<max(size, oldSize))
                state.content[id] = record
                state.writeGeneration[id, default: 0] += 1
                let now = Timestamp.now()
                state.dirtyMtime[id] = now
                state.dirtyCtime[id] = now
            }
        }
    }

    /// Sets the length of the content file of `id`, creating it if needed (sparse).
    func setLength(of id: ItemID, to size: UInt64) throws(ReplicaError) {
        do {
            let fd = try files.openContent(id, writable: true)
            defer { try? fd.close() }
            guard ftruncate(fd.rawValue, off_t(size)) == 0 else { throw Errno(rawValue: errno) }
        } catch {
            throw .localFailure("cannot resize the cache file of \(id)", error)
        }
    }

    /// Before bytes of the content file of `id` in `range` change, the chunks of queued
    /// versions whose only copy they are get copied aside (staged: read, hashed, synced).
    /// The caller holds the file's lock (so no commit names new chunks of it meanwhile), not
    /// the state lock: other requests do not wait behind the copy.
    func copyQueuedBytesAside(of id: ItemID, in range: Range<UInt64>) throws(ReplicaError) {
        let pieces = state.withLock { $0.unstaged.pieces(of: id, overlapping: range) }
        guard !pieces.isEmpty else { return }
        do {
            for changed in try copyAside(pieces, of: id) {
                logger.error("queued chunk \(changed.ref.hash) of \(id) changed before it was uploaded")
            }
        } catch {
            throw .localFailure("cannot copy queued bytes of \(id) aside before changing them", error)
        }
        _ = state.withLock { $0.unstaged.take(of: id, overlapping: range) }
    }

    /// Stages the chunks of `pieces` not staged yet, read from the content file of `id`;
    /// returns those whose bytes there no longer match their hash (not staged).
    private func copyAside(_ pieces: [ContentChunker.Piece], of id: ItemID) throws -> [ContentChunker.Piece] {
        // A file resting in the staging log has no cache file to open.
        let inLog = state.withLock { $0.content[id]?.staged != nil }
        let fd = inLog ? nil : try files.openContent(id, writable: false)
        defer { try? fd?.close() }
        var changed: [ContentChunker.Piece] = []
        for piece in pieces where !files.isStaged(piece.ref.hash) {
            let data: Data
            if let fd {
                data = try FileIO.read(fd, offset: piece.offset, count: Int(piece.ref.size))
            } else {
                data = stagedBytes(of: piece, in: id).flatMap { $0 } ?? Data()
            }
            guard ChunkHash(of: data) == piece.ref.hash else {
                changed.append(piece)
                continue
            }
            try files.stage(piece.ref.hash, data)
        }
        return changed
    }

    /// Chunks a written file and queues its new version (one change, see `enqueue`); the
    /// chunks stay in the content file until uploaded (`UnstagedChunks`). Writes that land
    /// while chunking make it start over. `descriptor`: the content file, if the caller has
    /// it open (it is read from there, without opening the file again).
    func commit(_ id: ItemID, durable: Bool, reading descriptor: FileDescriptor? = nil) throws(ReplicaError) {
        // fsync: the disk write of the content file runs while the file is chunked.
        let flush = durable ? files.startSyncingContent(id) : nil
        defer { try? flush?.wait() }
        // Written by the kernel (passthrough) and still open so: its bytes may change while
        // it is chunked, so its chunks are copied aside before it is queued (and it is
        // chunked again if they changed meanwhile), and it stays dirty.
        let outside = state.withLock { $0.outsideWriters[id] != nil }
        var attempts = 0
        while true {
            if outside { refreshOutsideWritten(id) }
            let snapshot = state.withLock {
                state -> (generation: UInt64, size: UInt64, writing: Bool, previous: [ChunkRef], changed: ByteRanges?)? in
                guard let record = state.content[id], record.dirty else { return nil }
                return (
                    state.writeGeneration[id, default: 0], record.size, state.writesInFlight[id] != nil,
                    record.chunks, state.changedSinceClean[id]
                )
            }
            guard let snapshot else { break }  // nothing new to queue (an fsync still syncs)
            // Chunked whole each time: a large one is queued at its close (an fsync still
            // makes it durable here, and a crash leaves it dirty: queued by the next mount).
            if outside && snapshot.size > Replica.largestFileQueuedWhileWrittenOutside { break }
            // Grown past the limit by the kernel's own writes (passthrough, unchecked): not
            // queued (its chunk list alone would not fit in memory); it stays in the cache.
            if snapshot.size > Replica.largestFile {
                throw .tooLarge("\(id) is \(snapshot.size) bytes, past the largest file icloudfs keeps (\(Replica.largestFile) bytes): not queued")
            }
            if snapshot.writing {  // another thread is copying bytes in: chunk after it
                usleep(200)
                continue
            }
            let pieces: [ContentChunker.Piece]
            do {
                let fd = try descriptor ?? files.openContent(id, writable: false)
                defer { if descriptor == nil { try? fd.close() } }
                pieces = try ContentChunker(chunker: chunker).chunks(
                    of: fd, size: snapshot.size, previous: snapshot.previous, changed: snapshot.changed
                ).pieces
            } catch {
                // Truncated while it was read: chunk it again as it is now.
                let changed = state.withLock {
                    $0.writeGeneration[id, default: 0] != snapshot.generation || $0.writesInFlight[id] != nil
                }
                if changed { continue }
                throw .localFailure("cannot read the cache file of \(id) to queue it", error)
            }
            if outside {
                let stored = state.withLock { $0.storedChunks }
                let changed: [ContentChunker.Piece]
                do {
                    changed = try copyAside(pieces.filter { !stored.contains($0.ref.hash) && !$0.isZeros }, of: id)
                } catch {
                    throw .localFailure("cannot copy the chunks of \(id) aside to queue it", error)
                }
                if !changed.isEmpty {
                    attempts += 1
                    if attempts < 3 { continue }
                    return  // still being written: queued at a later fsync or at the close
                }
            }
            // Under the file's lock: the chunks it queues must not appear while a write is
            // copying that file's queued bytes aside.
            let done = try fileLocks.withLock(id) { () throws(ReplicaError) -> Bool in
                let finished = try state.withLock { state throws(ReplicaError) -> (done: Bool, save: ContentRecord?) in
                    guard let record = state.content[id], record.dirty else { return (true, nil) }
                    guard state.writeGeneration[id, default: 0] == snapshot.generation, state.writesInFlight[id] == nil else {
                        return (false, nil)
                    }
                    // Bytes never downloaded read as zeros in the cache file: queuing them would
                    // replace the file's content with zeros everywhere, for good.
                    guard record.present.coveredBytes(below: snapshot.size) == snapshot.size else {
                        throw .local(
                            "\(state.view.path(of: id) ?? id.rawValue) is not completely downloaded "
                                + "(\(record.present.coveredBytes(below: snapshot.size)) of \(snapshot.size) bytes): not queued")
                    }
                    let stillWritten = outside && state.outsideWriters[id] != nil
                    let save = queueVersion(
                        of: id, pieces, size: snapshot.size, record: record, stagesChunks: !outside,
                        stillWritten: stillWritten, &state)
                    return (true, save)
                }
                // Recorded as queued changes are (`enqueue`): it waits, in order, until it
                // commits, so the database never stays behind the clean record memory holds.
                if let record = finished.save {
                    database.saveContentSoon(id, record)
                }
                return finished.done
            }
            if done { break }
        }
        if let flush {
            do {
                try flush.wait()
            } catch {
                throw .localFailure("cannot flush the cache file of \(id)", error)
            }
            try makeDurable(id)
        }
    }

    /// Queues `pieces` (`size` bytes) as the file's new version, with the attributes set
    /// while it was written; its record becomes clean (unless the kernel still writes the
    /// file: `stillWritten`) and, with `stagesChunks`, its chunks wait for upload where they
    /// are (an outside-written file's were copied aside already). Under the state lock.
    /// Returns the record to save when no queued change carries it (no name yet, unlinked
    /// here, nothing changed), nil when one does.
    func queueVersion(
        of id: ItemID, _ pieces: [ContentChunker.Piece], size: UInt64, record: ContentRecord, stagesChunks: Bool,
        stillWritten: Bool, _ state: inout ReplicaState
    ) -> ContentRecord? {
        var record = record
        let chunks = pieces.map(\.ref)
        let written = state.dirtyMtime[id] != nil
        let mtime = state.dirtyMtime[id] ?? Timestamp.now()
        let mode = state.dirtyMode.removeValue(forKey: id)
        let owner = state.dirtyOwner.removeValue(forKey: id)
        let atime = state.dirtyAtime.removeValue(forKey: id)
        let ctime = state.dirtyCtime.removeValue(forKey: id)
        record.chunks = chunks
        record.size = size
        record.present = ByteRanges([0..<size])
        record.dirty = stillWritten
        state.content[id] = record
        state.changedSinceClean[id] = nil
        state.dirtyMtime[id] = nil
        if var anonymous = state.anonymousFiles[id] {  // no name yet: nothing to queue
            anonymous.size = size
            anonymous.chunks = chunks
            if written { anonymous.mtime = mtime }
            anonymous.mode = mode ?? anonymous.mode
            if let owner { anonymous.owner = owner == .root ? nil : owner }
            anonymous.atime = atime ?? anonymous.atime
            anonymous.ctime = ctime ?? anonymous.ctime
            state.anonymousFiles[id] = anonymous
            return record
        }
        guard let item = state.view.item(id), state.view.isLive(id) || !state.unlinkedHere.contains(id) else {
            return record  // unlinked here while open: the bytes go with it
        }
        // Deleted on another device while open here: the edit is queued anyway and
        // revives the file (an edit beats a delete).
        let unchanged = state.view.isLive(id) && item.chunks == chunks && item.size == size
        if unchanged && !written && mode == nil && owner == nil && atime == nil {  // created and closed without a write: nothing to queue
            return record
        }
        var update = ItemOperation.Update(
            id: id, base: 0, content: unchanged ? nil : Content(size: size, chunks: chunks),
            mode: mode, mtime: unchanged && !written ? nil : mtime, owner: owner)
        update.atime = atime
        update.ctime = ctime
        let base = state.openedBase[id] ?? state.device.base(of: id)
        enqueue([(.update(update), unchanged ? nil : base)], &state, content: [id])
        // Runs of zeros (fallocate, sparse files) are made anew for upload: their
        // content file need not keep them, and a deleted one frees its space at once.
        if !unchanged && stagesChunks {
            state.unstaged.add(
                pieces.filter { !state.storedChunks.contains($0.ref.hash) && !$0.isZeros }, of: id)
        }
        if state.openedBase[id] != nil { state.openedBase[id] = state.device.base(of: id) }
        return nil
    }

    /// Flushes the queued version of `id` to disk: its content file (where its chunks are;
    /// bytes copied aside are synced when copied), then the state database (the queue).
    /// After `commit`'s early flush this fsync finds little left: only writes that landed
    /// between that flush's start and the chunking, which the queued version may hold.
    func makeDurable(_ id: ItemID) throws(ReplicaError) {
        do {
            try files.syncContent(id)
            try database.makeDurable()
        } catch {
            throw .localFailure("cannot flush \(files.databasePath)", error)
        }
    }

    func saveContent(_ id: ItemID, _ record: ContentRecord?) throws(ReplicaError) {
        do {
            try database.write { db in try database.saveContent(id, record, db) }
        } catch {
            throw .localFailure("cannot record cache state in \(files.databasePath)", error)
        }
    }

    /// At start, the cache's files against their records. Files written before a crash and
    /// never queued: their bytes are queued now, as they are on disk (nothing a program wrote
    /// is dropped). Downloaded copies shorter than their records say (a crash between
    /// removing a deleted file's bytes and recording the delete, a cache cleaned by hand)
    /// have those bytes downloaded again instead of read as zeros.
    func reconcileContentFiles() {
        let (dirty, downloaded) = state.withLock { state in
            (state.content.filter(\.value.dirty).map(\.key),
             state.content.filter { !$0.value.dirty && !$0.value.present.ranges.isEmpty && $0.value.staged == nil }.map(\.key))
        }
        for id in downloaded {
            var info = stat()
            let length = stat(files.contentPath(id), &info) == 0 ? UInt64(info.st_size) : 0
            let trimmed = state.withLock { state -> ContentRecord? in
                guard var record = state.content[id], length < record.size else { return nil }
                let before = record.present
                record.present.truncate(to: length)
                guard record.present != before else { return nil }
                state.content[id] = record
                return record
            }
            guard let trimmed else { continue }
            logger.warning("the cached copy of \(id) is shorter than recorded (\(length) bytes): the rest is downloaded again")
            try? saveContent(id, trimmed)
        }
        for id in dirty {
            var info = stat()
            let size = stat(files.contentPath(id), &info) == 0 ? UInt64(info.st_size) : 0
            state.withLock { state in
                state.content[id]?.size = size
                state.content[id]?.present = ByteRanges([0..<size])
            }
            logger.notice("queuing \(id), written before the last shutdown")
        }
        guard !dirty.isEmpty else { return }
        let queuing = Task.detached(priority: .background) { [self] in
            for id in dirty { try? commit(id, durable: true) }
        }
        startupQueuing.withLock { $0 = queuing }
    }
}
