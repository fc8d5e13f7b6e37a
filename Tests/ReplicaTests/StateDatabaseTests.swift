import ContainerFormat
import Foundation
import Testing
import GRDB
import TestSupport

@testable import Replica

/// Records of the state database in their packed form; earlier versions' JSON is rewritten
/// once by a migration.
struct StateDatabaseTests {
    private let ranges = ByteRanges([0..<4096, 10_000..<20_000, UInt64.max - 5..<UInt64.max])

    @Test("present byte ranges survive their packed form, whatever their first byte")
    func byteRanges() throws {
        let packed = StateDatabase.encode(ranges)
        #expect(packed.count == 3 * 16)
        #expect(try StateDatabase.decodeRanges(packed) == ranges)
        #expect(try StateDatabase.decodeRanges(StateDatabase.encode(ByteRanges())) == ByteRanges())
        #expect(throws: StateDatabaseError.self) { try StateDatabase.decodeRanges(packed.dropLast()) }
        // A range starting at 123 packs to a record whose first byte is "{": it was once
        // taken for JSON, and the mount refused to open.
        for start: UInt64 in [123, 0x17B, 0x7B7B_7B7B] {
            let curly = ByteRanges([start..<start + 4096])
            #expect(StateDatabase.encode(curly).first == UInt8(ascii: "{"))
            #expect(try StateDatabase.decodeRanges(StateDatabase.encode(curly)) == curly)
        }
    }

