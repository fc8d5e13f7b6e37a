import BlobStore
import CLinux
import ContainerFormat
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Cuts a local content file into the container's chunks. Given the chunks of the version
/// the file held before and the byte ranges written since, only the chunks around those
/// writes are read and hashed: a chunk boundary depends only on the bytes from the chunk's
/// start to a little past it (`zeroRunSize`), so the chunks before the first changed byte are
/// the same, and once a new boundary falls on an old one past the changes, the old chunks
/// after it are the same too (until the next change). Long runs of zeros are chunks of their
/// own (`Chunker`), so in a sparse file the boundaries line up again at the next hole: a 4 KiB
/// write into a 4 GiB file costs a few MiB read at most, not 4 GiB. Holes (`SEEK_DATA`,
/// `SEEK_HOLE`) are never read: their chunks are hashed from their length alone.
struct ContentChunker {
    let chunker: Chunker

    struct Piece {
        var offset: UInt64
        var ref: ChunkRef
        /// Cut from a run of zeros (`fallocate`, a sparse file's hole): an upload makes its
        /// bytes anew, so no local copy has to keep them.
        var isZeros = false
        /// The chunk's bytes, when its file was small enough to be read whole to cut it: the
        /// upload need not open and read the file again (`UnstagedChunks` keeps them, up to
        /// a bound).
        var bytes: Data? = nil
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
        let reusable = Reusable(previous: previous, changed: changed, size: size, chunker: chunker)
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
            pieces.append(try reader.chunk(at: position, with: chunker))
            position += UInt64(pieces.last!.ref.size)
        }
        return (pieces, reader.work)
    }

    /// The chunks of bytes held in memory (a new small file at its close): cut and hashed as
    /// `chunks(of:)` cuts the same bytes in a file, without a file. Each piece keeps its bytes
    /// (a run of zeros none: it is made anew for upload).
    func pieces(of data: Data) -> [Piece] {
        data.withUnsafeBytes { raw in
            var pieces: [Piece] = []
            var start = 0
            while start < raw.count {
                let rest = UnsafeRawBufferPointer(rebasing: raw[start...])
                let length = chunker.chunkLength(in: rest, isFinal: true)!
                // As `Reader.chunk`: a chunk that starts with a run of zeros is that run.
                let checked = min(rest.count, chunker.parameters.maximumSize, chunker.parameters.zeroRunSize)
                if Chunker.leadingZeros(in: rest, end: checked) == checked {
                    let ref = ChunkRef(hash: chunker.zeroChunkHash(length), size: UInt32(length))
                    pieces.append(Piece(offset: UInt64(start), ref: ref, isZeros: true))
                } else {
                    let bytes = UnsafeRawBufferPointer(rebasing: rest[..<length])
                    let ref = ChunkRef(hash: ChunkHash(of: bytes), size: UInt32(length))
                    // A file of one chunk (most small files) shares the caller's bytes.
                    pieces.append(Piece(offset: UInt64(start), ref: ref, bytes: length == raw.count ? data : Data(bytes)))
                }
                start += length
            }
            return pieces
        }
    }
}

/// The old chunks with their offsets, and which of them the changes since left intact.
private struct Reusable {
    let pieces: [ContentChunker.Piece]
    private let clean: [Bool]

    /// A boundary depends on some bytes after it (`Chunker.chunkLength`): a chunk followed
    /// by changed bytes that close is cut anew.
    init(previous: [ChunkRef], changed: ByteRanges?, size: UInt64, chunker: Chunker) {
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
        clean = pieces.map { piece in
            let lookahead = chunker.isZeroRunChunk(piece.ref) ? piece.ref.size : UInt32(chunker.parameters.zeroRunSize)
            return piece.range.upperBound <= size
                && !changed.overlaps(piece.range.lowerBound..<piece.range.upperBound + UInt64(lookahead))
        }
    }

    func isClean(_ index: Int) -> Bool { clean[index] }
}

/// Reads the file forward, never reading a hole: a chunk's window stops shortly after the
/// start of a hole long enough to end it.
private struct Reader {
    let fd: FileDescriptor
    let size: UInt64
    let maximum: Int
    var work = ContentChunker.Work()
    private var buffer: [UInt8]
    private var bufferOffset: UInt64 = 0  // file offset of buffer[0]
    private var filled = 0

    /// Small files are read whole, holes and all: asking where their holes are cost more
    /// system calls (three `lseek`s per small file) than reading their zeros.
    private let readsWhole: Bool

    init(fd: FileDescriptor, size: UInt64, maximum: Int) {
        self.fd = fd
        self.size = size
        self.maximum = maximum
        readsWhole = size <= 256 << 10
        // Small files (most files) need a small buffer: no 4 MiB to fault in per save.
        let capacity = Int(min(UInt64(maximum), max(size, 1)))
        buffer = [UInt8](unsafeUninitializedCapacity: capacity) { _, count in count = capacity }
    }

