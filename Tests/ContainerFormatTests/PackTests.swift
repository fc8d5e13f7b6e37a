import BlobStore
import Foundation
import SystemPackage
import Testing
import TestSupport

@testable import ContainerFormat

struct PackTests {
    private func pieces(_ count: Int, seed: UInt8 = 1) -> [(hash: ChunkHash, data: Data)] {
        (0..<count).map { index in
            let data = Data((0..<(100 + index * 37)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index &+ Int(seed)) })
            return (ChunkHash(of: data), data)
        }
    }

    @Test("a pack holds its chunks at the offsets its index gives, each once, and is named by its bytes")
    func roundTrip() throws {
        var input = pieces(50)
        input.append(input[3])  // the same chunk twice: stored once
        let pack = Pack(input)
        #expect(pack.chunks.count == 50)
        #expect(pack.id == ChunkHash(of: pack.bytes))
        #expect(try Pack.index(of: pack.bytes) == pack.chunks)
        for chunk in pack.chunks {
            #expect(ChunkHash(of: pack.bytes[chunk.range.lowerBound..<chunk.range.upperBound]) == chunk.hash)
        }
        #expect(Pack(input).bytes == pack.bytes)  // the same chunks give the same object
    }

    @Test("a truncated, padded or foreign object is refused as a pack")
    func refusesDamage() throws {
        let pack = Pack(pieces(5))
        #expect(throws: PackError.notAPack) { try Pack.index(of: pack.bytes.dropLast(1)) }
        #expect(throws: (any Error).self) { try Pack.index(of: pack.bytes.dropFirst(1)) }
        #expect(throws: (any Error).self) { try Pack.index(of: Data(repeating: 0, count: 3) + pack.bytes) }
        #expect(throws: PackError.notAPack) { try Pack.index(of: Data("ICPK".utf8)) }
        var huge = pack.bytes
        huge.replaceSubrange(huge.count - 8..<huge.count - 4, with: [0xFF, 0xFF, 0xFF, 0x7F])
        #expect(throws: PackError.malformed("index beyond the pack")) { try Pack.index(of: huge) }
    }

    @Test("a pack in a directory store: written once, each chunk read back by its range and checked")
    func inAStore() async throws {
        let folder = TemporaryDirectory("packs")
        defer { folder.remove() }
        let container = try ContainerStore(store: try DirectoryStore(root: FilePath(folder.path)), container: "c")
        let pack = Pack(pieces(20))
        try await container.writePack(pack)
        try await container.writePack(pack)  // again after a crash: the same object
        for chunk in pack.chunks {
            let data = try await container.readChunk(chunk, inPack: pack.id)
            #expect(ChunkHash(of: data) == chunk.hash)
        }
        var wrong = pack.chunks[2]
        wrong.offset += 1
        await #expect(throws: FormatError.corruptChunk(hash: wrong.hash.hex)) {
            _ = try await container.readChunk(wrong, inPack: pack.id)
        }
        let stored = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/c/packs/" + String(pack.id.hex.prefix(2)) + "/" + pack.id.hex))
        #expect(try Pack.index(of: stored) == pack.chunks)
    }

    @Test("a protobuf journal entry carries its packs; the fold locates each chunk where the last entry put it")
    func journalAndFold() throws {
        let first = Pack(pieces(4))
        let second = Pack(pieces(4) + pieces(2, seed: 9))
        var commit = Commit(commitID: "c", device: "d", deviceID: "d", time: .zero, ops: [])
        commit.packs = [PackRecord(id: first.id, chunks: first.chunks)]
        let decoded = try JournalCoding.decode(JournalCoding.encode(commit, as: .binary))
        #expect(decoded == commit)
        var tree = Tree()
        _ = tree.apply(decoded, seq: 1)
        commit.packs = [PackRecord(id: second.id, chunks: second.chunks)]
        _ = tree.apply(commit, seq: 2)
        #expect(tree.packedChunks.count == 6)
        // The second pack holds the first's four chunks again: they moved there (a repack).
        for chunk in second.chunks { #expect(tree.packedChunks[chunk.hash] == PackedLocation(pack: second.id, offset: chunk.offset, size: chunk.size)) }
        #expect(!tree.packedChunks.values.contains { $0.pack == first.id })

        // A record whose lists do not add up is dropped, the rest of the entry kept.
        var message = JournalEntryMessage()
        message.format = 6
        var broken = PackMessage()
        broken.id = Data(first.id.bytes)
        broken.chunkHashes = Data(count: 32)
        message.packs = [broken]
        #expect(try JournalCoding.decode(try message.serializedBytes()).packs.isEmpty)
    }

    @Test("a snapshot keeps the tree's packed chunks, the same bytes for the same tree")
    func snapshot() throws {
        var tree = Tree()
        var commit = Commit(commitID: "c", device: "d", deviceID: "d", time: .zero, ops: [])
        let packs = [Pack(pieces(3)), Pack(pieces(5, seed: 4))]
        commit.packs = packs.map { PackRecord(id: $0.id, chunks: $0.chunks) }
        _ = tree.apply(commit, seq: 1)
        let data = SnapshotCoding.encode(Snapshot(of: tree))
        let decoded = try SnapshotCoding.decode(data)
        #expect(decoded.packedChunks == tree.packedChunks && decoded.packedChunks.count == 8)
        #expect(decoded.tree.packedChunks == tree.packedChunks)
        #expect(SnapshotCoding.encode(Snapshot(of: decoded.tree)) == data)
    }

    @Test("a filler hands back packs of at least Pack.largest bytes (the last one less), every chunk once, in order")
    func filler() throws {
        var filler = PackFiller()
        var packs: [Pack] = []
        let size = (1 << 20) - 1
        var hashes: [ChunkHash] = []
        for index in 0..<40 {
            let data = Data(repeating: UInt8(index), count: size)
            hashes.append(ChunkHash(of: data))
            if let pack = filler.add(hashes.last!, data) { packs.append(pack) }
        }
        if let last = filler.finish() { packs.append(last) }
        #expect(filler.finish() == nil)
        #expect(packs.flatMap { $0.chunks.map(\.hash) } == hashes)
        for pack in packs.dropLast() {
            let bytes = pack.chunks.reduce(0) { $0 + Int($1.size) }
            #expect(bytes >= Pack.largest && bytes < Pack.largest + size)
        }
        #expect(packs.count == 3)
    }
}
