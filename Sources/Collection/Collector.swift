import BlobStore
import ContainerFormat
import Foundation
import Logging

/// How the store's bytes are used: by live items, only by retained history (past versions,
/// deleted items), by nothing, and by the journal itself.
public struct StoreUsage: Codable, Hashable, Sendable {
    public var liveBytes: UInt64 = 0
    public var historyBytes: UInt64 = 0
    /// Chunks nothing names: a collection deletes them once they are older than its grace.
    public var collectableBytes: UInt64 = 0
    /// Journal entries, snapshots and collection records.
    public var journalBytes: UInt64 = 0
    public var journalEntries = 0
    public var chunks = 0
    public var packs = 0

    public init() {}

    public var totalBytes: UInt64 { liveBytes + historyBytes + collectableBytes + journalBytes }
}

/// What one collection did (or, dry, would do).
public struct CollectionResult: Codable, Sendable {
    public var before = StoreUsage()
    /// Items whose past versions or whose tombstone the expiry dropped.
    public var expiredItems = 0
    public var candidateChunks = 0
    public var candidateBytes: UInt64 = 0
    public var deletedChunks = 0
    public var deletedBytes: UInt64 = 0
    /// Candidates kept because a device named or rewrote them meanwhile.
    public var keptChunks = 0
    public var candidatePacks = 0
    public var candidatePackBytes: UInt64 = 0
    public var deletedPacks = 0
    public var deletedPackBytes: UInt64 = 0
    /// Packs whose used chunks were moved into new packs (they are candidates from then on).
    public var repackedPacks = 0
    public var repackedBytes: UInt64 = 0
    public var deletedEntries = 0
    public var deletedSnapshots = 0
    /// Temporary files of store writes a crash cut short, removed.
    public var removedAbandonedWrites = 0
    /// The record written (nil: dry run).
    public var record: UInt64?

    public init() {}
}

public enum CollectionError: Error, CustomStringConvertible, Sendable {
    /// Another collection may still delete chunks: two at once are safe but waste a grace.
    case busy(CollectionRecord)

    public var description: String {
        switch self {
        case .busy(let record):
            "another collection (by \(record.device), record \(record.number)) runs until \(record.deadline.iso8601); try after it"
        }
    }
}

/// Collects one container (FORMAT.md "Collection"): writes the expiry the retention policy
/// calls for, chooses the chunks nothing names (older than the grace), records them, waits
/// the grace so that every device can see the record, then deletes those still unnamed and
/// not rewritten since; last, it writes a snapshot and deletes the journal entries and
/// snapshots behind it that are older than the grace.
public struct Collector: Sendable {
    public let container: ContainerStore
    public let device: String
    public let deviceID: String
    let logger: Logger
    /// Says what it is doing (a line each step, and the wait).
    let progress: @Sendable (String) -> Void

    /// Records of collections are kept this long after their sweep: a device that has not
    /// looked at the store for longer forgets which chunks it believed stored.
    public static let recordsKept: Int64 = 7 * 86_400

    public init(
        container: ContainerStore, device: String, deviceID: String, logger: Logger,
        progress: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.container = container
        self.device = device
        self.deviceID = deviceID
        self.logger = logger
        self.progress = progress
    }

    /// The store's usage as `tree` names its chunks.
    public func usage(of tree: Tree) async throws -> StoreUsage {
        try await measure(tree, chunks: try await container.listChunks(), packs: try await container.listPacks())
    }

