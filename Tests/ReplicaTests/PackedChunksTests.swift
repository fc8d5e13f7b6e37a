import BlobStore
import ContainerFormat
import Foundation
import TestSupport
import Testing

@testable import Replica

struct PackedChunksTests {
    @Test("where packed chunks are, as journal entries said, is kept in the state database across a restart")
    func locationsSurviveARestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        var a = try await devices.open("a")
        try await a.writeFile("one", Data("1".utf8))
        try await a.push()
        try await a.writeFile("two", Data("2".utf8))
        try await a.push()  // the journal now holds a format-5 entry: protobuf from here on
        let pack = Pack([(ChunkHash(of: Data("x".utf8)), Data("x".utf8)), (ChunkHash(of: Data("yy".utf8)), Data("yy".utf8))])
        var commit = Commit(commitID: "p", device: "d", deviceID: "d", time: .zero, ops: [])
        commit.packs = [PackRecord(id: pack.id, chunks: pack.chunks)]
        let key = try devices.journalKey(a.head + 1)
        try await devices.store.putIfAbsent(key, data: JournalCoding.encode(commit, as: .binary))
        try await a.pull()
        let expected = Dictionary(uniqueKeysWithValues: pack.chunks.map {
            ($0.hash, PackedLocation(pack: pack.id, offset: $0.offset, size: $0.size))
        })
        func holdsExpected() -> Bool {
            let known = a.synced.withLock { $0.packedChunks }
            return expected.allSatisfy { known[$0.key] == $0.value }
        }
        #expect(holdsExpected())
        await a.stop()
        a = try await devices.open("a")
        #expect(holdsExpected())
        await a.stop()
    }

    @Test(
        "small files go up in packs, in a new container's first entry (JSON) as in later ones (protobuf): a few objects, read back whole by another device",
        arguments: [true, false])
    func smallFilesTravelInPacks(inFirstEntry: Bool) async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        if !inFirstEntry {
            try await a.writeFile("first", Data("entry 1".utf8))
            try await a.push()
        }
        let written = try await devices.writeFiles(200, on: a) { index in
            Data((0..<(100 + index * 13)).map { UInt8(truncatingIfNeeded: $0 * 31 + index) })
        }
        try await a.push()
        let entry = try await devices.store.get(
            try devices.journalKey(inFirstEntry ? 1 : 2),
            maximumSize: 1 << 20)
        #expect((entry.first == UInt8(ascii: "{")) == inFirstEntry)
        #expect((1...4).contains(try JournalCoding.decode(entry).packs.count))
        #expect(devices.chunkFiles().isEmpty)  // the first file's chunk is in a pack too
        try await devices.expectNewDevice("b", reads: written)
        await a.stop()
    }

    @Test("packs uploaded for an entry the store then refused are packed again for the entry that lands: another device reads every file")
    func packsOfARefusedEntry() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("first", Data("first".utf8))
        try await a.push()
        await a.stop()
        let store = JournalRefusingStore(devices.store)
        let again = try await Replica.open(
            ReplicaConfiguration(container: devices.container, cacheDirectory: devices.folder.sub("cache-a"), deviceName: "a"),
            store: store, logger: quietLogger)
        let written = try await devices.writeFiles(20, on: again) { index in
            Data("file \(index) ".utf8) + Data(repeating: UInt8(index), count: 3000)
        }
        await #expect(throws: (any Error).self) { try await again.push() }
        store.accept()
        try await again.push()
        try await devices.expectNewDevice("b", reads: written)
        await again.stop()
    }

    @Test("a burst of small files large enough to go metadata first is packed too: the entry saying they are stored names the packs")
    func metadataFirstBurstPacks() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 37)
        // A batch takes 1,000 operations (a new file is one, its content folded into its
        // create): 9.6 MB of new bytes, over the 4 MiB that sends a batch metadata first.
        let written = try await devices.writeFiles(600, on: a) { _ in random.data(count: 16 << 10) }
        try await a.push()
        #expect(devices.chunkFiles().isEmpty)
        try await devices.expectNewDevice("b", reads: written)
        // The entry saying the chunks are stored landed: another device sees them uploaded.
        let c = try await devices.open("c")
        #expect(try c.syncState(of: c.id("f0")).isUploaded)
        await c.stop()
        await a.stop()
    }

    @Test("a chunk named again from a pack a collection chose is packed again: the pack may go, both files still read")
    func chunkInACandidatePackIsPackedAgain() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("first", Data("entry 1".utf8))
        try await a.push()
        let data = Data((0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try await a.writeFile("old", data)
        try await a.writeFile("other", Data("other".utf8))
        try await a.push()
        let hash = ChunkHash(of: data)
        let pack = try #require(a.synced.withLock { $0.packedChunks[hash] }).pack
        // A collection chose that pack; its sweep is an hour away, as the default grace has it.
        let container = try ContainerStore(store: devices.store, container: devices.container)
        var record = CollectionRecord(
            number: 0, device: "gc", started: .now(), grace: 3600, head: a.head, candidates: [], candidatePacks: [pack],
            journalFrom: 0)
        try await container.addCollectionRecord(&record, after: 0)
        a.state.withLock { $0.collections.listedAt = nil }
        try await a.writeFile("copy", data)
        try await a.push()
        let moved = try #require(a.synced.withLock { $0.packedChunks[hash] })
        #expect(moved.pack != pack)
        // The sweep deletes the pack: a new device reads both files from the new one.
        try await container.deletePack(pack)
        let b = try await devices.open("b")
        #expect(try await b.readFile("copy") == data)
        #expect(try await b.readFile("old") == data)
        await a.stop()
        await b.stop()
    }
}
