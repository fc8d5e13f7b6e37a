import BlobStore
import Collection
import ContainerFormat
import Foundation
import Logging
import SystemPackage
import TestSupport
import Testing

/// A container in a directory store, written entry by entry as devices would.
private struct StoredContainer {
    let folder = TemporaryDirectory("collector")
    let container: ContainerStore

    init() throws {
        container = try ContainerStore(store: try DirectoryStore(root: FilePath(folder.path)), container: "c")
    }

    /// Stores the chunks of `ops`' text contents, then appends them as the next entry.
    func commit(_ ops: [ItemOperation], texts: [String] = [], policy: RetentionPolicy? = nil) async throws {
        try await container.writeChunks(texts.map { (ChunkHash(of: Data($0.utf8)), Data($0.utf8)) })
        var commit = Commit(commitID: UUID().uuidString, device: "a", deviceID: "a", time: .now(), ops: ops)
        commit.policy = policy
        let head = try await container.catchUp().head
        #expect(try await container.append(commit, at: head + 1, as: .json))
    }

    /// The same, its chunks in one pack, in a protobuf entry naming the pack; the pack.
    @discardableResult
    func commitPacked(_ ops: [ItemOperation], texts: [String]) async throws -> Pack {
        let pack = Pack(texts.map { (ChunkHash(of: Data($0.utf8)), Data($0.utf8)) })
        try await container.writePack(pack)
        var commit = Commit(commitID: UUID().uuidString, device: "a", deviceID: "a", time: .now(), ops: ops)
        commit.packs = [PackRecord(id: pack.id, chunks: pack.chunks)]
        let head = try await container.catchUp().head
        #expect(try await container.append(commit, at: head + 1, as: .binary))
        return pack
    }

    func packExists(_ pack: Pack) async throws -> Bool {
        try await container.packWritten(pack.id) != nil
    }

    func chunkExists(_ text: String) async throws -> Bool {
        try await container.hasChunk(ChunkHash(of: Data(text.utf8)))
    }

    var collector: Collector {
        Collector(container: container, device: "gc", deviceID: "gc", logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
    }
}

struct CollectorTests {
    @Test("a collection deletes the chunks nothing names and compacts the journal; a new device reads the same tree")
    func collects() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        try await store.commit([file("f", "f.txt", "v1"), file("g", "g.txt", "gone"), file("k", "k.txt", "kept")], texts: ["v1", "gone", "kept"])
        try await store.commit([edit("f", base: 1, "v2")], texts: ["v2"])
        try await store.commit([.delete(.init(id: ItemID("g"), base: 1))])
        // A chunk uploaded for a commit not written yet: younger than the grace, kept.
        let before = try await store.container.catchUp()
        #expect(try await store.collector.usage(of: before).historyBytes == 6)  // "v1" and "gone"
        try await store.commit([], policy: RetentionPolicy(versions: 0, deleted: 0, grace: 0))

        let dry = try await store.collector.run(dryRun: true)
        #expect(dry.candidateChunks == 2 && dry.deletedChunks == 0 && dry.record == nil)
        #expect(try await store.chunkExists("v1"))

        let result = try await store.collector.run(dryRun: false)
        #expect(result.expiredItems == 2)
        #expect(result.deletedChunks == 2 && result.deletedBytes == 6)
        for (text, kept) in [("v1", false), ("gone", false), ("v2", true), ("kept", true)] {
            #expect(try await store.chunkExists(text) == kept, "\(text)")
        }
        // Entries 1-4 went behind the snapshot at 5 (the expiry); the floor says so.
        let tree = try await store.container.catchUp()
        #expect(tree.head == 5)
        #expect(try await store.container.listJournal().map(\.seq) == [5])
        #expect(try await store.container.collectionRecords().records.map(\.journalFrom) == [5])
        #expect(tree.item(ItemID("g")) == nil && tree.item(ItemID("f"))?.history == nil)
        #expect(try await store.collector.usage(of: tree).collectableBytes == 0)
        // Collected again: nothing more goes, and the journal still reads.
        let again = try await store.collector.run(dryRun: false)
        #expect(again.deletedChunks == 0 && again.expiredItems == 0)
        #expect(try await store.container.catchUp() == tree)
    }

