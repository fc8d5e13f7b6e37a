import CLinux
import Foundation
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Where the bytes of new small files rest once closed, instead of a cache file each
/// (docs/ARCHITECTURE.md, "The path of a small file"): appended back to back to segment files
/// in the cache's `staging` folder, read back by their location, and a segment removed once
/// no location in it is held. Making an ext4 file per small file bounds a burst of creates
/// below the goal with no other work at all (Scripts/bench, "Keeping the bytes"); one append
/// to a file already open does not.
///
/// Who holds a location (a content record) says so: `append` hands one back held, `hold`
/// takes one again at a start, `letGo` drops it. A location is read only while held.
/// Segments written before a restart are never appended to again: their end may be torn.
///
/// A segment nobody holds is not removed at once but dropped: the database may still name
/// it (a record's move out of it is saved a moment later), and the replica removes it once
/// neither memory nor the database does (`Replica.tidyStagingLog`). A segment mostly let go
/// (`sparseSegments`) has its held pieces moved to the end of the log, so deleted files'
/// bytes do not stay for as long as one file beside them does.
final class StagingLog: Sendable {
    struct Location: Hashable, Sendable {
        var segment: UInt32
        var offset: UInt64
        var size: UInt32
    }

    /// A segment is closed for appends once it would pass this size.
    let segmentSize: UInt64
    let folder: String

    private struct Segment {
        var fd: Int32
        var held = 0
        /// Bytes of the held locations.
        var heldBytes: UInt64 = 0
        /// The end of the furthest location known in it.
        var end: UInt64 = 0

        mutating func count(_ location: Location, as sign: Int) {
            held += sign
            heldBytes = sign > 0 ? heldBytes + UInt64(location.size) : heldBytes - min(heldBytes, UInt64(location.size))
            end = max(end, location.offset + UInt64(location.size))
        }
    }

    private struct State {
        var segments: [UInt32: Segment] = [:]
        /// The segment appends go to, and where the next one lands in it.
        var appending: (segment: UInt32, end: UInt64)?
        var nextSegment: UInt32
        /// Segments no one holds, waiting to be removed (`removeDropped`), with their
        /// descriptors: a reader that found a location just before its move still reads it.
        var dropped: [UInt32: Int32] = [:]
    }

    private let state: Mutex<State>

    init(folder: String, segmentSize: UInt64 = 64 << 20) throws {
        self.folder = folder
        self.segmentSize = segmentSize
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let existing = try FileManager.default.contentsOfDirectory(atPath: folder).compactMap(StagingLog.segmentNumber)
        state = Mutex(State(nextSegment: (existing.max() ?? 0) + 1))
    }

    deinit {
        state.withLock { state in
            for fd in state.segments.values.map(\.fd) + state.dropped.values where fd >= 0 { close(fd) }
        }
    }

    /// Appends `bytes` as one piece; the location comes back held. Throws when no segment
    /// can be made (the disk is full: each segment's space is taken when it is made).
    func append(_ bytes: Data) throws -> Location {
        let (location, fd) = try state.withLock { state throws -> (Location, Int32) in
            if let appending = state.appending, appending.end > 0, appending.end + UInt64(bytes.count) > segmentSize {
                state.appending = nil
                removeIfUnheld(appending.segment, &state)
            }
            if state.appending == nil { try startSegment(&state) }
            let segment = state.appending!.segment
            let location = Location(segment: segment, offset: state.appending!.end, size: UInt32(bytes.count))
            state.appending!.end += UInt64(bytes.count)
            state.segments[segment]!.count(location, as: 1)
            return (location, state.segments[segment]!.fd)
        }
        // Outside the lock: appends to distinct places of one file need no order.
        do {
            try bytes.withUnsafeBytes { raw in
                try StagingLog.writeAll(fd, raw, at: location.offset)
            }
        } catch {
            letGo(location)
            throw error
        }
        return location
    }

