import Foundation
import Testing
import TestSupport

@testable import ContainerFormat

struct ChunkerTests {
    let chunker = Chunker()

    func hashes(_ data: Data) -> [ChunkHash] {
        data.withUnsafeBytes { buffer in
            var start = 0
            return chunker.chunkLengths(of: buffer).map { length in
                defer { start += length }
                return ChunkHash(of: UnsafeRawBufferPointer(rebasing: buffer[start..<start + length]))
            }
        }
    }

    @Test("chunks stay within bounds and average about 1 MiB")
    func bounds() {
        var random = SeededRandom(seed: 7)
        let data = random.data(count: 20_000_000)
        let lengths = data.withUnsafeBytes { chunker.chunkLengths(of: $0) }
        #expect(lengths.reduce(0, +) == data.count)
        for length in lengths.dropLast() {
            #expect(length >= 256 << 10 && length <= 4 << 20)
        }
        let average = data.count / lengths.count
        #expect(average > 600_000 && average < 2_000_000, "average chunk \(average) bytes")
    }

    @Test("an insert near the start of 20 MB changes only a few chunks")
    func contentDefined() {
        var random = SeededRandom(seed: 11)
        let original = random.data(count: 20_000_000)
        var edited = original
        edited.insert(contentsOf: Data("inserted text".utf8), at: 300_000)
        let before = Set(hashes(original))
        let after = hashes(edited)
        let new = after.filter { !before.contains($0) }
        #expect(after.count > 10)
        #expect(new.count <= 2, "\(new.count) of \(after.count) chunks changed")
    }

    @Test("equal content gives equal chunks, so a copy is stored once")
    func dedup() {
        var random = SeededRandom(seed: 3)
        let shared = random.data(count: 8_000_000)
        let a = random.data(count: 100) + shared
        let b = random.data(count: 5000) + shared + random.data(count: 300)
        let common = Set(hashes(a)).intersection(hashes(b))
        #expect(common.count >= hashes(a).count - 2)
    }

    @Test("streaming in pieces finds the same boundaries as the whole buffer")
    func streaming() {
        var random = SeededRandom(seed: 5)
        let data = random.data(count: 9_000_000)
        let whole = data.withUnsafeBytes { chunker.chunkLengths(of: $0) }
        var lengths: [Int] = []
        var start = 0
        data.withUnsafeBytes { buffer in
            while start < buffer.count {
                // Offer a window shorter than the maximum first, as a reader would.
                let window = min(buffer.count - start, 1 << 20)
                let isFinal = start + window == buffer.count
                if let length = chunker.chunkLength(
                    in: UnsafeRawBufferPointer(rebasing: buffer[start..<start + window]), isFinal: isFinal)
                {
                    lengths.append(length)
                    start += length
                } else {
                    let wider = min(buffer.count - start, 4 << 20)
                    let length = chunker.chunkLength(
                        in: UnsafeRawBufferPointer(rebasing: buffer[start..<start + wider]),
                        isFinal: start + wider == buffer.count)!
                    lengths.append(length)
                    start += length
                }
            }
        }
        #expect(lengths == whole)
    }

    @Test("long runs of zeros are chunks of their own, so an edit before one does not move the boundaries after it")
    func zeroRuns() {
        var random = SeededRandom(seed: 13)
        // Islands of data in zeros, as in a sparse file written at random offsets.
        var sparse = Data(count: 40 << 20)
        for n in 0..<40 {
            let island = random.data(count: Int.random(in: 1...(64 << 10), using: &random))
            sparse.replaceSubrange((n << 20)..<(n << 20) + island.count, with: island)
        }
        let before = hashes(sparse)
        var edited = sparse
        edited.replaceSubrange(100..<200, with: random.data(count: 100))  // inside the first island
        let after = hashes(edited)
        #expect(after.filter { !Set(before).contains($0) }.count == 1)
        // A run of zeros is cut into a few sizes of zero chunks, whatever its length.
        let lengths = sparse.withUnsafeBytes { chunker.chunkLengths(of: $0) }
        var start = 0
        var zeroChunks = Set<ChunkHash>()
        for length in lengths {
            let chunk = sparse[start..<start + length]
            if chunk.allSatisfy({ $0 == 0 }) { zeroChunks.insert(ChunkHash(of: chunk)) }
            start += length
        }
        #expect(zeroChunks.count <= 7, "\(zeroChunks.count) different zero chunks")
        #expect(lengths.count < 40 * 8)
        #expect(ChunkHash(ofZeros: 5000) == ChunkHash(of: Data(count: 5000)))
    }

    @Test("finding runs of zeros word by word gives what a byte-by-byte search gives")
    func zeroRunSearch() {
        var random = SeededRandom(seed: 17)
        for round in 0..<2000 {
            // Short buffers of zeros with a few non-zero bytes, anywhere in a word.
            var bytes = [UInt8](repeating: 0, count: Int.random(in: 1...600, using: &random))
            for _ in 0..<Int.random(in: 0...6, using: &random) {
                bytes[Int.random(in: 0..<bytes.count, using: &random)] = UInt8.random(in: 1...255, using: &random)
            }
            let length = 64
            let limit = Int.random(in: 1...bytes.count, using: &random)
            let expectedZeros = bytes.firstIndex { $0 != 0 } ?? bytes.count
            var expectedRun: Int?
            for start in 1..<max(1, limit) where bytes[start - 1] != 0 && start + length <= bytes.count {
                if bytes[start..<start + length].allSatisfy({ $0 == 0 }) {
                    expectedRun = start
                    break
                }
            }
            bytes.withUnsafeBytes { raw in
                #expect(Chunker.leadingZeros(in: raw, end: raw.count) == expectedZeros, "round \(round)")
                #expect(Chunker.firstZeroRun(in: raw, end: raw.count, before: limit, length: length) == expectedRun, "round \(round)")
            }
        }
    }

    @Test("SHA-256 of known input")
    func knownHash() {
        #expect(ChunkHash(of: Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(ChunkHash(hex: "zz") == nil)
    }
}
