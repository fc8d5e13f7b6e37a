import BlobStore
import Collection
import ContainerFormat
import Foundation
import SystemPackage

/// Collections this device runs.
struct CollectionTasks {
    var automatic: Task<Void, Never>?
    /// One asked for (`icloudfs gc`).
    var requested: Task<Void, Never>?
    /// The last measure, with the journal entry the tree was at.
    var usage: (measured: ContinuousClock.Instant, head: UInt64, usage: StoreUsage)?
}

/// What this device knows of the store's collections (FORMAT.md "Collection").
struct CollectionWatch {
    /// Records whose sweep may still delete chunks, by number.
    var active: [UInt64: CollectionRecord] = [:]
    /// Candidates of every record seen whose presence this device has not checked since
    /// that record's sweep ended: a commit naming one checks first.
    var unverified: Set<ChunkHash> = []
    /// The same for candidate packs: a commit naming a chunk located in one checks first.
    var unverifiedPacks: Set<ChunkHash> = []
    var highestSeen: UInt64 = 0
    /// Journal entries below it may be gone from the store.
    var floor: UInt64 = 0
    var listedAt: ContinuousClock.Instant?
    /// The time of the newest entry applied (nil: unknown, as after a snapshot or a start).
    /// Compaction deletes only entries older than the grace: a device whose head is younger
    /// than half of it cannot have entries missing after its head.
    var headTime: Timestamp?
}

extension Replica {
    /// Collects the container (or, `dryRun`, says what a collection would do), starting
    /// from this device's tree. `progress` hears each step.
    public func collect(dryRun: Bool, progress: @escaping @Sendable (String) -> Void) async throws -> CollectionResult {
        let collector = Collector(
            container: container, device: configuration.deviceName, deviceID: deviceID, logger: logger, progress: progress)
        let tree = synced.withLock { $0 }
        let result = try await collector.run(dryRun: dryRun, from: tree)
        collection.withLock { $0.usage = nil }
        syncSoon()
        return result
    }

    /// Starts `icloudfs gc`'s collection in the background; false if one runs already.
    public func startCollection(dryRun: Bool, progress: @escaping @Sendable (String) -> Void, done: @escaping @Sendable (Result<CollectionResult, any Error>) -> Void) -> Bool {
        collection.withLock { tasks in
            guard tasks.requested == nil else { return false }
            tasks.requested = Task.detached { [self] in
                let result: Result<CollectionResult, any Error>
                do {
                    result = .success(try await collect(dryRun: dryRun, progress: progress))
                } catch {
                    result = .failure(error)
                }
                collection.withLock { $0.requested = nil }
                done(result)
            }
            return true
        }
    }

    /// How the store's bytes are used, measured at most once a minute while no new journal
    /// entry arrives (one that says which chunks a file uses changes the answer).
    public func storeUsage() async throws -> StoreUsage {
        let tree = synced.withLock { $0 }
        if let last = collection.withLock({ $0.usage }), last.head == tree.head,
            ContinuousClock.now - last.measured < .seconds(60)
        {
            return last.usage
        }
        let collector = Collector(container: container, device: configuration.deviceName, deviceID: deviceID, logger: logger)
        let usage = try await collector.usage(of: tree)
        collection.withLock { $0.usage = (.now, tree.head, usage) }
        return usage
    }