    @Test("a candidate written again during the grace is kept: a device is naming it")
    func rewrittenCandidateIsKept() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        try await store.commit([file("f", "f.txt", "old")], texts: ["old"])
        try await store.commit([.delete(.init(id: ItemID("f"), base: 1))], policy: RetentionPolicy(versions: 0, deleted: 0, grace: 2))
        // Older than the grace.
        try await Task.sleep(for: .seconds(2.2))
        let collection = Task { try await store.collector.run(dryRun: false) }
        while try await store.container.collectionNumbers().isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        let record = try #require(try await store.container.collectionRecords().records.first)
        #expect(record.candidates == [ChunkHash(of: Data("old".utf8))])
        try await store.container.rewriteChunk(ChunkHash(of: Data("old".utf8)), data: Data("old".utf8))
        let result = try await collection.value
        #expect(result.keptChunks == 1 && result.deletedChunks == 0)
        #expect(try await store.chunkExists("old"))
    }

    @Test("packs: one where nothing named is located goes, a mostly dead one is repacked first, a used one stays")
    func collectsPacks() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        func text(_ letter: Character) -> String { String(repeating: letter, count: 1000) }
        let (a, b, c, d, e, f) = (text("a"), text("b"), text("c"), text("d"), text("e"), text("f"))
        try await store.commit([], texts: [])  // the journal's first entry (JSON)
        let sparse = try await store.commitPacked(
            [file("a", "a.txt", a), file("b", "b.txt", b), file("c", "c.txt", c)], texts: [a, b, c])
        let dead = try await store.commitPacked([file("d", "d.txt", d)], texts: [d])
        let used = try await store.commitPacked([file("e", "e.txt", e), file("f", "f.txt", f)], texts: [e, f])
        try await store.commit(
            ["a", "b", "d"].map { .delete(.init(id: ItemID($0), base: 2 + ($0 == "d" ? 1 : 0))) },
            policy: RetentionPolicy(versions: 0, deleted: 0, grace: 0))
        let before = try await store.collector.usage(of: try await store.container.catchUp())
        #expect(before.packs == 3 && before.historyBytes == 3000 && before.liveBytes >= 3000)

        let dry = try await store.collector.run(dryRun: true)
        #expect(dry.candidatePacks == 1 && dry.repackedPacks == 0)  // a dry run repacks nothing
        let result = try await store.collector.run(dryRun: false)
        #expect(result.repackedPacks == 1 && result.candidatePacks == 2 && result.deletedPacks == 2)
        let (sparseKept, deadKept, usedKept) = (try await store.packExists(sparse), try await store.packExists(dead), try await store.packExists(used))
        #expect(!sparseKept && !deadKept && usedKept)

        // c moved to a new pack and reads from there; e and f stay where they were.
        let tree = try await store.container.catchUp()
        let location = try #require(tree.packedChunks[ChunkHash(of: Data(c.utf8))])
        #expect(location.pack != sparse.id)
        let ref = ChunkRef(hash: ChunkHash(of: Data(c.utf8)), size: 1000)
        #expect(try await store.container.readChunk(ref, packedAt: location) == Data(c.utf8))
        #expect(tree.packedChunks[ChunkHash(of: Data(e.utf8))]?.pack == used.id)
        let after = try await store.collector.usage(of: tree)
        #expect(after.packs == 2 && after.collectableBytes == 0 && after.liveBytes >= 3000)
        // Nothing more to do.
        let again = try await store.collector.run(dryRun: false)
        #expect(again.repackedPacks == 0 && again.deletedPacks == 0)
    }

    @Test("a pack of one small file, all used, is left alone: mostly index, but repacking it would make it again")
    func leavesSmallUsedPack() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        try await store.commit([], texts: [], policy: RetentionPolicy(versions: 0, deleted: 0, grace: 0))
        let pack = try await store.commitPacked([file("a", "a.txt", "first\n")], texts: ["first\n"])
        let head = try await store.container.catchUp().head
        let result = try await store.collector.run(dryRun: false)
        #expect(result.repackedPacks == 0 && result.deletedPacks == 0)
        #expect(try await store.packExists(pack))
        // No entry was written for a repack (the collection adds no journal entry here).
        #expect(try await store.container.catchUp().head == head)
    }

    @Test("a candidate pack written again during the grace is kept")
    func rewrittenPackIsKept() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        try await store.commit([], texts: [])
        let pack = try await store.commitPacked([file("f", "f.txt", "old")], texts: ["old"])
        try await store.commit([.delete(.init(id: ItemID("f"), base: 2))], policy: RetentionPolicy(versions: 0, deleted: 0, grace: 2))
        try await Task.sleep(for: .seconds(2.2))
        let collection = Task { try await store.collector.run(dryRun: false) }
        while try await store.container.collectionNumbers().isEmpty { try await Task.sleep(for: .milliseconds(20)) }
        let record = try #require(try await store.container.collectionRecords().records.first)
        #expect(record.candidatePacks == [pack.id])
        try await store.container.rewritePack(pack)
        let result = try await collection.value
        #expect(result.deletedPacks == 0)
        #expect(try await store.packExists(pack))
    }

    @Test("a second collection while one may still delete is refused")
    func oneAtATime() async throws {
        let store = try StoredContainer()
        defer { store.folder.remove() }
        try await store.commit([file("f", "f.txt", "x")], texts: ["x"])
        var record = CollectionRecord(number: 0, device: "other", started: .now(), grace: 60, head: 1, candidates: [], journalFrom: 0)
        try await store.container.addCollectionRecord(&record, after: 0)
        await #expect(throws: CollectionError.self) { try await store.collector.run(dryRun: false) }
        #expect(try await store.collector.run(dryRun: true).record == nil)
    }
}
