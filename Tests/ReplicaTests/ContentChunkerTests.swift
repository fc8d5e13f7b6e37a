import BlobStore
import ContainerFormat
import Foundation
import SystemPackage
import Testing
import TestSupport

@testable import Replica

#if canImport(Glibc)
import Glibc
#endif

struct ContentChunkerTests {
    /// Small chunks, so that a few MiB hold hundreds of them.
    let small = Chunker(ChunkingParameters(minimumSize: 2048, averageSize: 8192, maximumSize: 32768, gearSeed: 1))

    @Test("chunking only around the changes gives the same chunks as chunking every byte, after any writes, truncates and holes")
    func incrementalEqualsFull() throws {
        try withScratchFile { fd in
            var random = SeededRandom(seed: 42)
            let chunker = ContentChunker(chunker: small)
            try FileIO.writeAll(fd, random.data(count: 1_000_000), offset: 0)
            var size: UInt64 = 1_000_000
            var previous = try chunker.chunks(of: fd, size: size).pieces.map(\.ref)
            var (hashedIncrementally, hashedFully) = (0, 0)
            for round in 0..<300 {
                var changed = ByteRanges()
                for _ in 0..<Int.random(in: 1...4, using: &random) {
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0:  // truncate down or up (zeros)
                        let newSize = UInt64.random(in: 0...size + 200_000, using: &random)
                        #expect(ftruncate(fd.rawValue, off_t(newSize)) == 0)
                        changed.insert(min(newSize, size)..<max(newSize, size))
                        size = newSize
                    case 1:  // a write past the end, leaving a hole
                        let offset = size + UInt64.random(in: 0...300_000, using: &random)
                        let data = random.data(count: Int.random(in: 1...5000, using: &random))
                        try FileIO.writeAll(fd, data, offset: offset)
                        changed.insert(size..<offset + UInt64(data.count))
                        size = offset + UInt64(data.count)
                    default:  // a write inside, sometimes of zeros
                        let offset = UInt64.random(in: 0...size, using: &random)
                        let count = Int.random(in: 1...20_000, using: &random)
                        let data = Bool.random(using: &random) ? random.data(count: count) : Data(count: count)
                        try FileIO.writeAll(fd, data, offset: offset)
                        changed.insert(offset..<offset + UInt64(count))
                        size = max(size, offset + UInt64(count))
                    }
                }
                let incremental = try chunker.chunks(of: fd, size: size, previous: previous, changed: changed)
                let full = try chunker.chunks(of: fd, size: size)
                // The reference: every byte in memory, holes read as zeros.
                let bytes = try FileIO.read(fd, offset: 0, count: Int(size))
                let reference = bytes.withUnsafeBytes { raw in
                    var offset = 0
                    return small.chunkLengths(of: raw).map { length in
                        defer { offset += length }
                        return ChunkRef(hash: ChunkHash(of: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length])), size: UInt32(length))
                    }
                }
                #expect(full.pieces.map(\.ref) == reference, "round \(round)")
                #expect(incremental.pieces.map(\.ref) == reference, "round \(round)")
                hashedIncrementally += incremental.work.chunksHashed
                hashedFully += full.work.chunksHashed
                previous = reference
            }
            #expect(hashedIncrementally * 3 < hashedFully, "\(hashedIncrementally) chunks hashed of \(hashedFully)")
        }
    }

    @Test("a 4 KiB write into a 256 MiB file reads a few MiB; a 240 MiB hole is not read at all")
    func costFollowsTheChange() throws {
        try withScratchFile { fd in
            let chunker = ContentChunker(chunker: Chunker())
            var random = SeededRandom(seed: 9)
            let size: UInt64 = 256 << 20
            // Data at the start and the end, a hole between.
            try FileIO.writeAll(fd, random.data(count: 8 << 20), offset: 0)
            try FileIO.writeAll(fd, random.data(count: 8 << 20), offset: size - (8 << 20))
            let first = try chunker.chunks(of: fd, size: size)
            #expect(first.work.bytesRead <= 24 << 20, "the hole was read: \(first.work.bytesRead) bytes")

            try FileIO.writeAll(fd, random.data(count: 4096), offset: 3 << 20)
            let again = try chunker.chunks(
                of: fd, size: size, previous: first.pieces.map(\.ref), changed: ByteRanges([(3 << 20)..<(3 << 20) + 4096]))
            #expect(again.work.bytesRead <= 16 << 20, "read \(again.work.bytesRead) bytes for a 4 KiB change")
            #expect(again.work.chunksHashed <= 4)
            #expect(again.pieces.map(\.ref) == (try chunker.chunks(of: fd, size: size)).pieces.map(\.ref))
        }
    }

    @Test("in a 1 GiB sparse file of 200 islands, a write into the first island reads and hashes that island alone")
    func sparseIslands() throws {
        try withScratchFile { fd in
            let chunker = ContentChunker(chunker: Chunker())
            var random = SeededRandom(seed: 21)
            let size: UInt64 = 1 << 30
            var islands: [UInt64] = []
            for n in 0..<200 {
                let offset = UInt64(n) * (size / 200) + UInt64.random(in: 0..<(1 << 20), using: &random)
                try FileIO.writeAll(fd, random.data(count: Int.random(in: 1...(64 << 10), using: &random)), offset: offset)
                islands.append(offset)
            }
            #expect(ftruncate(fd.rawValue, off_t(size)) == 0)
            let first = try chunker.chunks(of: fd, size: size)
            #expect(first.work.bytesRead <= 40 << 20, "the holes were read: \(first.work.bytesRead) bytes")

            try FileIO.writeAll(fd, random.data(count: 4096), offset: islands[0] + 10)
            let again = try chunker.chunks(
                of: fd, size: size, previous: first.pieces.map(\.ref), changed: ByteRanges([islands[0] + 10..<islands[0] + 4106]))
            #expect(again.work.bytesRead <= 256 << 10, "read \(again.work.bytesRead) bytes for a 4 KiB change")
            #expect(again.work.chunksHashed <= 2)
            #expect(again.pieces.map(\.ref) == (try chunker.chunks(of: fd, size: size)).pieces.map(\.ref))
        }
    }

    /// Runs `body` with a new empty file open for reading and writing.
    @Test("bytes in memory are cut into the chunks the same bytes in a file are, zero runs and all")
    func memoryEqualsFile() throws {
        let seed = UInt64.random(in: 0..<1_000_000)
        print("memoryEqualsFile seed \(seed)")
        var random = SeededRandom(seed: seed)
        let chunker = ContentChunker(chunker: small)
        for round in 0..<200 {
            // Data and runs of zeros of every length around the chunker's sizes.
            var data = Data()
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                let count = [1, 100, 2047, 2048, 4096, 8192, 32768, 40000][Int.random(in: 0..<8, using: &random)]
                data += Bool.random(using: &random) ? random.data(count: count) : Data(count: count)
            }
            try withScratchFile { fd in
                try FileIO.writeAll(fd, data, offset: 0)
                let fromFile = try chunker.chunks(of: fd, size: UInt64(data.count)).pieces
                let fromMemory = chunker.pieces(of: data)
                #expect(fromMemory.map(\.offset) == fromFile.map(\.offset), "round \(round)")
                #expect(fromMemory.map(\.ref) == fromFile.map(\.ref), "round \(round)")
                #expect(fromMemory.map(\.isZeros) == fromFile.map(\.isZeros), "round \(round)")
                for piece in fromMemory where !piece.isZeros {
                    let range = Int(piece.offset)..<Int(piece.offset) + Int(piece.ref.size)
                    #expect(piece.bytes == data.subdata(in: range), "round \(round)")
                }
            }
        }
    }

    private func withScratchFile(_ body: (FileDescriptor) throws -> Void) throws {
        let folder = TemporaryDirectory("chunker")
        defer { folder.remove() }
        let fd = try FileDescriptor.open(folder.sub("file"), .readWrite, options: .create, permissions: .ownerReadWrite)
        defer { try? fd.close() }
        try body(fd)
    }
}
