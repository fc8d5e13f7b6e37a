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
    public var deletedEntries = 0
    public var deletedSnapshots = 0
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
        try await measure(tree, chunks: try await container.listChunks())
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

        // 2. Candidates: chunks nothing names, written before the grace.
        let chunks = try await container.listChunks()
        result.before = try await measure(tree, chunks: chunks)
        let use = ChunkUse(of: tree)
        let started = Timestamp.now()
        let writtenBefore = started.adding(seconds: -policy.grace).date
        let candidates = chunks.filter { !use.contains($0.hash) && $0.modified < writtenBefore }
        result.candidateChunks = candidates.count
        result.candidateBytes = candidates.reduce(0) { $0 + $1.size }
        if dryRun {
            let (entries, snapshots) = try await compactable(tree, policy: policy)
            result.deletedEntries = entries.count
            result.deletedSnapshots = snapshots.count
            return result
        }

        // 3. The record, then the grace: a device about to name a candidate sees it first.
        var record = CollectionRecord(
            number: 0, device: device, started: started, grace: policy.grace, head: tree.head,
            candidates: candidates.map(\.hash), journalFrom: records.map(\.journalFrom).max() ?? 0)
        try await container.addCollectionRecord(&record, after: records.last?.number ?? 0)
        result.record = record.number
        if !candidates.isEmpty {
            try await wait(until: record.sweepAfter)
            tree = try await catchUp(tree)
            try await sweep(candidates, of: &record, named: ChunkUse(of: tree), into: &result)
        }
        record.swept = .now()
        try await container.updateCollectionRecord(record)

        // 4. Compaction behind a snapshot of the tree now.
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

    private func measure(_ tree: Tree, chunks: [(hash: ChunkHash, size: UInt64, modified: Date)]) async throws -> StoreUsage {
        let use = ChunkUse(of: tree)
        var usage = StoreUsage()
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

extension Timestamp {
    /// `2026-11-25T04:30:00Z`, for messages.
    public var iso8601: String {
        ISO8601DateFormatter().string(from: date)
    }
}