    /// `start`: a tree of the container (at any head) to catch up from, instead of the
    /// newest snapshot.
    public func run(dryRun: Bool, from start: Tree? = nil) async throws -> CollectionResult {
        var result = CollectionResult()
        var tree = try await catchUp(start)
        let (records, problems) = try await container.collectionRecords()
        for problem in problems { logger.warning("skipping collection record \(problem)") }
        if !dryRun, let running = records.last(where: { $0.mayDelete(at: .now()) }) {
            throw CollectionError.busy(running)
        }
        let policy = tree.policy ?? .standard

        // 1. The expiry: every device drops the same versions and deleted items.
        var expire = Commit(commitID: RandomID.make(), device: device, deviceID: deviceID, time: .now(), ops: [])
        expire.expire = policy.expiry(at: expire.time)
        var trial = tree
        result.expiredItems = trial.apply(expire, seq: trial.head + 1).changed.count
        if result.expiredItems > 0 {
            progress("expiring \(result.expiredItems) item(s)' past versions and deleted items")
            tree = dryRun ? trial : try await append(expire, to: tree)
        }

        // 2. Packs mostly dead: their used chunks move to new packs, so that they hold
        // nothing used and go with the candidates.
        var packs = try await container.listPacks()
        if !dryRun {
            tree = try await repack(packs, of: tree, writtenBefore: Timestamp.now().adding(seconds: -policy.grace).date, into: &result)
            if result.repackedPacks > 0 { packs = try await container.listPacks() }
        }

        // 3. Candidates: chunks nothing names and packs where no chunk named is, written
        // before the grace.
        let chunks = try await container.listChunks()
        result.before = try await measure(tree, chunks: chunks, packs: packs)
        let use = ChunkUse(of: tree)
        let started = Timestamp.now()
        let writtenBefore = started.adding(seconds: -policy.grace).date
        let candidates = chunks.filter { !use.contains($0.hash) && $0.modified < writtenBefore }
        result.candidateChunks = candidates.count
        result.candidateBytes = candidates.reduce(0) { $0 + $1.size }
        let usedPacks = PackUse(of: tree, use: use)
        let candidatePacks = packs.filter { usedPacks.bytes[$0.id] == nil && $0.modified < writtenBefore }
        result.candidatePacks = candidatePacks.count
        result.candidatePackBytes = candidatePacks.reduce(0) { $0 + $1.size }
        if dryRun {
            let (entries, snapshots) = try await compactable(tree, policy: policy)
            result.deletedEntries = entries.count
            result.deletedSnapshots = snapshots.count
            return result
        }

        // 4. The record, then the grace: a device about to name a candidate sees it first.
        var record = CollectionRecord(
            number: 0, device: device, started: started, grace: policy.grace, head: tree.head,
            candidates: candidates.map(\.hash), candidatePacks: candidatePacks.map(\.id),
            journalFrom: records.map(\.journalFrom).max() ?? 0)
        try await container.addCollectionRecord(&record, after: records.last?.number ?? 0)
        result.record = record.number
        if !candidates.isEmpty || !candidatePacks.isEmpty {
            try await wait(until: record.sweepAfter)
            tree = try await catchUp(tree)
            let use = ChunkUse(of: tree)
            try await sweep(candidates, of: &record, named: use, into: &result)
            try await sweep(candidatePacks, of: &record, used: PackUse(of: tree, use: use), into: &result)
        }
        record.swept = .now()
        try await container.updateCollectionRecord(record)
        result.removedAbandonedWrites = try await container.removeAbandonedWrites(
            before: started.adding(seconds: -Self.abandonedWriteAge).date)

        // 5. Compaction behind a snapshot of the tree now.
        try await compact(tree, policy: policy, record: &record, into: &result)
        try await forgetOldRecords(records, keeping: record)
        return result
    }

    // MARK: - Steps

    private func catchUp(_ tree: Tree?) async throws -> Tree {
        try await container.catchUp(tree) { logger.warning("\($0)") }
    }

    /// Appends `commit` at the next free number; the tree after it.
    private func append(_ commit: Commit, to tree: Tree) async throws -> Tree {
        var tree = tree
        while true {
            let seq = tree.head + 1
            let appended = try await container.append(commit, at: seq, as: tree.nextEntryEncoding)
            tree = try await catchUp(tree)
            if appended { return tree }
        }
    }

    private func wait(until time: Timestamp) async throws {
        while true {
            let left = time.seconds - Timestamp.now().seconds
            guard left > 0 else { return }
            progress("waiting \(left) s for every device to see the collection before deleting")
            try await Task.sleep(for: .seconds(min(left, 10)))
        }
    }

