import BlobStore
import CLinux
import ContainerFormat
import Foundation
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Cuts a local content file into the container's chunks. Given the chunks of the version
/// the file held before and the byte ranges written since, only the chunks around those
/// writes are read and hashed: a chunk boundary depends only on the bytes since the chunk's
/// start, so the chunks before the first changed byte are the same, and once a new boundary
/// falls on an old one past the changes, the old chunks after it are the same too (until
/// the next change). A 4 KiB write into a 4 GiB file costs a few MiB read, not 4 GiB.
/// Holes (`SEEK_HOLE`) are not read: a run of zeros at a chunk start is always cut the same
/// way, into one known all-zero chunk.
struct ContentChunker {
    let chunker: Chunker

    struct Piece {
        var offset: UInt64
        var ref: ChunkRef
    }

    /// What chunking a file cost: bytes read from it and chunks hashed.
    struct Work {
        var bytesRead: UInt64 = 0
        var chunksHashed = 0
    }

    /// The chunks of the first `size` bytes of `fd`. `previous` is the chunk list of the
    /// file's earlier content and `changed` the bytes written (or truncated away) since;
    /// with `changed` nil (not known, as after a restart) every byte is chunked.
    func chunks(
        of fd: FileDescriptor, size: UInt64, previous: [ChunkRef] = [], changed: ByteRanges? = nil
    ) throws -> (pieces: [Piece], work: Work) {
        var reader = Reader(fd: fd, size: size, maximum: chunker.parameters.maximumSize)
        let reusable = Reusable(previous: previous, changed: changed, size: size)
        var pieces: [Piece] = []
        var position: UInt64 = 0
        var next = 0  // into reusable.pieces: the first whose offset is >= position
        while position < size {
            // Old chunks that start here and hold no changed byte are still the file's chunks.
            while next < reusable.pieces.count, reusable.pieces[next].offset < position { next += 1 }
            while next < reusable.pieces.count, reusable.pieces[next].offset == position, reusable.isClean(next) {
                pieces.append(reusable.pieces[next])
                position += UInt64(reusable.pieces[next].ref.size)
                next += 1
            }
            guard position < size else { break }
            pieces.append(try reader.chunk(at: position, with: chunker, zero: zeroChunk))
            position += UInt64(pieces.last!.ref.size)
        }
        return (pieces, reader.work)
    }

    /// The chunk a run of at least `maximumSize` zeros is cut into at a chunk start.
    private var zeroChunk: ChunkRef {
        ZeroChunks.chunk(for: chunker)
    }
}

/// The old chunks with their offsets, and which of them the changes since left intact.
private struct Reusable {
    let pieces: [ContentChunker.Piece]
    private let clean: [Bool]

    init(previous: [ChunkRef], changed: ByteRanges?, size: UInt64) {
        guard var changed, !previous.isEmpty else {
            pieces = []
            clean = []
            return
        }
        let pieces = ContentChunker.Piece.layout(previous)
        let previousSize = pieces.last!.range.upperBound
        // Bytes past either end changed; and the old last chunk ended where the file ended,
        // not at a content-defined boundary: unless the size is the same, it is cut anew.
        if previousSize != size {
            changed.insert(min(pieces.last!.offset, size)..<max(previousSize, size))
        }
        self.pieces = pieces
        clean = pieces.map { $0.range.upperBound <= size && !changed.overlaps($0.range) }
    }

    func isClean(_ index: Int) -> Bool { clean[index] }
}

/// Reads the file forward in blocks of up to two maximum chunks, never reading a hole
/// that spans a whole chunk.
private struct Reader {
    let fd: FileDescriptor
    let size: UInt64
    let maximum: Int
    var work = ContentChunker.Work()
    private var buffer: [UInt8]
    private var bufferOffset: UInt64 = 0  // file offset of buffer[0]
    private var filled = 0

    init(fd: FileDescriptor, size: UInt64, maximum: Int) {
        self.fd = fd
        self.size = size
        self.maximum = maximum
        // Small files (most files) need a small buffer: no 8 MiB to fault in per save.
        let capacity = Int(min(UInt64(maximum * 2), max(size, 1)))
        buffer = [UInt8](unsafeUninitializedCapacity: capacity) { _, count in count = capacity }
    }

    /// The chunk that starts at `position` (a chunk boundary).
    mutating func chunk(at position: UInt64, with chunker: Chunker, zero: ChunkRef) throws -> ContentChunker.Piece {
        if position + UInt64(maximum) <= size, isHole(position..<position + UInt64(maximum)) {
            return .init(offset: position, ref: zero)
        }
        let available = try fill(from: position)
        let isFinal = position + UInt64(available) >= size
        return buffer.withUnsafeBytes { raw in
            let start = Int(position - bufferOffset)
            let window = UnsafeRawBufferPointer(rebasing: raw[start..<start + available])
            // The window holds a maximum chunk or the rest of the file: a length is certain.
            let length = chunker.chunkLength(in: window, isFinal: isFinal)!
            work.chunksHashed += 1
            let bytes = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
            return .init(offset: position, ref: ChunkRef(hash: ChunkHash(of: bytes), size: UInt32(length)))
        }
    }

    /// Makes the buffer hold a maximum chunk from `position`, or the rest of the file;
    /// returns how many bytes from `position` it holds.
    private mutating func fill(from position: UInt64) throws -> Int {
        let wanted = Int(min(UInt64(maximum), size - position))
        let end = bufferOffset + UInt64(filled)
        if position >= bufferOffset, position + UInt64(wanted) <= end { return wanted }
        // Keep what is already read from `position` on; read the rest after it.
        var kept = 0
        if position >= bufferOffset, position < end {
            kept = Int(end - position)
            let from = Int(position - bufferOffset)
            buffer.withUnsafeMutableBytes { raw in
                raw.baseAddress!.copyMemory(from: raw.baseAddress! + from, byteCount: kept)
            }
        }
        bufferOffset = position
        filled = kept
        let capacity = buffer.count
        let target = Int(min(UInt64(capacity), size - position))
        while filled < target {
            let got = try buffer.withUnsafeMutableBytes { raw in
                try fd.read(
                    fromAbsoluteOffset: Int64(bufferOffset) + Int64(filled),
                    into: UnsafeMutableRawBufferPointer(rebasing: raw[filled..<target]))
            }
            if got == 0 { throw Errno.ioError }  // shorter than recorded: truncated meanwhile
            filled += got
            work.bytesRead += UInt64(got)
        }
        return wanted
    }

    /// Whether `range` holds no data at all (`SEEK_DATA` finds none before its end).
    private func isHole(_ range: Range<UInt64>) -> Bool {
        let data = lseek(fd.rawValue, off_t(range.lowerBound), ICLOUDFS_SEEK_DATA)
        if data < 0 { return errno == ENXIO }  // no data from here to the end of the file
        return UInt64(data) >= range.upperBound
    }
}

/// The all-zero chunk of each chunker, computed once.
private enum ZeroChunks {
    private static let cache = Mutex<[ChunkingParameters: ChunkRef]>([:])

    static func chunk(for chunker: Chunker) -> ChunkRef {
        if let known = cache.withLock({ $0[chunker.parameters] }) { return known }
        let zeros = [UInt8](repeating: 0, count: chunker.parameters.maximumSize)
        let ref = zeros.withUnsafeBytes { raw in
            let length = chunker.chunkLength(in: raw, isFinal: false)!
            return ChunkRef(hash: ChunkHash(of: UnsafeRawBufferPointer(rebasing: raw[0..<length])), size: UInt32(length))
        }
        cache.withLock { $0[chunker.parameters] = ref }
        return ref
    }
}