    /// The chunk that starts at `position` (a chunk boundary).
    mutating func chunk(at position: UInt64, with chunker: Chunker) throws -> ContentChunker.Piece {
        let window = Int(min(UInt64(maximum), size - position))
        let run = UInt64(chunker.parameters.zeroRunSize)
        // A chunk that starts with a long run of zeros ends where they do (`Chunker`).
        let checked = min(UInt64(window), run)
        if try zeros(from: position, upTo: position + checked) == checked {
            let zeros = Int(try zeros(from: position, upTo: position + UInt64(window)))
            let length = chunker.zeroChunkLength(zeros: zeros, end: window)!  // a run, or zeros to the end
            return .init(offset: position, ref: ChunkRef(hash: chunker.zeroChunkHash(length), size: UInt32(length)), isZeros: true)
        }
        // Data: read no further than just past a hole that will end this chunk.
        if let holeAhead = firstHole(from: position, before: position + UInt64(window), length: run),
            let piece = try chunk(at: position, count: min(window, Int(holeAhead + run - position)), with: chunker)
        {
            return piece
        }
        return try chunk(at: position, count: window, with: chunker)!
    }

    /// The chunk at `position` found in the next `count` bytes, if they are enough to tell.
    private mutating func chunk(at position: UInt64, count: Int, with chunker: Chunker) throws -> ContentChunker.Piece? {
        let available = try fill(from: position, count: count)
        let isFinal = position + UInt64(available) >= size
        return buffer.withUnsafeBytes { raw in
            let start = Int(position - bufferOffset)
            let window = UnsafeRawBufferPointer(rebasing: raw[start..<start + available])
            guard let length = chunker.chunkLength(in: window, isFinal: isFinal) else { return nil }
            work.chunksHashed += 1
            let bytes = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
            return .init(
                offset: position, ref: ChunkRef(hash: ChunkHash(of: bytes), size: UInt32(length)),
                bytes: readsWhole ? Data(bytes) : nil)
        }
    }

    /// How many zero bytes start at `position`, up to `limit`: holes are skipped, not read.
    private mutating func zeros(from position: UInt64, upTo limit: UInt64) throws -> UInt64 {
        var at = position
        while at < limit {
            let data = nextData(from: at)
            if data > at {
                at = min(data, limit)
                continue
            }
            let end = min(nextHole(from: at), limit, at + UInt64(buffer.count))
            let count = try fill(from: at, count: Int(end - at))
            let zeros = buffer.withUnsafeBytes { raw in
                let start = Int(at - bufferOffset)
                return Chunker.leadingZeros(in: UnsafeRawBufferPointer(rebasing: raw[start..<start + count]), end: count)
            }
            at += UInt64(zeros)
            if zeros < count { break }
        }
        return min(at, limit) - position
    }

    /// Makes the buffer hold the `count` bytes from `position` (fewer at the end of the
    /// file); returns how many it holds.
    private mutating func fill(from position: UInt64, count: Int) throws -> Int {
        let wanted = Int(min(UInt64(count), size - position))
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
        while filled < wanted {
            let got = try buffer.withUnsafeMutableBytes { raw in
                try fd.read(
                    fromAbsoluteOffset: Int64(bufferOffset) + Int64(filled),
                    into: UnsafeMutableRawBufferPointer(rebasing: raw[filled..<wanted]))
            }
            if got == 0 { throw Errno.ioError }  // shorter than recorded: truncated meanwhile
            filled += got
            work.bytesRead += UInt64(got)
        }
        return wanted
    }

    /// The start of the first hole of at least `length` bytes that starts in `position..<end`.
    private func firstHole(from position: UInt64, before end: UInt64, length: UInt64) -> UInt64? {
        var at = position
        for _ in 0..<64 {  // short holes between: past so many, reading is as cheap
            let hole = nextHole(from: at)
            guard hole < end else { return nil }
            let data = nextData(from: hole)
            if data - hole >= length { return hole }
            at = data
        }
        return nil
    }

    /// The first offset at or after `position` that holds data (`size` if none).
    private func nextData(from position: UInt64) -> UInt64 {
        if readsWhole { return position }
        let data = lseek(fd.rawValue, off_t(position), ICLOUDFS_SEEK_DATA)
        if data < 0 { return errno == ENXIO ? size : position }  // ENXIO: only a hole up to the end
        return min(UInt64(data), size)
    }

    /// The first offset at or after `position` in a hole (`size` if none before it).
    private func nextHole(from position: UInt64) -> UInt64 {
        if readsWhole { return size }
        let hole = lseek(fd.rawValue, off_t(position), ICLOUDFS_SEEK_HOLE)
        return hole < 0 ? size : min(UInt64(hole), size)
    }
}