    /// Deletes the candidates that nothing names now and that no device rewrote since the
    /// record, until the record's deadline.
    private func sweep(
        _ candidates: [(hash: ChunkHash, size: UInt64, modified: Date)], of record: inout CollectionRecord,
        named use: ChunkUse, into result: inout CollectionResult
    ) async throws {
        let started = record.started.date
        let deadline = record.deadline
        let due = candidates.filter { !use.contains($0.hash) }
        result.keptChunks = candidates.count - due.count
        progress("deleting \(due.count) chunk(s)")
        let outcomes = try await withThrowingTaskGroup(of: (deleted: Bool, size: UInt64).self) { group in
            var outcomes: [(deleted: Bool, size: UInt64)] = []
            for (index, chunk) in due.enumerated() {
                if index >= 8, let outcome = try await group.next() { outcomes.append(outcome) }
                group.addTask { [container] in
                    // Rewritten since the record: a device is naming it.
                    guard let written = try await container.chunkWritten(chunk.hash), written < started,
                        Timestamp.now() < deadline
                    else { return (false, 0) }
                    try await container.deleteChunk(chunk.hash)
                    return (true, chunk.size)
                }
            }
            for try await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        for outcome in outcomes {
            if outcome.deleted {
                result.deletedChunks += 1
                result.deletedBytes += outcome.size
            } else {
                result.keptChunks += 1
            }
        }
        record.deletedChunks = result.deletedChunks
        record.deletedBytes = result.deletedBytes
    }

    /// Deletes the candidate packs where no chunk named is located now and that nobody wrote
    /// again since the record, until the record's deadline.
    private func sweep(
        _ candidates: [(id: ChunkHash, size: UInt64, modified: Date)], of record: inout CollectionRecord,
        used: PackUse, into result: inout CollectionResult
    ) async throws {
        let started = record.started.date
        let due = candidates.filter { used.bytes[$0.id] == nil }
        guard !due.isEmpty else { return }
        progress("deleting \(due.count) pack(s)")
        for pack in due {
            guard let written = try await container.packWritten(pack.id), written < started,
                Timestamp.now() < record.deadline
            else { continue }
            try await container.deletePack(pack.id)
            CrashPoint.sweepStarted.reach()
            result.deletedPacks += 1
            result.deletedPackBytes += pack.size
        }
        record.deletedChunks += result.deletedPacks
        record.deletedBytes += result.deletedPackBytes
    }

    /// Packs written before the grace whose used chunks fill less than `repackShare` of
    /// them: those chunks go into new packs (of up to `Pack.largest` bytes), named by one
    /// entry without operations, which moves their locations there. The tree after it.
    private func repack(
        _ packs: [(id: ChunkHash, size: UInt64, modified: Date)], of tree: Tree, writtenBefore: Date,
        into result: inout CollectionResult
    ) async throws -> Tree {
        let used = PackUse(of: tree, use: ChunkUse(of: tree))
        let sparse = packs.filter { pack in
            guard let bytes = used.bytes[pack.id], pack.modified < writtenBefore else { return false }
            return Double(bytes) < Self.repackShare * Double(pack.size)
        }
        guard !sparse.isEmpty else { return tree }
        progress("repacking \(sparse.count) pack(s) mostly of deleted chunks")
        var written: [PackRecord] = []
        var filler = PackFiller()
        func store(_ pack: Pack?) async throws {
            guard let pack else { return }
            try await container.writePack(pack)
            CrashPoint.repackWritten.reach()
            written.append(PackRecord(id: pack.id, chunks: pack.chunks))
        }
        for pack in sparse {
            let (bytes, chunks) = try await container.readPack(pack.id)
            let keep = Set(used.chunks[pack.id] ?? [])
            // A pack of a few small chunks, all used, is mostly its index: packing them
            // again would make the same pack.
            guard chunks.contains(where: { !keep.contains($0.hash) }) else { continue }
            for chunk in chunks where keep.contains(chunk.hash) {
                let start = bytes.startIndex + Int(chunk.offset)
                try await store(filler.add(chunk.hash, bytes[start..<start + Int(chunk.size)]))
            }
            result.repackedPacks += 1
            result.repackedBytes += pack.size
        }
        try await store(filler.finish())
        guard !written.isEmpty else { return tree }
        var commit = Commit(commitID: RandomID.make(), device: device, deviceID: deviceID, time: .now(), ops: [])
        commit.packs = written
        let repacked = try await append(commit, to: tree)
        CrashPoint.repackAppended.reach()
        return repacked
    }

    /// A store write's temporary file lives for one write: one this old was abandoned.
    public static let abandonedWriteAge: Int64 = 3600

    /// A pack whose used chunks fill less than this share of it is repacked.
    public static let repackShare = 0.5

    /// Journal entries and snapshots a compaction behind `tree` deletes: entries below the
    /// first one written within the grace (and below the tree's head, where the snapshot
    /// goes), and snapshots below that.
    private func compactable(_ tree: Tree, policy: RetentionPolicy) async throws -> (
        entries: [UInt64], snapshots: [UInt64]
    ) {
        let youngest = Timestamp.now().adding(seconds: -policy.grace).date
        let journal = try await container.listJournal()
        let from = min(tree.head, journal.first { $0.modified >= youngest }?.seq ?? tree.head)
        let entries = journal.map(\.seq).filter { $0 < from }
        let snapshots = try await container.listSnapshots().map(\.seq).filter { $0 < from }
        return (entries, snapshots)
    }

    private func compact(
        _ tree: Tree, policy: RetentionPolicy, record: inout CollectionRecord, into result: inout CollectionResult
    ) async throws {
        guard tree.head > 0 else { return }
        try await container.writeSnapshot(tree)
        let (entries, snapshots) = try await compactable(tree, policy: policy)
        guard let last = entries.last else { return }
        // The floor first: a device that reads it knows entries below may be gone.
        record.journalFrom = max(record.journalFrom, last + 1)
        try await container.updateCollectionRecord(record)
        progress("deleting \(entries.count) journal entries and \(snapshots.count) snapshot(s) behind snapshot \(tree.head)")
        for seq in snapshots { try await container.deleteSnapshot(seq) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, seq) in entries.enumerated() {
                if index >= 8 { try await group.next() }
                group.addTask { [container] in try await container.deleteEntry(seq) }
            }
            try await group.waitForAll()
        }
        result.deletedEntries = entries.count
        result.deletedSnapshots = snapshots.count
    }

