import ContainerFormat
import Foundation
import GRDB
import Logging
import Synchronization
import SystemPackage

/// The device's durable state: one SQLite database (WAL) in the cache folder.
///
/// Tables: `meta` (identity, device, journal head, the batch being pushed), `item` (the
/// journal's tree as this device has folded it), `pending` (the upload queue: local changes
/// not yet in the journal), `content` (what each local content file holds), `inode`
/// (stable inode numbers). One transaction per invariant: an applied journal entry updates
/// the tree, the head and the queue together.
///
/// Writes commit in the order they are asked for. Most go through `write` (now, in the
/// caller's transaction). What a file operation records (its queued change, a content
/// record) goes through `writeSoon`, so that a create, a rename or a close does not wait
/// for a transaction of its own: such writes are collected and commit together a moment
/// later on a background thread, or first in the next `write`, or at `flush` (fsync,
/// unmount). A crash can lose the last moment of them, as it loses bytes not yet synced.
package final class StateDatabase: Sendable {
    /// For reads. Writes go through `write` or `writeSoon`, which keep their order (the
    /// snapshot's `asyncWrite` at start, before any other write, is the one exception).
    let pool: DatabasePool
    private let waiting = Mutex(WaitingWrites())
    /// Held from taking the waiting writes until they are committed (or put back), so that
    /// transactions commit in the order their writes were asked for.
    private let order = NSLock()
    /// Background QoS (nice 10 on Linux): a request that must wait for a transaction (an
    /// fsync) waits for it at that priority only on a busy machine, and briefly.
    private let background = DispatchQueue(label: "icloudfs.state-writes", qos: .background)
    private let logger: Logger
    /// Frees space kept aside on the database's disk; false when none is left. Called once
    /// when a transaction finds the disk full, before it is tried again.
    private let freeSpareSpace: @Sendable () -> Bool
    /// The last background commit failed: the next one is retried by itself, and only the
    /// first failure and the recovery are logged.
    private let backgroundFailing = FailureStreak()
    /// Transactions committed so far, and how many of them the last `makeDurable` made
    /// durable: an fsync of a file rewritten in place (a disk image, a database) usually
    /// finds nothing new to record, and skips syncing the log.
    private let commits = CommitCounter()
    private let durableCommits = Mutex<UInt64>(0)

    init(
        path: String, logger: Logger, freeSpareSpace: @escaping @Sendable () -> Bool = { false }
    ) throws {
        self.logger = logger
        self.freeSpareSpace = freeSpareSpace
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // WAL survives a killed process without fsync per transaction; fsync points are
            // explicit (see `makeDurable`).
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        pool.add(transactionObserver: commits, extent: .databaseLifetime)
        try StateDatabase.migrator.migrate(pool)
    }

    // MARK: writing

    typealias Work = @Sendable (Database) throws -> Void

    /// Commits what `writeSoon` left waiting, then `body`, in one transaction. If that
    /// fails, the waiting writes stay waiting (retried by the next write) and the error is
    /// thrown.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        try order.withLock { try writeHoldingOrder(body) }
    }

    private func writeHoldingOrder<T>(_ body: (Database) throws -> T) throws -> T {
        let taken = waiting.withLock { $0.take() }
        func attempt() throws -> T {
            return try pool.write { db in
                for work in taken.works { try work(db) }
                // Older than `body` (asked for before it), and touching rows no work does.
                try taken.rows.write(to: self, db)
                return try body(db)
            }
        }
        do {
            do {
                return try attempt()
            } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL && freeSpareSpace() {
                logger.warning("the cache disk is full: used the space kept aside to record changes")
                return try attempt()
            }
        } catch {
            waiting.withLock { $0.putBack(taken) }
            throw error
        }
    }

    /// Commits `work` a moment from now (`gathering`), before any later `write`.
    func writeSoon(_ work: @escaping Work) {
        scheduleBackgroundWrite(if: waiting.withLock { $0.add(work) })
    }

    /// Records a queued change (new: `isNew`, or rewritten by a fold) and the content
    /// records that go with it a moment from now, as `writeSoon`; a later call for the same
    /// change or record replaces what is still waiting: a new file's create and the content
    /// folded into it at its close are written (and encoded) once, on the writing thread.
    func saveChangeSoon(_ change: LocalChange, isNew: Bool, content records: [(ItemID, ContentRecord?)]) {
        scheduleBackgroundWrite(if: waiting.withLock { $0.save(change, isNew: isNew, content: records) })
    }

    /// A content record, as `saveChangeSoon`.
    func saveContentSoon(_ id: ItemID, _ record: ContentRecord?) {
        scheduleBackgroundWrite(if: waiting.withLock { $0.save(nil, isNew: false, content: [(id, record)]) })
    }

    private func scheduleBackgroundWrite(if due: Bool) {
        guard due else { return }  // a background write is due already
        background.asyncAfter(deadline: .now() + StateDatabase.gathering) { [self] in
            waiting.withLock { $0.backgroundDue = false }
            flushInBackground()
        }
    }

    /// Commits the waiting writes; on failure (a full disk) tries again a second later until
    /// they commit, so that they never wait for a later write that may not come.
    private func flushInBackground() {
        do {
            try flush()
            if backgroundFailing.succeeded() { logger.notice("changes recorded in \(pool.path) again") }
        } catch {
            if backgroundFailing.failed() { logger.error("cannot record changes in \(pool.path): \(error); retried every second") }
            background.asyncAfter(deadline: .now() + .seconds(1)) { [self] in flushInBackground() }
        }
    }

    /// How long `writeSoon` gathers writes before committing them: a transaction costs about
    /// as much as the file operation itself (it writes each page it touched to the log), so a
    /// burst (tar x) shares one per dozens of files. 5 ms cost 15 us more of CPU per small
    /// file than this; a crash can lose this much of the last changes (docs/SEMANTICS.md).
    static let gathering = DispatchTimeInterval.milliseconds(20)

    /// Returns once every write asked for so far is committed.
    func flush() throws {
        try order.withLock {
            // Nothing waiting, and holding `order` nothing is being committed: done.
            guard waiting.withLock({ !$0.isEmpty }) else { return }
            try writeHoldingOrder { _ in }
        }
    }

    /// Returns once every write asked for so far survives a power loss: committed, and the
    /// log synced. (`synchronous = NORMAL` syncs the log only before a checkpoint, and the
    /// database file after it: a committed transaction is durable once the log is. A
    /// checkpoint here instead cost three syncs per `fsync` of a file: SQLite on the mount
    /// ran its transactions at a sixth of native speed.)
    /// Returns whether it synced the log (false: nothing committed since the last time).
    @discardableResult
    func makeDurable() throws -> Bool {
        try order.withLock {
            if waiting.withLock({ !$0.isEmpty }) { try writeHoldingOrder { _ in } }
            // A commit outside `order` (the snapshot's) counted after this read is synced by
            // the next call.
            let committed = commits.count
            guard committed != durableCommits.withLock({ $0 }) else { return false }
            // No log: everything is in the database file, synced by the checkpoint that
            // emptied the log.
            let log = open(pool.path + "-wal", O_RDONLY | O_CLOEXEC)
            if log >= 0 {
                defer { close(log) }
                guard fsync(log) == 0 else { throw Errno(rawValue: errno) }
            }
            durableCommits.withLock { $0 = committed }
            return true
        }
    }

    /// Append-only: never edit a migration that has shipped.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                    CREATE TABLE item (
                        id TEXT PRIMARY KEY NOT NULL, parent TEXT NOT NULL, name TEXT NOT NULL,
                        kind TEXT NOT NULL, mode INTEGER NOT NULL, mtime_s INTEGER NOT NULL,
                        mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, chunks BLOB NOT NULL,
                        target TEXT, xattrs BLOB, version INTEGER NOT NULL,
                        content_version INTEGER NOT NULL, deleted INTEGER NOT NULL,
                        conflict_of TEXT);
                    CREATE TABLE pending (local_id INTEGER PRIMARY KEY NOT NULL, change BLOB NOT NULL);
                    CREATE TABLE content (
                        id TEXT PRIMARY KEY NOT NULL, chunks BLOB NOT NULL, size INTEGER NOT NULL,
                        present BLOB NOT NULL, dirty INTEGER NOT NULL, pinned INTEGER NOT NULL,
                        last_access INTEGER NOT NULL);
                    CREATE TABLE inode (ino INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE);
                    """)
        }
        migrator.registerMigration("v2 content pending and origin, landed table") { db in
            try db.execute(sql: "ALTER TABLE item ADD COLUMN content_pending INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE item ADD COLUMN content_from TEXT")
            // Where recent local changes landed: a table (a row per change) instead of one
            // JSON value rewritten whole on every pull.
            try db.execute(sql: "CREATE TABLE landed (local_id INTEGER PRIMARY KEY NOT NULL, seq INTEGER NOT NULL)")
            if let json = try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'landed'") {
                let landed = try FormatCoding.decode([Int64: UInt64].self, from: Data(json.utf8))
                for (localID, seq) in landed {
                    try db.execute(sql: "INSERT INTO landed (local_id, seq) VALUES (?, ?)", arguments: [localID, Int64(seq)])
                }
                try db.execute(sql: "DELETE FROM meta WHERE key = 'landed'")
            }
        }
        migrator.registerMigration("v3 one encoding per column") { db in
            // Earlier versions told JSON from packed records by their first byte, which
            // misread a packed range starting at an offset whose low byte is "{". Rewrite
            // every JSON record once; from here on each column has one encoding.
            let ranges = try Row.fetchAll(db, sql: "SELECT id, present FROM content")
            for row in ranges {
                let data: Data = row["present"]
                let legacy = try? StateDatabase.decodeLegacyJSON(ByteRanges.self, data)
                let present = try legacy ?? StateDatabase.decodeRanges(data)
                try db.execute(
                    sql: "UPDATE content SET present = ? WHERE id = ?",
                    arguments: [StateDatabase.encode(present), row["id"] as String])
            }
            for row in try Row.fetchAll(db, sql: "SELECT local_id, change FROM pending") {
                guard let change = try? StateDatabase.decodeLegacyJSON(LocalChange.self, row["change"]) else { continue }
                try db.execute(
                    sql: "UPDATE pending SET change = ? WHERE local_id = ?",
                    arguments: [LocalChangeCoding.encode(change), row["local_id"] as Int64])
            }
        }
        migrator.registerMigration("v4 owners") { db in
            // NULL: 0 and 0 (items recorded before owners were stored).
            try db.execute(sql: "ALTER TABLE item ADD COLUMN uid INTEGER")
            try db.execute(sql: "ALTER TABLE item ADD COLUMN gid INTEGER")
        }
        migrator.registerMigration("v5 special files, ctime, atime") { db in
            // NULL: none (device), the modification time (ctime, atime).
            for column in ["device", "ctime_s", "ctime_ns", "atime_s", "atime_ns"] {
                try db.execute(sql: "ALTER TABLE item ADD COLUMN \(column) INTEGER")
            }
        }
        migrator.registerMigration("v6 hard links") { db in
            try db.execute(sql: "ALTER TABLE item ADD COLUMN linked_item TEXT")  // NULL: not a link
        }
        migrator.registerMigration("v7 history") { db in
            // NULL: unknown (content folded before), no history.
            for column in [
                "content_time_s INTEGER", "content_time_ns INTEGER", "content_device TEXT", "history BLOB",
                "deleted_s INTEGER", "deleted_ns INTEGER", "deleted_by TEXT",
            ] {
                try db.execute(sql: "ALTER TABLE item ADD COLUMN \(column)")
            }
        }
        migrator.registerMigration("v8 local access times") { db in
            // Access times moved by reads on this device (`AccessTimeRule`), never synced.
            try db.execute(sql: "CREATE TABLE access_time (id TEXT PRIMARY KEY, s INTEGER NOT NULL, ns INTEGER NOT NULL)")
        }
        migrator.registerMigration("v9 history in protobuf") { db in
            // Was JSON (hex chunk lists), rewritten with every change of a file.
            for row in try Row.fetchAll(db, sql: "SELECT id, history FROM item WHERE history IS NOT NULL") {
                let history = try FormatCoding.decode([PastVersion].self, from: row["history"])
                try db.execute(
                    sql: "UPDATE item SET history = ? WHERE id = ?",
                    arguments: [HistoryCoding.encode(history), row["id"] as String])
            }
        }
        migrator.registerMigration("v10 packed chunks") { db in
            // Where chunks stored in packs are (`Tree.packedChunks`): the last location an
            // entry gave, kept as the fold keeps it.
            try db.execute(
                sql: "CREATE TABLE packed_chunk (hash BLOB PRIMARY KEY, pack BLOB NOT NULL, offset INTEGER NOT NULL, size INTEGER NOT NULL) WITHOUT ROWID")
        }
        migrator.registerMigration("v11 node numbers without an index of ids") { db in
            // The unique index of ids took a page write at a random place per new item (ids
            // are random); nothing looks a number up by id here (the kernel layer keeps them
            // in memory, and never hands one id two numbers), so the table is keyed by
            // number alone, appended to in order.
            try db.execute(
                sql: """
                    CREATE TABLE inode_by_number (ino INTEGER PRIMARY KEY NOT NULL, id TEXT NOT NULL);
                    INSERT INTO inode_by_number (ino, id) SELECT ino, id FROM inode;
                    DROP TABLE inode;
                    ALTER TABLE inode_by_number RENAME TO inode;
                    """)
        }
        migrator.registerMigration("v12 content in the staging log") { db in
            // NULL: in its cache file. Else where in the staging log its bytes rest
            // (`StagingLog.Location`: segment, offset and size, 16 bytes little-endian).
            try db.execute(sql: "ALTER TABLE content ADD COLUMN staged BLOB")
        }
        migrator.registerMigration("v13 packed chunks appended") { db in
            // Keyed by hash, each new chunk's location took a page write at a random place
            // of the table (W3: 5 us of daemon CPU and 1.5 KB of writes per file); appended
            // in order instead, a chunk located again is a newer row (`loadTree` keeps the
            // last), and a start drops the rows so passed (`compactPackedChunks`).
            try db.execute(
                sql: """
                    CREATE TABLE packed_chunk_log (hash BLOB NOT NULL, pack BLOB NOT NULL, offset INTEGER NOT NULL, size INTEGER NOT NULL);
                    INSERT INTO packed_chunk_log (hash, pack, offset, size) SELECT hash, pack, offset, size FROM packed_chunk;
                    DROP TABLE packed_chunk;
                    ALTER TABLE packed_chunk_log RENAME TO packed_chunk;
                    """)
        }
        migrator.registerMigration("v14 a row per pack") { db in
            // A row per packed chunk was a row per small file (W3: 2,000 rows for 8 packs);
            // now a row per pack names its chunks (`encode(_: [PackedChunk])`), appended as
            // before. Consecutive rows of one pack become its row, in their order.
            try db.execute(
                sql: "CREATE TABLE pack_chunks (pack BLOB NOT NULL, chunks BLOB NOT NULL)")
            var run: (pack: Data, chunks: [PackedChunk])?
            func insertRun() throws {
                guard let run else { return }
                try db.execute(
                    sql: "INSERT INTO pack_chunks (pack, chunks) VALUES (?, ?)",
                    arguments: [run.pack, StateDatabase.encode(run.chunks)])
            }
            let rows = try Row.fetchCursor(db, sql: "SELECT hash, pack, offset, size FROM packed_chunk ORDER BY rowid")
            while let row = try rows.next() {
                let (hash, pack): (Data, Data) = (row["hash"], row["pack"])
                guard hash.count == ChunkHash.byteCount else { throw StateDatabaseError.malformed("a packed chunk's hash") }
                let chunk = PackedChunk(
                    hash: hash.withUnsafeBytes { ChunkHash(bytes: $0) }, offset: UInt64(row["offset"] as Int64),
                    size: UInt32(row["size"] as Int64))
                if run?.pack == pack {
                    run!.chunks.append(chunk)
                } else {
                    try insertRun()
                    run = (pack, [chunk])
                }
            }
            try insertRun()
            try db.execute(sql: "DROP TABLE packed_chunk")
        }
        migrator.registerMigration("v15 landed as runs") { db in
            // A row per landed change was a row per small file; a batch's changes land at one
            // number, so a run of consecutive local ids at one number is one row.
            try db.execute(sql: "CREATE TABLE landed_run (first INTEGER PRIMARY KEY NOT NULL, last INTEGER NOT NULL, seq INTEGER NOT NULL)")
            var landed: [(Int64, UInt64)] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT local_id, seq FROM landed")
            while let row = try rows.next() { landed.append((row["local_id"], UInt64(row["seq"] as Int64))) }
            try insertRuns(landed, db)
            try db.execute(sql: "DROP TABLE landed")
        }
        return migrator
    }

    /// A record in the JSON that versions before migration v3 wrote, or an error.
    private static func decodeLegacyJSON<T: Decodable>(_ type: T.Type, _ data: Data) throws -> T {
        guard data.first == UInt8(ascii: "{") else { throw StateDatabaseError.malformed("not JSON") }
        return try FormatCoding.decode(type, from: data)
    }

    // MARK: meta

    func meta(_ key: String, _ db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key])
    }

    func setMeta(_ key: String, _ value: String?, _ db: Database) throws {
        if let value {
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)")
                .execute(arguments: [key, value])
        } else {
            try db.cachedStatement(sql: "DELETE FROM meta WHERE key = ?").execute(arguments: [key])
        }
    }

    // MARK: landed (journal numbers of recent local changes)

    func loadLanded(_ db: Database) throws -> [Int64: UInt64] {
        var landed: [Int64: UInt64] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT first, last, seq FROM landed_run")
        while let row = try rows.next() {
            let (first, last, seq): (Int64, Int64, Int64) = (row["first"], row["last"], row["seq"])
            guard first <= last else { throw StateDatabaseError.malformed("a landed run from \(first) to \(last)") }
            for localID in first...last { landed[localID] = UInt64(seq) }
        }
        return landed
    }

    /// Records where changes landed (their entry's number, or 0: `DeviceView.landed`),
    /// keeping those of the newest `keep` local ids (ids only grow; a run reaching past the
    /// cutoff is kept whole).
    func recordLanded(_ landed: [(localID: Int64, seq: UInt64)], keep: Int, _ db: Database) throws {
        try StateDatabase.insertRuns(landed, db)
        guard let newest = landed.map(\.localID).max() else { return }
        try db.cachedStatement(sql: "DELETE FROM landed_run WHERE last <= ?").execute(arguments: [newest - Int64(keep)])
    }

    /// Consecutive local ids that landed at one number, a row each.
    private static func insertRuns(_ landed: [(localID: Int64, seq: UInt64)], _ db: Database) throws {
        let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO landed_run (first, last, seq) VALUES (?, ?, ?)")
        var run: (first: Int64, last: Int64, seq: UInt64)?
        for (localID, seq) in landed.sorted(by: { $0.localID < $1.localID }) {
            if let current = run, current.last + 1 == localID, current.seq == seq {
                run!.last = localID
                continue
            }
            if let run { try insert.execute(arguments: [run.first, run.last, Int64(run.seq)]) }
            run = (localID, localID, seq)
        }
        if let run { try insert.execute(arguments: [run.first, run.last, Int64(run.seq)]) }
    }

    // MARK: item (the synced tree)

    func loadTree(_ db: Database) throws -> Tree {
        let head = UInt64(try meta("head", db) ?? "0") ?? 0
        var items: [Item] = []
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM item")
        while let row = try rows.next() {
            items.append(try StateDatabase.item(from: row))
        }
        let policy = try meta("policy", db).map { try FormatCoding.decode(RetentionPolicy.self, from: Data($0.utf8)) }
        let journalFormat = Int(try meta("journalFormat", db) ?? "0") ?? 0
        var packed: [ChunkHash: PackedLocation] = [:]
        let packs = try Row.fetchCursor(db, sql: "SELECT pack, chunks FROM pack_chunks ORDER BY rowid")
        while let row = try packs.next() {
            let pack: Data = row["pack"]
            guard pack.count == ChunkHash.byteCount else { throw StateDatabaseError.malformed("a pack's hash") }
            let id = pack.withUnsafeBytes { ChunkHash(bytes: $0) }
            for chunk in try StateDatabase.decodePackedChunks(row["chunks"]) {
                packed[chunk.hash] = PackedLocation(pack: id, offset: chunk.offset, size: chunk.size)
            }
        }
        return Tree(items: items, head: head, policy: policy, journalFormat: journalFormat, packedChunks: packed)
    }

    /// Records where the chunks of `packs` are, a row per pack in order (the fold's last
    /// location wins: a row appended after another naming the same chunk replaces it when
    /// loaded); `replacingAll` forgets every location first (a tree taken from a snapshot).
    func savePackedChunks(_ packs: [PackRecord], replacingAll: Bool = false, _ db: Database) throws {
        if replacingAll { try db.execute(sql: "DELETE FROM pack_chunks") }
        let statement = try db.cachedStatement(sql: "INSERT INTO pack_chunks (pack, chunks) VALUES (?, ?)")
        for pack in packs where !pack.chunks.isEmpty {
            try statement.execute(arguments: [Data(pack.id.bytes), StateDatabase.encode(pack.chunks)])
        }
    }

    /// Writes the locations again, a row per pack, once the rows name more than twice the
    /// chunks located (plus 1,000): chunks located again (a repack, the same chunk in two
    /// packs) left rows passed. A start's work, proportional to the table.
    func compactPackedChunks(_ located: [ChunkHash: PackedLocation], _ db: Database) throws {
        // `length` reads a blob's size, not its bytes.
        let named =
            try Int.fetchOne(
                db, sql: "SELECT coalesce(sum(length(chunks)), 0) / \(Self.packedChunkSize) FROM pack_chunks") ?? 0
        guard named > 2 * located.count + 1_000 else { return }
        try savePackedChunks(PackRecord.grouping(located), replacingAll: true, db)
    }

    func saveItems(_ ids: some Sequence<ItemID>, of tree: Tree, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT OR REPLACE INTO item (id, parent, name, kind, mode, mtime_s, mtime_ns, size,
                chunks, target, xattrs, version, content_version, deleted, conflict_of, content_pending,
                content_from, uid, gid, device, ctime_s, ctime_ns, atime_s, atime_ns, linked_item,
                content_time_s, content_time_ns, content_device, history, deleted_s, deleted_ns, deleted_by)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let purge = try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?")
        for id in ids {
            guard let item = tree.item(id) else {
                try purge.execute(arguments: [id.rawValue])  // expired: gone from the tree
                continue
            }
            var insert = RowInsert(statement, db)
            insert.bind(item.id.rawValue)
            insert.bind(item.parent.rawValue)
            insert.bind(item.name)
            insert.bind(item.kind.rawValue)
            insert.bind(Int64(item.mode))
            insert.bind(item.mtime.seconds)
            insert.bind(Int64(item.mtime.nanoseconds))
            insert.bind(Int64(item.size))
            insert.bind(StateDatabase.encode(item.chunks))
            insert.bind(item.target)
            insert.bind(item.xattrs.isEmpty ? nil : FormatCoding.encode(item.xattrs))
            insert.bind(Int64(item.version))
            insert.bind(Int64(item.contentVersion))
            insert.bind(item.deleted)
            insert.bind(item.conflictOf?.rawValue)
            insert.bind(item.isContentPending)
            insert.bind(item.contentFrom?.rawValue)
            insert.bind(item.owner.map { Int64($0.uid) })
            insert.bind(item.owner.map { Int64($0.gid) })
            insert.bind(item.device.map { Int64(bitPattern: $0) })
            insert.bind(item.ctime?.seconds)
            insert.bind(item.ctime.map { Int64($0.nanoseconds) })
            insert.bind(item.atime?.seconds)
            insert.bind(item.atime.map { Int64($0.nanoseconds) })
            insert.bind(item.linkedItem?.rawValue)
            insert.bind(item.contentTime?.seconds)
            insert.bind(item.contentTime.map { Int64($0.nanoseconds) })
            insert.bind(item.contentDevice)
            insert.bind(item.history.map(HistoryCoding.encode))
            insert.bind(item.deletion?.time.seconds)
            insert.bind(item.deletion.map { Int64($0.time.nanoseconds) })
            insert.bind(item.deletion?.device)
            try insert.run()
        }
        try setMeta("head", String(tree.head), db)
        try setMeta("policy", tree.policy.map { String(decoding: FormatCoding.encode($0), as: UTF8.self) }, db)
        try setMeta("journalFormat", String(tree.journalFormat), db)
    }

    static func item(from row: Row) throws -> Item {
        let xattrs: [String: Data] =
            try (row["xattrs"] as Data?).map { try FormatCoding.decode([String: Data].self, from: $0) } ?? [:]
        return Item(
            id: ItemID(row["id"]), parent: ItemID(row["parent"]), name: row["name"],
            kind: ItemKind(rawValue: row["kind"]) ?? .file, mode: UInt32(row["mode"] as Int64),
            mtime: Timestamp(seconds: row["mtime_s"], nanoseconds: UInt32(row["mtime_ns"] as Int64)),
            size: UInt64(row["size"] as Int64), chunks: decodeChunks(row["chunks"]), target: row["target"],
            xattrs: xattrs, version: UInt64(row["version"] as Int64),
            contentVersion: UInt64(row["content_version"] as Int64), deleted: row["deleted"],
            conflictOf: (row["conflict_of"] as String?).map(ItemID.init),
            contentFrom: (row["content_from"] as String?).map(ItemID.init), isContentPending: row["content_pending"],
            owner: (row["uid"] as Int64?).map { Owner(uid: UInt32($0), gid: UInt32(row["gid"] as Int64? ?? 0)) },
            device: (row["device"] as Int64?).map { UInt64(bitPattern: $0) },
            ctime: time(row, "ctime"), atime: time(row, "atime"),
            linkedItem: (row["linked_item"] as String?).map(ItemID.init),
            contentTime: time(row, "content_time"), contentDevice: row["content_device"],
            history: try (row["history"] as Data?).map { try HistoryCoding.decode($0, of: row["id"]) },
            deletion: time(row, "deleted").map { Deletion(time: $0, device: row["deleted_by"] ?? "") })
    }

    /// A time stored in the columns NAME_s and NAME_ns, if any.
    private static func time(_ row: Row, _ name: String) -> Timestamp? {
        guard let seconds = row["\(name)_s"] as Int64? else { return nil }
        return Timestamp(seconds: seconds, nanoseconds: UInt32(row["\(name)_ns"] as Int64? ?? 0))
    }

    /// Chunk lists as packed 36-byte records (32-byte hash, 4-byte little-endian size): small
    /// and quick to load for large containers.
    package static func encode(_ chunks: [ChunkRef]) -> Data {
        var data = Data(capacity: chunks.count * 36)
        for chunk in chunks {
            chunk.hash.append(to: &data)
            withUnsafeBytes(of: chunk.size.littleEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    package static func decodeChunks(_ data: Data) -> [ChunkRef] {
        data.withUnsafeBytes { bytes in
            stride(from: 0, to: bytes.count - bytes.count % 36, by: 36).map { start in
                let hash = ChunkHash(bytes: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 32]))
                let size = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 32, as: UInt32.self))
                return ChunkRef(hash: hash, size: size)
            }
        }
    }

    /// The bytes of one chunk in a pack's row: its hash (32), offset (8) and size (4).
    static let packedChunkSize = 44

    /// A pack's chunks as packed records of `packedChunkSize` bytes (hash, then offset and
    /// size: little-endian).
    package static func encode(_ chunks: [PackedChunk]) -> Data {
        var data = Data(capacity: chunks.count * packedChunkSize)
        for chunk in chunks {
            chunk.hash.append(to: &data)
            withUnsafeBytes(of: chunk.offset.littleEndian) { data.append(contentsOf: $0) }
            withUnsafeBytes(of: chunk.size.littleEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    package static func decodePackedChunks(_ data: Data) throws -> [PackedChunk] {
        guard data.count % packedChunkSize == 0 else { throw StateDatabaseError.malformed("a pack's chunks of \(data.count) bytes") }
        return data.withUnsafeBytes { bytes in
            stride(from: 0, to: bytes.count, by: packedChunkSize).map { start in
                PackedChunk(
                    hash: ChunkHash(bytes: UnsafeRawBufferPointer(rebasing: bytes[start..<start + 32])),
                    offset: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 32, as: UInt64.self)),
                    size: UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 40, as: UInt32.self)))
            }
        }
    }

    /// Byte ranges as packed 16-byte records (start, end: little-endian).
    package static func encode(_ ranges: ByteRanges) -> Data {
        var data = Data(capacity: ranges.ranges.count * 16)
        for range in ranges.ranges {
            withUnsafeBytes(of: range.lowerBound.littleEndian) { data.append(contentsOf: $0) }
            withUnsafeBytes(of: range.upperBound.littleEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    package static func decodeRanges(_ data: Data) throws -> ByteRanges {
        guard data.count % 16 == 0 else { throw StateDatabaseError.malformed("byte ranges of \(data.count) bytes") }
        return data.withUnsafeBytes { bytes in
            ByteRanges(stride(from: 0, to: bytes.count, by: 16).compactMap { start in
                let lower = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt64.self))
                let upper = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start + 8, as: UInt64.self))
                return lower < upper ? lower..<upper : nil
            })
        }
    }

    // MARK: pending (the upload queue)

    func loadPending(_ db: Database) throws -> [LocalChange] {
        try Data.fetchAll(db, sql: "SELECT change FROM pending ORDER BY local_id").map {
            try LocalChangeCoding.decode($0)
        }
    }

    /// Inserts or replaces the row of `change` (a fold rewrites a queued change in place).
    func insertPending(_ change: LocalChange, _ db: Database) throws {
        var insert = RowInsert(try db.cachedStatement(sql: "INSERT OR REPLACE INTO pending (local_id, change) VALUES (?, ?)"), db)
        insert.bind(change.localID)
        insert.bind(LocalChangeCoding.encode(change))
        try insert.run()
    }

    func deletePending(_ ids: [Int64], _ db: Database) throws {
        let delete = try db.cachedStatement(sql: "DELETE FROM pending WHERE local_id = ?")
        for id in ids { try delete.execute(arguments: [id]) }
    }

    /// Deletes the rows of a landed batch: a prefix of the queue, so every row up to its
    /// last change is the batch's (one statement, not one per change).
    func deletePending(through lastID: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM pending WHERE local_id <= ?").execute(arguments: [lastID])
    }

    // MARK: content

    func loadContent(_ db: Database) throws -> [ItemID: ContentRecord] {
        var records: [ItemID: ContentRecord] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT * FROM content")
        while let row = try rows.next() {
            records[ItemID(row["id"])] = ContentRecord(
                chunks: StateDatabase.decodeChunks(row["chunks"]), size: UInt64(row["size"] as Int64),
                present: try StateDatabase.decodeRanges(row["present"]),
                dirty: row["dirty"], pinned: row["pinned"], lastAccess: row["last_access"],
                staged: try (row["staged"] as Data?).map(StateDatabase.decodeLocation))
        }
        return records
    }

    func saveContent(_ id: ItemID, _ record: ContentRecord?, _ db: Database) throws {
        guard let record else {
            try db.cachedStatement(sql: "DELETE FROM content WHERE id = ?").execute(arguments: [id.rawValue])
            return
        }
        var insert = RowInsert(
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO content (id, chunks, size, present, dirty, pinned, last_access, staged)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """), db)
        insert.bind(id.rawValue)
        insert.bind(StateDatabase.encode(record.chunks))
        insert.bind(Int64(record.size))
        insert.bind(StateDatabase.encode(record.present))
        insert.bind(record.dirty)
        insert.bind(record.pinned)
        insert.bind(record.lastAccess)
        insert.bind(record.staged.map(StateDatabase.encode))
        try insert.run()
    }

    /// The staging log segments content records name.
    func stagedSegments(_ db: Database) throws -> Set<UInt32> {
        var segments = Set<UInt32>()
        let rows = try Data.fetchCursor(db, sql: "SELECT staged FROM content WHERE staged IS NOT NULL")
        while let data = try rows.next() { segments.insert(try StateDatabase.decodeLocation(data).segment) }
        return segments
    }

    static func encode(_ location: StagingLog.Location) -> Data {
        var data = Data(capacity: 16)
        withUnsafeBytes(of: location.segment.littleEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: location.offset.littleEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: location.size.littleEndian) { data.append(contentsOf: $0) }
        return data
    }

    static func decodeLocation(_ data: Data) throws -> StagingLog.Location {
        guard data.count == 16 else { throw StateDatabaseError.malformed("a staging log location of \(data.count) bytes") }
        let bytes = [UInt8](data)
        func integer<T: FixedWidthInteger>(_ type: T.Type, at start: Int) -> T {
            bytes[start..<start + MemoryLayout<T>.size].reversed().reduce(0) { $0 << 8 | T($1) }
        }
        return StagingLog.Location(
            segment: integer(UInt32.self, at: 0), offset: integer(UInt64.self, at: 4), size: integer(UInt32.self, at: 12))
    }

    // MARK: inode

    func loadAccessTimes(_ db: Database) throws -> [ItemID: Timestamp] {
        var times: [ItemID: Timestamp] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT id, s, ns FROM access_time") {
            times[ItemID(row["id"] as String)] = Timestamp(seconds: row["s"], nanoseconds: UInt32(clamping: row["ns"] as Int64))
        }
        return times
    }

    /// Records a read's access time, or forgets it (nil: a set one took over).
    func saveAccessTime(_ id: ItemID, _ time: Timestamp?, _ db: Database) throws {
        if let time {
            try db.execute(
                sql: "INSERT OR REPLACE INTO access_time (id, s, ns) VALUES (?, ?, ?)",
                arguments: [id.rawValue, time.seconds, Int64(time.nanoseconds)])
        } else {
            try db.execute(sql: "DELETE FROM access_time WHERE id = ?", arguments: [id.rawValue])
        }
    }

    func loadInodes(_ db: Database) throws -> [(UInt64, ItemID)] {
        try Row.fetchAll(db, sql: "SELECT ino, id FROM inode").map { (UInt64($0["ino"] as Int64), ItemID($0["id"])) }
    }

    func saveInodes(_ assignments: [(UInt64, ItemID)], _ db: Database) throws {
        let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO inode (ino, id) VALUES (?, ?)")
        for (number, id) in assignments { try insert.execute(arguments: [Int64(number), id.rawValue]) }
    }
}

