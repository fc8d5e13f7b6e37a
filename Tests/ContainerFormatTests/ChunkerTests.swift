import ContainerFormat
import Foundation
import Testing
import TestSupport

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

    @Test("SHA-256 of known input")
    func knownHash() {
        #expect(ChunkHash(of: Data("abc".utf8)).hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(ChunkHash(hex: "zz") == nil)
    }
}