    /// Records swept more than `recordsKept` ago go; the newest stays (it holds the floor).
    private func forgetOldRecords(_ records: [CollectionRecord], keeping newest: CollectionRecord) async throws {
        let before = Timestamp.now().adding(seconds: -Self.recordsKept)
        for record in records where record.number < newest.number && (record.swept ?? record.deadline) < before {
            try await container.deleteCollectionRecord(record.number)
        }
    }

    private func measure(
        _ tree: Tree, chunks: [(hash: ChunkHash, size: UInt64, modified: Date)],
        packs: [(id: ChunkHash, size: UInt64, modified: Date)]
    ) async throws -> StoreUsage {
        let use = ChunkUse(of: tree)
        var usage = StoreUsage()
        // A pack's chunks named count as live or history, those named by nothing (and a
        // pack holding nothing named) as collectable; its index counts with its chunks.
        let stored = Set(packs.map(\.id))
        var located: [ChunkHash: (used: UInt64, dead: UInt64)] = [:]
        for (hash, location) in tree.packedChunks where stored.contains(location.pack) {
            let size = UInt64(location.size)
            if use.live.contains(hash) {
                usage.liveBytes += size
            } else if use.history.contains(hash) {
                usage.historyBytes += size
            }
            located[location.pack, default: (0, 0)].used += use.contains(hash) ? size : 0
            located[location.pack, default: (0, 0)].dead += use.contains(hash) ? 0 : size
        }
        for pack in packs {
            let sizes = located[pack.id] ?? (0, 0)
            if sizes.used == 0 {
                usage.collectableBytes += pack.size
            } else {
                usage.collectableBytes += sizes.dead
                usage.liveBytes += pack.size - min(pack.size, sizes.used + sizes.dead)
            }
        }
        usage.packs = packs.count
        for chunk in chunks {
            if use.live.contains(chunk.hash) {
                usage.liveBytes += chunk.size
            } else if use.history.contains(chunk.hash) {
                usage.historyBytes += chunk.size
            } else {
                usage.collectableBytes += chunk.size
            }
        }
        usage.chunks = chunks.count
        let journal = try await container.listJournal()
        usage.journalEntries = journal.count
        usage.journalBytes = journal.reduce(0) { $0 + $1.size } + (try await container.listSnapshots()).reduce(0) { $0 + $1.size }
        return usage
    }
}

/// What each pack holds that the tree uses: the chunks named (live or history) whose
/// location is that pack.
struct PackUse {
    var bytes: [ChunkHash: UInt64] = [:]
    var chunks: [ChunkHash: [ChunkHash]] = [:]

    init(of tree: Tree, use: ChunkUse) {
        for (hash, location) in tree.packedChunks where use.contains(hash) {
            bytes[location.pack, default: 0] += UInt64(location.size)
            chunks[location.pack, default: []].append(hash)
        }
    }
}

extension Timestamp {
    /// `2026-11-25T04:30:00Z`, for messages.
    public var iso8601: String {
        ISO8601DateFormatter().string(from: date)
    }
}