struct StateDatabaseError: Error, CustomStringConvertible {
    var description: String

    static func malformed(_ what: String) -> StateDatabaseError {
        StateDatabaseError(description: "malformed state database record: \(what)")
    }
}

/// What a local content file holds: the chunk list it mirrors and which bytes are present.
struct ContentRecord: Sendable, Equatable {
    var chunks: [ChunkRef]
    var size: UInt64
    var present: ByteRanges
    /// Written locally since the last commit (an open file being edited): the file is the
    /// only copy of these bytes.
    var dirty: Bool
    var pinned: Bool
    var lastAccess: Int64
    /// Where the bytes rest in the staging log when the file has no cache file (a new small
    /// file since its close, until something opens it; `Replica.materialize`).
    var staged: StagingLog.Location? = nil

    var isComplete: Bool { present.contains(0..<size) }

    /// An empty file that is complete (a new local file, or nothing known yet).
    static let empty = ContentRecord(chunks: [], size: 0, present: ByteRanges(), dirty: false, pinned: false, lastAccess: 0)

    func with(dirty: Bool) -> ContentRecord {
        var record = self
        record.dirty = dirty
        return record
    }
}

/// The writes `writeSoon` collected, in order, the queue rows `saveChangeSoon` left (the
/// latest of each), and whether a background write is due.
private struct WaitingWrites {
    private var works: [StateDatabase.Work] = []
    private var rows = LatestQueueRows()
    var backgroundDue = false
    var isEmpty: Bool { works.isEmpty && rows.isEmpty }

