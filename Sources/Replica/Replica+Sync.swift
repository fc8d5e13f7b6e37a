import BlobStore
import ContainerFormat
import Foundation

/// The change feed (pull) and the upload queue (push), serialised by `syncLock`, and the
/// background loop that runs them.
extension Replica {
    /// Reads and applies every journal entry after the device's head.
    public func pull() async throws {
        try await syncLock.withLock { try await pullUnlocked() }
    }

    /// Pushes the whole queue (and pulls what arrives meanwhile). Throws when the store fails.
    public func push() async throws {
        try await syncLock.withLock {
            try await pullUnlocked()
            while try await pushOneBatch() {}
        }
    }

    /// Wakes the background loop to pull and push now.
    public func syncSoon() {
        wakeup.signal()
    }

    /// Waits until the queue is empty and no file has unqueued writes, or `timeout` passes.
    /// Returns whether everything was uploaded.
    public func waitUntilUploaded(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        wakeup.signal()
        while ContinuousClock.now < deadline {
            let done = state.withLock { state in
                state.device.pending.isEmpty && !state.content.values.contains(where: \.dirty)
            }
            if done { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Number of queued local changes not yet in the journal.
    public var pendingChangeCount: Int {
        state.withLock { $0.device.pending.count }
    }

    /// The journal sequence number this device has applied.
    public var head: UInt64 {
        state.withLock { $0.device.synced.head }
    }

    // MARK: - Internals

    func runSyncLoop() async {
        var backoff = Duration.seconds(1)
        downloadWanted(nil)
        while !Task.isCancelled {
            do {
                try await push()
                enforceCacheBound()
                let hadError = state.withLock { state in
                    defer { state.uploadError = nil }
                    return state.uploadError != nil
                }
                if hadError { logger.info("store reachable again; uploads resumed") }
                backoff = .seconds(1)
                await wakeup.wait(upTo: configuration.pollInterval)
            } catch {
                let wrapped = ReplicaError.wrapping(error)
                state.withLock { $0.uploadError = wrapped.description }
                logger.info("sync failed, retrying in \(backoff): \(wrapped)")
                await wakeup.wait(upTo: backoff)
                backoff = min(backoff * 2, .seconds(60))
            }
        }
    }

    /// A new device starts from the newest snapshot instead of replaying the journal.
    func bootstrapFromSnapshot() async throws {
        guard head == 0 else { return }
        let (snapshot, problems) = try await container.latestSnapshot()
        for problem in problems { logger.error("skipping unreadable snapshot \(problem)") }
        guard let snapshot, snapshot.seq > 0 else { return }
        let tree = snapshot.tree
        try await database.pool.write { [database] db in
            try database.saveItems(tree.allItems.map(\.id), of: tree, db)
        }
        state.withLock { state in
            state.device = DeviceView(
                device: configuration.deviceName, synced: tree, pending: state.device.pending,
                landed: state.device.landed)
        }
        logger.info("started from snapshot \(snapshot.seq) (\(tree.count) items)")
    }

    func pullUnlocked() async throws {
        while true {
            var seq = head + 1
            var entries: [(seq: UInt64, commit: Commit?)] = []
            while entries.count < 256 {
                switch try await container.readEntry(seq) {
                case .missing:
                    break
                case .commit(let commit):
                    entries.append((seq, commit))
                    seq += 1
                    continue
                case .unreadable(let why):
                    logger.error("skipping journal entry: \(why)")
                    entries.append((seq, nil))
                    seq += 1
                    continue
                }
                break
            }
            guard !entries.isEmpty else { return }
            try apply(entries)
        }
    }

    /// Applies journal entries to the device state and the database in one transaction.
    private func apply(_ entries: [(seq: UInt64, commit: Commit?)]) throws {
        let (outcome, landed, events) = try state.withLock { state in
            let inFlight = state.inFlight
            let outcome = state.device.applyRemote(entries, ourBatch: inFlight)
            var events: [EventLog.Event] = []
            for (entry, fold) in zip(entries.filter { $0.commit != nil }, outcome.outcomes)
            where entry.commit?.commitID != inFlight?.commitID {
                events += EventLog.events(for: entry.commit!, seq: entry.seq, in: state.device.synced, outcome: fold)
            }
            let syncedChanges = outcome.outcomes.reduce(into: Set<ItemID>()) { $0.formUnion($1.changed) }
            let landed = outcome.landedBatch ? inFlight : nil
            try database.pool.write { db in
                try database.saveItems(syncedChanges, of: state.device.synced, db)
                if let landed {
                    try database.deletePending(landed.localIDs, db)
                    try database.setMeta("inFlight", nil, db)
                }
                try database.setMeta(
                    "landed", String(decoding: FormatCoding.encode(state.device.landed), as: UTF8.self), db)
            }
            if landed != nil { state.inFlight = nil }
            return (outcome, landed, events)
        }
        self.events.append(events)
        for fold in outcome.outcomes {
            for line in fold.rejected { logger.error("\(line)") }
            for line in fold.notes { logger.notice("\(line)") }
        }
        if let landed { try finishLanded(landed, entries: entries) }
        if !outcome.changed.isEmpty {
            changeObserver.withLock { $0 }?(outcome.changed)
            downloadWanted(outcome.changed)
        }
    }

    /// After the device's own batch is in the journal: drop staged chunks nobody needs and,
    /// on a snapshot boundary, write the snapshot.
    private func finishLanded(_ batch: Batch, entries: [(seq: UInt64, commit: Commit?)]) throws {
        guard let ours = entries.first(where: { $0.commit?.commitID == batch.commitID }), let commit = ours.commit else {
            return
        }
        let stillNeeded = state.withLock { state in
            Set(state.device.pending.flatMap { $0.ops.flatMap(\.chunkHashes) })
        }
        for hash in Set(commit.ops.flatMap(\.chunkHashes)).subtracting(stillNeeded) {
            files.unstage(hash)
        }
        if ours.seq % configuration.snapshotInterval == 0 {
            let tree = state.withLock { $0.device.synced }
            let container = self.container
            let logger = self.logger
            Task.detached {
                do {
                    try await container.writeSnapshot(tree)
                } catch {
                    logger.warning("could not write snapshot \(tree.head): \(error)")
                }
            }
        }
    }

    /// Uploads the next batch's chunks, then appends its commit. False when the queue is empty.
    private func pushOneBatch() async throws -> Bool {
        let prepared = try state.withLock { state -> (Batch, [ChunkRef])? in
            if state.inFlight == nil {
                let ids = state.device.nextBatchIDs(maximumOperations: configuration.maximumBatchOperations)
                guard !ids.isEmpty else { return nil }
                let batch = Batch(commitID: UUID().uuidString, localIDs: ids)
                try database.pool.write { db in
                    try database.setMeta("inFlight", String(decoding: FormatCoding.encode(batch), as: UTF8.self), db)
                }
                state.inFlight = batch
            }
            let batch = state.inFlight!
            let changes = state.device.pending.prefix(batch.localIDs.count)
            let chunks = changes.flatMap { $0.ops.flatMap(\.chunks) }.filter { !state.storedChunks.contains($0.hash) }
            return (batch, chunks)
        }
        guard let (batch, chunks) = prepared else { return false }
        try await upload(chunks)
        while true {
            let attempt = state.withLock { state -> (UInt64, Commit)? in
                guard state.inFlight == batch else { return nil }
                let seq = state.device.synced.head + 1
                return (seq, state.device.commit(for: batch, device: configuration.deviceName, deviceID: deviceID, seq: seq))
            }
            guard let (seq, commit) = attempt else { return true }  // landed while catching up
            if try await container.append(commit, at: seq) {
                try await pullUnlocked()
                return true
            }
            try await pullUnlocked()  // another device took the number: catch up, try the next
        }
    }

    /// Missing chunks first: a commit never names a chunk the store lacks.
    private func upload(_ chunks: [ChunkRef]) async throws {
        var seen = Set<ChunkHash>()
        for chunk in chunks where seen.insert(chunk.hash).inserted {
            if let data = files.readStaged(chunk.hash) {
                try await container.writeChunk(chunk.hash, data: data)
            } else if try await !container.hasChunk(chunk.hash) {
                throw ReplicaError.local("chunk \(chunk.hash) is neither staged locally nor in the store")
            }
            _ = state.withLock { $0.storedChunks.insert(chunk.hash) }
        }
    }
}

extension ItemOperation {
    /// The chunks this operation's new content names.
    var chunks: [ChunkRef] {
        switch self {
        case .create(let op): op.content.chunks
        case .update(let op): op.content?.chunks ?? []
        case .move, .delete: []
        }
    }

    var chunkHashes: [ChunkHash] { chunks.map(\.hash) }
}