    /// Once an hour, from some minutes after the start: when no collection was recorded for
    /// a day (and a random part of an hour more, so that devices rarely start together),
    /// collect.
    func runCollectionLoop() async {
        let spread = Int64.random(in: 0..<3600)
        // Not at once: a mount's first minutes belong to the user's work.
        try? await Task.sleep(for: .seconds(300 + spread / 6))
        while !Task.isCancelled {
            do {
                let numbers = try await container.collectionNumbers()
                var due = true
                if let newest = numbers.last, let record = try await container.collectionRecord(newest) {
                    due = Timestamp.now().seconds - record.started.seconds > 86_400 + spread
                }
                if due {
                    logger.info("collecting the container (no collection for a day)")
                    let result = try await collect(dryRun: false) { [logger] in logger.info("collection: \($0)") }
                    logger.info("collection done: deleted \(result.deletedChunks) chunk(s), \(result.deletedBytes) bytes, \(result.deletedPacks) pack(s), repacked \(result.repackedPacks), \(result.deletedEntries) journal entries")
                }
            } catch is CancellationError {
                return
            } catch {
                logger.info("automatic collection not done: \(error)")
            }
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// The grace of the container's policy, in seconds.
    var collectionGrace: Int64 {
        synced.withLock { ($0.policy ?? .standard).grace }
    }

    /// Reads the collection records that are new or still sweeping: forgets that the
    /// candidates are stored, learns the journal floor.
    func refreshCollections() async throws {
        let numbers = try await container.collectionNumbers()
        let (highest, active) = state.withLock { ($0.collections.highestSeen, $0.collections.active) }
        var wanted = numbers.filter { $0 > highest || active[$0] != nil }
        if let newest = numbers.last, !wanted.contains(newest) { wanted.append(newest) }  // its floor moves
        var read: [CollectionRecord] = []
        for number in wanted {
            do {
                if let record = try await container.collectionRecord(number) { read.append(record) }
            } catch FormatError.malformed(let what, let why) {
                logger.error("skipping \(what): \(why)")
            }
        }
        let now = Timestamp.now()
        state.withLock { state in
            // Records were forgotten before this device saw them: it cannot know which of
            // the chunks it believes stored, or which packs, are gone.
            if highest > 0, let first = numbers.first, first > highest + 1 {
                state.storedChunks.removeAll()
                state.collections.unverifiedPacks.formUnion(synced.withLock { $0.packedChunks.values.map(\.pack) })
            }
            for record in read {
                if record.number > highest || state.collections.active[record.number] != nil {
                    state.storedChunks.subtract(record.candidates)
                    state.collections.unverified.formUnion(record.candidates)
                    state.collections.unverifiedPacks.formUnion(record.candidatePacks)
                }
                state.collections.active[record.number] = record.mayDelete(at: now) ? record : nil
                state.collections.floor = max(state.collections.floor, record.journalFrom)
            }
            state.collections.highestSeen = max(highest, numbers.last ?? 0)
            state.collections.listedAt = .now
        }
    }

    /// Before a commit naming `chunks` is appended: none of them may be deleted by a
    /// collection that chose them before the commit was in the journal. A candidate of a
    /// sweep not yet begun is written again (its time then protects it); one of a sweep
    /// under way is waited for; one of a sweep ended is checked, and uploaded again if gone.
    /// A chunk located in a candidate pack (where this batch's `packs` or the journal put
    /// it) is packed again instead, unless the pack outlived its sweep: the packs returned
    /// go in the commit after `packs`, and the chunk's location moves there.
    func protectFromCollection(
        _ chunks: Set<ChunkHash>, of ops: [ItemOperation], packs: [PackRecord] = []
    ) async throws -> [PackRecord] {
        guard !chunks.isEmpty else { return [] }
        let grace = collectionGrace
        while true {
            let listedAt = state.withLock { $0.collections.listedAt }
            if listedAt.map({ ContinuousClock.now - $0 > .seconds(grace / 4) }) ?? true {
                try await refreshCollections()
            }
            let (active, unverified, unverifiedPacks) = state.withLock {
                ($0.collections.active, $0.collections.unverified, $0.collections.unverifiedPacks)
            }
            let hits = chunks.intersection(unverified)
            let packed = unverifiedPacks.isEmpty ? [:] : packLocations(of: chunks, in: packs, among: unverifiedPacks)
            if hits.isEmpty && packed.isEmpty { return [] }
            guard let repacked = try await protectPacked(packed, of: ops, active: active) else {
                logger.info("a collection is deleting a pack this device is about to name; waiting for it to end")
                try await Task.sleep(for: .seconds(max(1, min(5, grace / 8))))
                state.withLock { $0.collections.listedAt = nil }
                continue
            }
            if hits.isEmpty { return repacked }
            let now = Timestamp.now()
            var waiting = false
            var rewritten = Set<ChunkHash>()
            for record in active.values.sorted(by: { $0.number < $1.number }) where record.mayDelete(at: now) {
                let named = hits.intersection(record.candidates)
                guard !named.isEmpty else { continue }
                if now < record.sweepAfter.adding(seconds: -grace / 4) {
                    for hash in named.subtracting(rewritten) {
                        try await container.rewriteChunk(hash, data: try await bytes(of: hash, in: ops, orStore: true))
                    }
                    rewritten.formUnion(named)
                } else {
                    waiting = true
                }
            }
            if waiting {
                logger.info("a collection is deleting chunks this device is about to name; waiting for it to end")
                try await Task.sleep(for: .seconds(max(1, min(5, grace / 8))))
                state.withLock { $0.collections.listedAt = nil }
                continue
            }
            // The rest belong to sweeps that have ended: present, or uploaded again.
            for hash in hits.subtracting(rewritten) where try await !container.hasChunk(hash) {
                logger.notice("chunk \(hash) was collected while this device still named it; uploading it again")
                try await container.writeChunks([(hash, try await bytes(of: hash, in: ops, orStore: false))])
            }
            state.withLock { state in
                state.collections.unverified.subtract(hits.subtracting(rewritten))
                state.storedChunks.formUnion(hits)
            }
            return repacked
        }
    }

    /// The chunks of `chunks` whose location is one of `candidates`, by pack: where this
    /// batch's packs put them, else where the journal did.
    private func packLocations(
        of chunks: Set<ChunkHash>, in packs: [PackRecord], among candidates: Set<ChunkHash>
    ) -> [ChunkHash: [ChunkHash]] {
        var location: [ChunkHash: ChunkHash] = [:]
        for pack in packs {
            for chunk in pack.chunks where chunks.contains(chunk.hash) { location[chunk.hash] = pack.id }
        }
        return synced.withLock { tree in
            var found: [ChunkHash: [ChunkHash]] = [:]
            for hash in chunks {
                guard let pack = location[hash] ?? tree.packedChunks[hash]?.pack, candidates.contains(pack)
                else { continue }
                found[pack, default: []].append(hash)
            }
            return found
        }
    }

    /// Chunks located in candidate packs (`packed`, by pack): packed again when the pack's
    /// sweep has not begun or the pack is gone; nil while a sweep that may delete one runs.
    private func protectPacked(
        _ packed: [ChunkHash: [ChunkHash]], of ops: [ItemOperation], active: [UInt64: CollectionRecord]
    ) async throws -> [PackRecord]? {
        guard !packed.isEmpty else { return [] }
        let now = Timestamp.now()
        let grace = collectionGrace
        var due: [ChunkHash] = []
        var present: Set<ChunkHash> = []
        for (pack, hashes) in packed {
            let records = active.values.filter { $0.mayDelete(at: now) && $0.candidatePacks.contains(pack) }
            if records.contains(where: { now >= $0.sweepAfter.adding(seconds: -grace / 4) }) { return nil }
            if records.isEmpty, try await container.packWritten(pack) != nil {
                present.insert(pack)  // it outlived every sweep that chose it
            } else {
                due += hashes
            }
        }
        var records: [PackRecord] = []
        if !due.isEmpty {
            logger.notice("\(due.count) chunk(s) this device names are in packs a collection chose; packing them again")
            var pieces: [(hash: ChunkHash, data: Data)] = []
            for hash in due.sorted() { pieces.append((hash, try await bytes(of: hash, in: ops, orStore: true))) }
            // Written even if a pack of these bytes exists: its time now keeps it from a sweep.
            let pack = Pack(pieces)
            try await container.rewritePack(pack)
            CrashPoint.packWritten.reach()
            records.append(PackRecord(id: pack.id, chunks: pack.chunks))
        }
        state.withLock { $0.collections.unverifiedPacks.subtract(present) }
        return records
    }

    /// A chunk's bytes from this device: staged, in a content file where `ops` place it, or
    /// (when `orStore`) read from the store.
    private func bytes(of hash: ChunkHash, in ops: [ItemOperation], orStore: Bool) async throws -> Data {
        if let data = localBytes(of: hash) { return data }
        for op in ops {
            guard let ref = op.chunks.first(where: { $0.hash == hash }) else { continue }
            for piece in ContentChunker.Piece.layout(op.chunks) where piece.ref == ref {
                if let staged = stagedBytes(of: piece, in: op.itemID), let staged, ChunkHash(of: staged) == hash {
                    return staged
                }
                guard let fd = try? files.openContent(op.itemID, writable: false) else { break }
                defer { try? fd.close() }
                if let data = try? FileIO.read(fd, offset: piece.offset, count: Int(ref.size)), ChunkHash(of: data) == hash {
                    return data
                }
            }
        }
        if orStore, let ref = ops.lazy.flatMap(\.chunks).first(where: { $0.hash == hash }) {
            return try await container.readChunk(ref, packedAt: synced.withLock { $0.packedChunks[ref.hash] })
        }
        throw ReplicaError.local("chunk \(hash) was collected from the store and this device no longer holds it")
    }

    /// Whether entries after this device's head may have been compacted away: true when the
    /// head is older than half the grace (or of unknown age) and the floor is past it.
    func isBehindJournalFloor(_ next: UInt64) async throws -> Bool {
        let grace = collectionGrace
        let headTime = state.withLock { $0.collections.headTime }
        if let headTime, Timestamp.now().seconds - headTime.seconds < grace / 2 { return false }
        try await refreshCollections()
        return state.withLock { $0.collections.floor > next }
    }

    /// The journal was compacted past this device's head: start again from the newest
    /// snapshot, keeping the queue (its changes are folded on that tree like any others).
    func rebaseOnNewestSnapshot() async throws {
        let (loaded, problems) = try await container.latestSnapshot()
        for problem in problems { logger.error("skipping unreadable snapshot \(problem)") }
        let floor = state.withLock { $0.collections.floor }
        guard let loaded, loaded.snapshot.seq + 1 >= floor else {
            throw ReplicaError.local(
                "the journal was compacted past this device's position (entries before \(floor) are gone) and no snapshot covers them")
        }
        let tree = loaded.tree
        let (changed, rewritten, changes) = try state.withLock { state -> (Set<ItemID>, Int, [ItemChange]) in
            let old = state.device.view
            let oldSynced = synced.withLock { $0 }
            let ids = Set(oldSynced.allIDs).union(tree.allIDs)
            var device = state.device
            let rewritten = device.rebase(on: tree, from: oldSynced)
            try database.write { db in
                try database.saveItems(ids, of: tree, db)
                try database.savePackedChunks(PackRecord.grouping(tree.packedChunks), replacingAll: true, db)
                try database.deletePending(rewritten.map(\.localID), db)
                for change in rewritten { try database.insertPending(change, db) }
            }
            synced.withLock { $0 = tree }
            state.device = device
            state.collections.headTime = nil
            let changed = Set(ids.filter { old.item($0) != device.view.item($0) })
            state.noteReclaimCandidates(changed)
            return (changed, rewritten.count, itemChanges(changed, previous: { old.item($0) }, state))
        }
        logger.notice(
            "entries after this device's position were compacted away: started again from snapshot \(loaded.snapshot.seq), queued changes kept (\(rewritten) of them rewritten: they name items whose deletion expired meanwhile)")
        if !changed.isEmpty {
            changeObserver.withLock { $0 }?(changes)
            downloadWanted(changed)
        }
    }
}