    /// Adds `work`; true when a background write should be scheduled for it.
    mutating func add(_ work: @escaping StateDatabase.Work) -> Bool {
        works.append(work)
        return markDue()
    }

    /// Keeps `change` and `content` in place of what waits for them; true as `add`.
    mutating func save(_ change: LocalChange?, isNew: Bool, content: [(ItemID, ContentRecord?)]) -> Bool {
        if let change {
            rows.changes[change.localID] = change
            if isNew { rows.nextLocalID = max(rows.nextLocalID ?? 0, change.localID + 1) }
        }
        for (id, record) in content { rows.content[id] = .some(record) }
        return markDue()
    }

    private mutating func markDue() -> Bool {
        defer { backgroundDue = true }
        return !backgroundDue
    }

    mutating func take() -> (works: [StateDatabase.Work], rows: LatestQueueRows) {
        defer {
            works = []
            rows = LatestQueueRows()
        }
        return (works, rows)
    }

    /// Writes that failed go back in front of those asked for since (whose rows are newer).
    mutating func putBack(_ failed: (works: [StateDatabase.Work], rows: LatestQueueRows)) {
        works = failed.works + works
        rows = failed.rows.overwritten(by: rows)
    }
}

/// Queued changes and content records waiting to be written: the latest version of each.
private struct LatestQueueRows {
    var changes: [Int64: LocalChange] = [:]
    /// nil: the record is gone.
    var content: [ItemID: ContentRecord?] = [:]
    /// The next new change's local id, once a new one waits (a fold's never moves it).
    var nextLocalID: Int64?