    @Test("migration v3 rewrites JSON records of earlier versions and keeps packed ones that start with {")
    func migrationRewritesJSON() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path + "/state.db"
        let curly = ByteRanges([123..<5000])
        let queued = LocalChange(
            localID: 7, time: Timestamp(seconds: 1_700_000_000, nanoseconds: 5),
            ops: [.create(.init(id: ItemID("n"), parent: .root, name: "new", kind: .file, mode: 0o644, mtime: .zero))])
        do {
            let queue = try DatabaseQueue(path: path)
            try StateDatabase.migrator.migrate(queue, upTo: "v2 content pending and origin, landed table")
            try queue.write { db in
                for (id, present) in [("json", FormatCoding.encode(ranges)), ("packed", StateDatabase.encode(curly))] {
                    try db.execute(
                        sql: "INSERT INTO content (id, chunks, size, present, dirty, pinned, last_access) VALUES (?, ?, 0, ?, 0, 0, 0)",
                        arguments: [id, Data(), present])
                }
                try db.execute(
                    sql: "INSERT INTO pending (local_id, change) VALUES (7, ?)", arguments: [FormatCoding.encode(queued)])
            }
        }
        let database = try StateDatabase(path: path, logger: quietLogger)
        let records = try database.pool.read { db in try database.loadContent(db) }
        #expect(records[ItemID("json")]?.present == ranges)
        #expect(records[ItemID("packed")]?.present == curly)
        #expect(try database.pool.read { db in try database.loadPending(db) } == [queued])
    }

    @Test("migration v9 rewrites past versions from JSON to protobuf, and they load as they were")
    func migrationRewritesHistory() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path + "/state.db"
        let chunks = (0..<3).map { ChunkRef(hash: ChunkHash(of: Data([UInt8($0)])), size: UInt32(1000 + $0)) }
        let history = [
            PastVersion(
                seq: 4, time: Timestamp(seconds: 1_700_000_000, nanoseconds: 9), device: "laptop", size: 3003,
                chunks: chunks, replaced: Timestamp(seconds: 1_700_000_100, nanoseconds: 0)),
            PastVersion(seq: 6, time: .zero, device: "", size: 0, chunks: [], replaced: .zero),
        ]
        do {
            let queue = try DatabaseQueue(path: path)
            try StateDatabase.migrator.migrate(queue, upTo: "v8 local access times")
            try queue.write { db in
                for (id, past) in [("old", FormatCoding.encode(history) as Data?), ("none", nil)] {
                    try db.execute(
                        sql: """
                            INSERT INTO item (id, parent, name, kind, mode, mtime_s, mtime_ns, size, chunks, version,
                            content_version, deleted, history) VALUES (?, ?, ?, 'file', 420, 0, 0, 0, ?, 1, 1, 0, ?)
                            """,
                        arguments: [id, ItemID.root.rawValue, id, Data(), past])
                }
            }
        }
        let database = try StateDatabase(path: path, logger: quietLogger)
        let stored = try database.pool.read { db in try Data.fetchOne(db, sql: "SELECT history FROM item WHERE id = 'old'") }
        #expect(stored == HistoryCoding.encode(history))
        let tree = try database.pool.read { db in try database.loadTree(db) }
        #expect(tree.item(ItemID("old"))?.history == history)
        #expect(tree.item(ItemID("none"))?.history == nil)
    }

    @Test("migration v11 keeps every node number, and the table takes new ones in order")
    func migrationKeepsNodeNumbers() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path + "/state.db"
        do {
            let queue = try DatabaseQueue(path: path)
            try StateDatabase.migrator.migrate(queue, upTo: "v10 packed chunks")
            try queue.write { db in
                for (number, id) in [(1, "root"), (2, "a"), (7, "b")] {
                    try db.execute(sql: "INSERT INTO inode (ino, id) VALUES (?, ?)", arguments: [number, id])
                }
            }
        }
        let database = try StateDatabase(path: path, logger: quietLogger)
        try database.write { db in try database.saveInodes([(8, ItemID("c")), (2, ItemID("a"))], db) }
        let numbers = try database.pool.read { db in try database.loadInodes(db) }.sorted { $0.0 < $1.0 }
        #expect(numbers.map(\.0) == [1, 2, 7, 8])
        #expect(numbers.map(\.1) == [ItemID.root, ItemID("a"), ItemID("b"), ItemID("c")])
    }

    @Test("makeDurable syncs the log only when something committed since it last did, whichever way it was written")
    func makeDurableSkipsAnUnchangedLog() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        #expect(try database.makeDurable())  // the migrations
        #expect(try !database.makeDurable())
        try database.write { db in try database.setMeta("k", "now", db) }
        #expect(try database.makeDurable())
        #expect(try !database.makeDurable())
        database.writeSoon { db in try database.setMeta("k", "soon", db) }
        #expect(try database.makeDurable())
        #expect(try database.pool.read { db in try database.meta("k", db) } == "soon")
        try database.pool.write { db in try database.setMeta("k", "around the order", db) }
        #expect(try database.makeDurable())
        #expect(try !database.makeDurable())
    }

    @Test("writes asked for with writeSoon commit before any later write, and by themselves shortly after")
    func writeSoonKeepsOrder() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        database.writeSoon { db in try database.setMeta("k", "soon", db) }
        try database.write { db in try database.setMeta("k", "now", db) }
        #expect(try database.pool.read { db in try database.meta("k", db) } == "now")

        database.writeSoon { db in try database.setMeta("alone", "yes", db) }
        let deadline = Date().addingTimeInterval(5)
        while try database.pool.read({ db in try database.meta("alone", db) }) == nil, Date() < deadline {
            usleep(1000)
        }
        #expect(try database.pool.read { db in try database.meta("alone", db) } == "yes")
    }

    @Test("a failed write leaves the writes waiting before it to the next one")
    func failedWriteKeepsWaiting() throws {
        struct Refused: Error {}
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        database.writeSoon { db in try database.setMeta("queued", "1", db) }
        #expect(throws: Refused.self) { try database.write { _ in throw Refused() } }
        try database.flush()
        #expect(try database.pool.read { db in try database.meta("queued", db) } == "1")
    }

    @Test("packed chunks are appended a row per pack: a chunk located again is where its last row says, a start drops the rows passed, and v13 and v14 keep what the keyed table held")
    func packedChunksAppended() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path + "/state.db"
        let hashes = (0..<1_500).map { ChunkHash(of: Data("chunk \($0)".utf8)) }
        func pack(_ name: String) -> PackRecord {
            PackRecord(
                id: ChunkHash(of: Data(name.utf8)),
                chunks: hashes.enumerated().map { PackedChunk(hash: $1, offset: UInt64($0) * 10, size: 10) })
        }
        let (first, second, third) = (pack("first"), pack("second"), pack("third"))
        do {  // A database from before v13: one row per chunk, keyed by its hash.
            let queue = try DatabaseQueue(path: path)
            try StateDatabase.migrator.migrate(queue, upTo: "v12 content in the staging log")
            try queue.write { db in
                for chunk in first.chunks {
                    try db.execute(
                        sql: "INSERT INTO packed_chunk (hash, pack, offset, size) VALUES (?, ?, ?, ?)",
                        arguments: [Data(chunk.hash.bytes), Data(first.id.bytes), Int64(chunk.offset), Int64(chunk.size)])
                }
            }
        }
        let database = try StateDatabase(path: path, logger: quietLogger)
        // Chunks the rows name, and the rows.
        func rows() throws -> Int { try database.pool.read { db in try Int.fetchOne(db, sql: "SELECT sum(length(chunks)) / 44 FROM pack_chunks") ?? 0 } }
        func packRows() throws -> Int { try database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM pack_chunks") ?? 0 } }
        func packOf(_ hash: ChunkHash) throws -> ChunkHash? { try database.pool.read { db in try database.loadTree(db) }.packedChunks[hash]?.pack }
        #expect(try packOf(hashes[7]) == first.id)
        #expect(try rows() == 1_500)
        #expect(try packRows() == 1)  // the pack's chunks, a row each until v14, in one
        try database.write { db in try database.savePackedChunks([second], db) }
        #expect(try packOf(hashes[7]) == second.id)
        #expect(try rows() == 3_000)
        try database.write { db in try database.compactPackedChunks(try database.loadTree(db).packedChunks, db) }
        #expect(try rows() == 3_000)  // not yet more than twice the chunks (and a margin)
        try database.write { db in try database.savePackedChunks([third], db) }
        try database.write { db in try database.compactPackedChunks(try database.loadTree(db).packedChunks, db) }
        #expect(try rows() == 1_500)
        #expect(try packRows() == 1)
        #expect(try packOf(hashes[1_499]) == third.id)
        try database.write { db in try database.savePackedChunks([first], replacingAll: true, db) }
        #expect(try rows() == 1_500)
        #expect(try packOf(hashes[0]) == first.id)
    }

    @Test("landed changes are kept as runs of consecutive ids at one number, and v15 keeps the rows a change each")
    func landedRuns() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let path = folder.path + "/state.db"
        do {  // A database from before v15: a row per landed change.
            let queue = try DatabaseQueue(path: path)
            try StateDatabase.migrator.migrate(queue, upTo: "v14 a row per pack")
            try queue.write { db in
                for (id, seq) in [(1, 4), (2, 4), (3, 0), (4, 4)] {
                    try db.execute(sql: "INSERT INTO landed (local_id, seq) VALUES (?, ?)", arguments: [id, seq])
                }
            }
        }
        let database = try StateDatabase(path: path, logger: quietLogger)
        func rows() throws -> Int { try database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM landed_run") ?? 0 } }
        func landed() throws -> [Int64: UInt64] { try database.pool.read { db in try database.loadLanded(db) } }
        #expect(try landed() == [1: 4, 2: 4, 3: 0, 4: 4])
        #expect(try rows() == 3)
        // A batch of 1,000 changes at number 9 but one whose content did not stay, and a gap.
        var batch = (5..<1_005).map { (localID: Int64($0), seq: UInt64(9)) }
        batch[500].seq = 0
        batch.remove(at: 700)
        try database.write { db in try database.recordLanded(batch, keep: 10_000, db) }
        #expect(try rows() == 3 + 4)
        var expected: [Int64: UInt64] = [1: 4, 2: 4, 3: 0, 4: 4]
        for (id, seq) in batch { expected[id] = seq }
        #expect(try landed() == expected)
        // Only runs wholly older than the newest `keep` ids go.
        try database.write { db in try database.recordLanded([(localID: 1_005, seq: 10)], keep: 500, db) }
        #expect(try landed().keys.min() == 506)
        #expect(try landed()[1_005] == 10)
    }

    @Test("items, content records and queued changes read back as written, every field set or left out (their rows are bound by hand)")
    func rowsReadBackAsWritten() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        let chunk = ChunkRef(hash: ChunkHash(of: Data("x".utf8)), size: 1)
        // Each time its own, so that two columns bound in each other's place show.
        func time(_ n: Int64) -> Timestamp { Timestamp(clamping: 1_790_000_000 + n, nanoseconds: 123_456_789 + UInt32(n)) }
        let full = Item(
            id: ItemID("AAAAAAA00000001"), parent: .root, name: "naïve name", kind: .file, mode: 0o4755, mtime: time(0),
            size: 1, chunks: [chunk], target: nil, xattrs: ["user.a": Data([0, 1, 2])], version: 7, contentVersion: 6,
            deleted: true, conflictOf: ItemID("AAAAAAA00000009"), contentFrom: ItemID("AAAAAAA00000008"),
            isContentPending: true, owner: Owner(uid: 1000, gid: 100), device: UInt64.max - 1, ctime: time(1), atime: time(2),
            linkedItem: nil, contentTime: time(3), contentDevice: "laptop",
            history: [PastVersion(seq: 3, time: time(4), device: "phone", size: 1, chunks: [chunk], replaced: time(5))],
            deletion: Deletion(time: time(6), device: "tablet"))
        let bare = Item(id: ItemID("AAAAAAA00000002"), parent: .root, name: "link", kind: .symlink, mode: 0o777, mtime: time(7), target: "")
        let tree = Tree(items: [full, bare], head: 9)
        let record = ContentRecord(
            chunks: [chunk], size: 1, present: ByteRanges([0..<1]), dirty: true, pinned: true, lastAccess: -5,
            staged: StagingLog.Location(segment: 3, offset: 1 << 40, size: 1))
        let change = LocalChange(
            localID: 42, time: time(8), ops: [.update(.init(id: full.id, base: 7, mode: 0o644, mtime: time(9)))])
        try database.write { db in
            try database.saveItems([full.id, bare.id], of: tree, db)
            try database.saveContent(full.id, record, db)
            try database.saveContent(bare.id, ContentRecord(chunks: [], size: 0, present: ByteRanges([]), dirty: false, pinned: false, lastAccess: 0), db)
            try database.insertPending(change, db)
        }
        let (loaded, content, pending) = try database.pool.read { db in
            (try database.loadTree(db), try database.loadContent(db), try database.loadPending(db))
        }
        #expect(loaded.item(full.id) == full)
        #expect(loaded.item(bare.id) == bare)
        #expect(loaded.item(bare.id)?.target == "")  // empty, not NULL
        #expect(content[full.id] == record)
        #expect(content[bare.id]?.chunks == [])
        #expect(pending == [change])
    }
}
