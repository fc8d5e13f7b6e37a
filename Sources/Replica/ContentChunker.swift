import BlobStore
import ContainerFormat
import Foundation
import SystemPackage

/// Cuts a local content file into the container's chunks, reading it in large blocks.
struct ContentChunker {
    let chunker: Chunker

    struct Piece {
        var offset: UInt64
        var ref: ChunkRef
    }

    /// The chunks of the first `size` bytes of `fd`.
    func chunks(of fd: FileDescriptor, size: UInt64) throws -> [Piece] {
        let maximum = chunker.parameters.maximumSize
        // Small files (most files) need a small buffer: no 16 MiB to fault in per save.
        let blockSize = Int(min(UInt64(max(maximum * 2, 16 << 20)), max(size, 1)))
        var buffer = [UInt8](unsafeUninitializedCapacity: blockSize) { _, count in count = blockSize }
        var pieces: [Piece] = []
        var fileOffset: UInt64 = 0  // of buffer[0]
        var filled = 0
        var start = 0
        while UInt64(start) + fileOffset < size {
            // Keep at least one maximum chunk ahead of `start`, unless the file ends sooner.
            if filled - start < maximum && fileOffset + UInt64(filled) < size {
                if start > 0 {
                    buffer.withUnsafeMutableBytes { raw in
                        raw.baseAddress!.copyMemory(from: raw.baseAddress! + start, byteCount: filled - start)
                    }
                    fileOffset += UInt64(start)
                    filled -= start
                    start = 0
                }
                let want = min(blockSize - filled, Int(size - fileOffset) - filled)
                let got = try buffer.withUnsafeMutableBytes { raw in
                    try fd.read(
                        fromAbsoluteOffset: Int64(fileOffset) + Int64(filled),
                        into: UnsafeMutableRawBufferPointer(rebasing: raw[filled..<filled + want]))
                }
                if got == 0 { throw Errno.ioError }  // the file is shorter than recorded
                filled += got
                continue
            }
            let isFinal = fileOffset + UInt64(filled) >= size
            buffer.withUnsafeBytes { raw in
                let window = UnsafeRawBufferPointer(rebasing: raw[start..<filled])
                guard let length = chunker.chunkLength(in: window, isFinal: isFinal) else { return }
                let bytes = UnsafeRawBufferPointer(rebasing: raw[start..<start + length])
                pieces.append(Piece(
                    offset: fileOffset + UInt64(start),
                    ref: ChunkRef(hash: ChunkHash(of: bytes), size: UInt32(length))))
                start += length
            }
        }
        return pieces
    }
}