    var isEmpty: Bool { changes.isEmpty && content.isEmpty }

    func overwritten(by newer: LatestQueueRows) -> LatestQueueRows {
        LatestQueueRows(
            changes: changes.merging(newer.changes) { $1 },
            content: content.merging(newer.content) { $1 },
            nextLocalID: [nextLocalID, newer.nextLocalID].compactMap { $0 }.max())
    }

    func write(to database: StateDatabase, _ db: Database) throws {
        guard !isEmpty else { return }
        for localID in changes.keys.sorted() { try database.insertPending(changes[localID]!, db) }
        if let nextLocalID { try database.setMeta("nextLocalID", String(nextLocalID), db) }
        for (id, record) in content { try database.saveContent(id, record, db) }
    }
}

/// Counts the transactions the database commits (GRDB tells an observer of every commit,
/// whatever it changed).
private final class CommitCounter: TransactionObserver, Sendable {
    private let committed = Atomic<UInt64>(0)

    var count: UInt64 { committed.load(ordering: .acquiring) }

    func observes(eventsOfKind eventKind: DatabaseEventKind) -> Bool { false }
    func databaseDidChange(with event: DatabaseEvent) {}
    func databaseDidCommit(_ db: Database) { committed.add(1, ordering: .releasing) }
    func databaseDidRollback(_ db: Database) {}
}