    /// The bytes at a held location.
    func read(_ location: Location) throws -> Data {
        guard let fd = try descriptor(of: location.segment) else { throw Errno.noSuchFileOrDirectory }
        var data = Data(count: Int(location.size))
        let count = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(location.offset)) }
        guard count >= 0 else { throw Errno(rawValue: errno) }
        guard count == Int(location.size) else { throw Errno.ioError }  // cut short: the log was truncated
        return data
    }

    /// Holds a location found in a record at a start (`removeUnheld` follows).
    func hold(_ location: Location) {
        state.withLock { state in
            if state.segments[location.segment] == nil { state.segments[location.segment] = Segment(fd: -1) }
            if let fd = state.dropped.removeValue(forKey: location.segment) { state.segments[location.segment]!.fd = fd }
            state.segments[location.segment]!.count(location, as: 1)
        }
    }

    /// Drops a hold; a segment no longer appended to is dropped with its last.
    func letGo(_ location: Location) {
        state.withLock { state in
            guard state.segments[location.segment] != nil else { return }
            state.segments[location.segment]!.count(location, as: -1)
            removeIfUnheld(location.segment, &state)
        }
    }

    /// At a start, once every record's location is held: removes the segments none holds
    /// (written before a crash by files whose records were never saved), and gives back the
    /// space the last one took ahead beyond its end (it is never appended to again).
    func removeUnheld() throws {
        let held = state.withLock { Set($0.segments.filter { $0.value.held > 0 }.keys) }
        let numbers = try FileManager.default.contentsOfDirectory(atPath: folder).compactMap(StagingLog.segmentNumber)
        for number in numbers where !held.contains(number) {
            state.withLock { state in
                if state.appending?.segment != number { drop(number, &state) }
            }
        }
        removeDropped(except: [])
        if let last = numbers.max(), held.contains(last), let fd = try descriptor(of: last) {
            var info = stat()
            // A truncate to its own size frees the blocks past the end (a hole punched
            // there does not, on ext4).
            if fstat(fd, &info) == 0 { _ = ftruncate(fd, info.st_size) }
        }
    }

    /// Segments no longer appended to whose held bytes are under half of them (and at least
    /// a sixteenth of a segment is let go): their held pieces are worth moving (`move`).
    func sparseSegments() -> [UInt32] {
        state.withLock { state in
            state.segments.filter { number, segment in
                let loose = segment.end - min(segment.end, segment.heldBytes)
                return number != state.appending?.segment && segment.held > 0
                    && loose > segment.heldBytes && loose >= segmentSize / 16
            }.keys.sorted()
        }
    }

    /// Appends the bytes at a held location again (at the log's end); the new location
    /// comes back held, the old one stays held until its holder lets it go.
    func move(_ location: Location) throws -> Location {
        try append(try read(location))
    }

    /// Segments let go and waiting to be removed.
    var dropped: Set<UInt32> { state.withLock { Set($0.dropped.keys) } }

    /// Removes the dropped segments but those in `named` (still named by a record somewhere).
    func removeDropped(except named: Set<UInt32>) {
        let removed = state.withLock { state -> [(UInt32, Int32)] in
            let removed = state.dropped.filter { !named.contains($0.key) }
            for number in removed.keys { state.dropped[number] = nil }
            return removed.map { ($0.key, $0.value) }
        }
        for (number, fd) in removed {
            if fd >= 0 { close(fd) }
            unlink(path(of: number))
        }
    }

    // MARK: - Internals

    private func path(of segment: UInt32) -> String {
        "\(folder)/\(String(format: "%08u", segment)).log"
    }

    private static func segmentNumber(_ name: String) -> UInt32? {
        guard name.hasSuffix(".log"), name.count == 12 else { return nil }
        return UInt32(name.prefix(8))
    }

    /// The segment's descriptor, opened on first use after a start; nil if it is gone.
    private func descriptor(of segment: UInt32) throws -> Int32? {
        try state.withLock { state throws -> Int32? in
            guard let known = state.segments[segment] else { return state.dropped[segment] }
            if known.fd >= 0 { return known.fd }
            let fd = open(path(of: segment), O_RDWR | O_CLOEXEC)
            guard fd >= 0 else { throw Errno(rawValue: errno) }
            state.segments[segment]!.fd = fd
            return fd
        }
    }

    /// A new segment to append to, its space taken now (`fallocate`, its size unchanged):
    /// a small file's close, which no one can be told of a failure at, then never meets a
    /// full disk; the create of a file kept in memory checks there is room for a new one.
    private func startSegment(_ state: inout State) throws {
        let number = state.nextSegment
        let fd = open(path(of: number), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        if CLinux.fallocate(fd, ICLOUDFS_FALLOC_FL_KEEP_SIZE, 0, off_t(segmentSize)) != 0, errno != EOPNOTSUPP {
            let error = Errno(rawValue: errno)
            close(fd)
            unlink(path(of: number))
            throw error
        }
        state.nextSegment += 1
        state.segments[number] = Segment(fd: fd)
        state.appending = (number, 0)
    }

    private func removeIfUnheld(_ segment: UInt32, _ state: inout State) {
        guard let known = state.segments[segment], known.held <= 0, state.appending?.segment != segment else { return }
        drop(segment, &state)
    }

    /// Marks a segment for removal (a record lets its location go under the replica's state
    /// lock, which holds no file I/O). Numbers are never reused.
    private func drop(_ segment: UInt32, _ state: inout State) {
        state.dropped[segment] = state.segments.removeValue(forKey: segment)?.fd ?? -1
    }

    private static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws {
        var done = 0
        while done < bytes.count {
            let wrote = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if wrote < 0 {
                if errno == EINTR { continue }
                throw Errno(rawValue: errno)
            }
            done += wrote
        }
    }
}
