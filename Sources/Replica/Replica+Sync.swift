import BlobStore
import CLinux
import ContainerFormat
import Foundation
import GRDB

/// The change feed (pull) and the upload queue (push), serialised by `syncLock`, and the
/// background loop that runs them.
extension Replica {
    /// Reads and applies every journal entry after the device's head.
    public func pull() async throws {
        try await syncLock.withLock { try await pullUnlocked() }
    }

    /// Pushes the whole queue (and pulls what arrives meanwhile). Throws when the store fails.
    public func push() async throws {
        pushRequested.withLock { $0 = true }
        try await pushDue()
    }

    /// The background loop's push: when asked (`syncSoon`), every change queued by then;
    /// otherwise, during a burst of changes, only the batches that are full: the rest goes up
    /// when the burst pauses (`pushAfterPause`), as one commit rather than one per few files.
    func pushDue() async throws {
        // Files written before the last shutdown are queued first: a version queued before
        // it whose bytes those writes changed is superseded then, not pushed as lost.
        if let queuing = startupQueuing.withLock({ $0 }) {
            await queuing.value
            startupQueuing.withLock { $0 = nil }
        }
        try await syncLock.withLock {
            try await pullUnlocked()
            let requested = pushRequested.withLock { requested in
                defer { requested = false }
                return requested
            }
            // Changes asked for that are still queued (the queue is in order: the oldest go first).
            var asked = requested ? state.withLock { $0.device.pending.count } : 0
            while true {
                try await payOwedUploads()
                guard asked > 0 || nextBatchIsDue() else {
                    // Still arriving: `pushAfterPause` wakes the loop when they pause.
                    if state.withLock({ !$0.device.pending.isEmpty }) { pushAfterPause() }
                    break
                }
                // Counted by the batch, not by the queue's length: changes keep arriving
                // during a push, and counting them off would push a run of tiny batches.
                guard let pushed = try await pushOneBatch() else { break }
                asked -= pushed
            }
        }
    }

    /// Whether what is still queued should go up now: the changes have paused, or they fill
    /// a batch anyway. Each commit costs a journal entry, a store flush, transactions and
    /// a pull of its own entry, so a burst (tar x, cp -r) goes up in few of them.
    private func nextBatchIsDue() -> Bool {
        state.withLock { state in
            !state.device.pending.isEmpty
                && (state.device.pending.count >= configuration.maximumBatchOperations || Replica.changesPaused(state))
        }
    }

    static func changesPaused(_ state: ReplicaState) -> Bool {
        state.lastLocalChange.map { ContinuousClock.now - $0 >= pushPause } ?? true
    }

    /// Wakes the background loop to pull and push now.
    public func syncSoon() {
        pushRequested.withLock { $0 = true }
        loop.wakeup.signal()
    }

    /// A local change wakes the loop once changes pause for `pushPause` (or a batch is full,
    /// or `pushDelayLimit` passed), so that a burst of changes (tar x, cp -r) goes up as a
    /// few large commits, not one per file, and still reaches the store while it lasts.
    func pushAfterPause() {
        let first = pushPending.withLock { pending in
            defer { pending = true }
            return !pending
        }
        guard first else { return }
        Task(priority: .background) { [self] in
            let start = ContinuousClock.now
            while ContinuousClock.now - start < Replica.pushDelayLimit {
                try? await Task.sleep(for: Replica.pushPause)
                let due = state.withLock { state in
                    Replica.changesPaused(state) || state.device.pending.count >= configuration.maximumBatchOperations
                }
                if due { break }
            }
            pushPending.withLock { $0 = false }
            syncSoon()
        }
    }

    static let pushPause = Duration.milliseconds(50)
    /// The longest a change waits for a burst to pause before it is pushed anyway.
    static let pushDelayLimit = Duration.seconds(1)

    /// Waits until the queue is empty and no file has unqueued writes, or `timeout` passes.
    /// Returns whether everything was uploaded.
    public func waitUntilUploaded(timeout: Duration) async -> Bool {
        await waitForSync(timeout: timeout) { $0.nothingLeftToUpload }
    }

    /// Waits until the whole container is in the store as its root's `isUploaded` says
    /// (nothing queued or being written here, no content announced by any device still
    /// missing), or `timeout` passes: `icloudfs sync --wait`.
    public func waitUntilContainerUploaded(timeout: Duration) async -> Bool {
        await waitForSync(timeout: timeout) { (try? $0.isUploaded(.root)) ?? false }
    }

    /// Asks for a push and waits until `done`, looking again as each round of the sync loop
    /// ends (every change that uploads or pulls is made by one), or until `timeout` passes.
    private func waitForSync(timeout: Duration, until done: @escaping @Sendable (Replica) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        let rounds = self.rounds.watch()
        // Closes still being queued first: their files count as written, and a file removed
        // while its close was queued frees its space only once that close has run.
        await commits.drain()
        syncSoon()
        if done(self) { return true }
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { [self] in
                for await _ in rounds where done(self) { return true }
                return false
            }
            group.addTask { [self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                return done(self)
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Nothing queued, owed or being written here.
    private var nothingLeftToUpload: Bool {
        state.withLock { state in
            state.device.pending.isEmpty && state.owed.isEmpty && state.content.dirtyCount == 0
        }
    }

    /// Number of queued local changes not yet in the journal.
    public var pendingChangeCount: Int {
        state.withLock { $0.device.pending.count }
    }

    /// Why uploads stop, while they do (the store out of reach, a full quota), and how many
    /// chunks of queued versions were lost from the cache before they were uploaded
    /// (`contentLost`): what the desktop notifications watch.
    public var uploadProblems: (error: String?, lostChunks: Int) {
        state.withLock { ($0.uploadError, $0.lostChunks.count) }
    }

    /// The journal sequence number this device has applied.
    public var head: UInt64 {
        state.withLock { $0.device.syncedHead }
    }

    // MARK: - Internals

    func runSyncLoop() async {
        var backoff = Duration.seconds(1)
        // Pushes come every 50 ms during a burst of writes; the cache is looked at once a
        // second (downloads check when they end): the copies whose item went, and the
        // running sum of present bytes (`ContentRecords`).
        var lastCacheCheck = ContinuousClock.now - .seconds(1)
        downloadWanted(nil)
        while !Task.isCancelled {
            // Before the push, which fails while the cache disk is full: freeing deleted
            // files' space is what lets it succeed again.
            if ContinuousClock.now - lastCacheCheck >= .seconds(1) {
                lastCacheCheck = .now
                reclaimDeletedContent()
                enforceCacheBound()
                tidyStagingLog()
            }
            do {
                try await pushDue()
                let hadError = state.withLock { state in
                    defer { state.uploadError = nil }
                    return state.uploadError != nil
                }
                if hadError { logger.info("store reachable again; uploads resumed") }
                backoff = .seconds(1)
                rounds.ended()
                await loop.wakeup.wait(upTo: configuration.pollInterval)
            } catch {
                let wrapped = ReplicaError.wrapping(error)
                state.withLock { $0.uploadError = wrapped.description }
                logger.info("sync failed, retrying in \(backoff): \(wrapped)")
                rounds.ended()
                await loop.wakeup.wait(upTo: backoff)
                backoff = min(backoff * 2, .seconds(60))
            }
        }
    }

    /// A new device starts from the newest snapshot instead of replaying the journal.
    func bootstrapFromSnapshot() async throws {
        guard head == 0 else { return }
        let start = ContinuousClock.now
        let (loaded, problems) = try await container.latestSnapshot()
        for problem in problems { logger.error("skipping unreadable snapshot \(problem)") }
        guard let loaded, loaded.snapshot.seq > 0 else { return }
        let (seq, tree) = (loaded.snapshot.seq, loaded.tree)
        let read = ContinuousClock.now - start
        // In the snapshot's order (by id): SQLite fills its index in order, faster than at
        // random. The decoded items themselves are not kept past this function.
        let ids = loaded.snapshot.items.map(\.id)
        // Recorded in the background (a second or so for 100,000 items): the database runs
        // writes in order, so everything written later lands after it. If it fails, pulls
        // stop (they would record a head without the tree); the next start begins again.
        database.pool.asyncWrite({ [database] db in
            try database.saveItems(ids, of: tree, db)
            try database.savePackedChunks(PackRecord.grouping(tree.packedChunks), db)
        }) { [self] _, result in
            guard case .failure(let error) = result else {
                // The decoded snapshot is gone: give its memory back to the system.
                DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { malloc_trim(0) }
                return
            }
            let why = "cannot record snapshot \(seq) in \(files.databasePath): \(error); remount to try again"
            logger.error("\(why)")
            // Not on the writer's queue: see the lock order at `Replica.state`.
            DispatchQueue.global().async { self.state.withLock { $0.notRecorded = why } }
        }
        state.withLock { state in startOver(on: tree, pending: state.device.pending, landed: state.device.landed, &state) }
        logger.info(
            "started from snapshot \(seq) (\(tree.count) items) in \(ContinuousClock.now - start) (read in \(read))")
    }

    /// `appended`: an entry this device has just written, taken as it is instead of read
    /// back and decoded again.
    func pullUnlocked(appended: (seq: UInt64, commit: Commit)? = nil) async throws {
        if let why = state.withLock({ $0.notRecorded }) { throw ReplicaError.local(why) }
        while true {
            var seq = head + 1
            var entries: [(seq: UInt64, commit: Commit?)] = []
            while entries.count < 256 {
                if let appended, appended.seq == seq {
                    entries.append((seq, appended.commit))
                    seq += 1
                    continue
                }
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
            // Entries after the head may have been compacted away (read as missing), or a
            // device below the floor may have written one again: check before trusting.
            let grace = collectionGrace
            let mayBeStale = entries.isEmpty
                ? state.withLock { $0.collections.listedAt.map { ContinuousClock.now - $0 > .seconds(grace / 4) } ?? true }
                : entries.first?.seq != appended?.seq
            if mayBeStale, try await isBehindJournalFloor(head + 1) {
                try await rebaseOnNewestSnapshot()
                continue
            }
            guard !entries.isEmpty else { return }
            try apply(entries)
        }
    }

    /// Folds journal entries into the synced tree, lands them in the device state, then
    /// records them in the database in one transaction. The fold holds only `synced`, and the
    /// transaction runs outside the state lock (it also commits the queue's waiting writes,
    /// and a large entry saves hundreds of items): the kernel's requests go on meanwhile.
    /// Nothing else changes the synced tree, the in-flight and landed batch or the owed
    /// uploads (a pull or push runs under `syncLock`); requests only append to the queue.
    private func apply(_ entries: [(seq: UInt64, commit: Commit?)]) throws {
        let inFlight = state.withLock { $0.inFlight }
        let hasFollowers = self.events.hasFollowers
        // The tree after the entries comes back as a copy that shares its storage: the
        // landing and the transaction read it, and it is let go before the next fold.
        let (folded, tree, events) = synced.withLock { tree in
            let folded = tree.fold(entries, ourBatch: inFlight)
            var events: [EventLog.Event] = []
            // Worked out only for someone following (`icloudfs monitor`): paths and a date
            // per operation.
            for (entry, fold) in zip(entries.filter { $0.commit != nil }, folded.outcomes)
            where hasFollowers && entry.commit?.commitID != inFlight?.commitID {
                events += EventLog.events(for: entry.commit!, seq: entry.seq, in: tree, outcome: fold)
            }
            return (folded, tree, events)
        }
        let applied = state.withLock { state in
            // What a failed recording goes back to (held, these two are copied only if the
            // batch lands: the queue and the landed ids, not the container).
            let (pendingBefore, landedBefore) = (state.device.pending, state.device.landed)
            let outcome = state.device.land(folded, on: tree, ourBatch: inFlight)
            let syncedChanges = folded.changed  // the synced tree's (the view's are `outcome.changed`)
            state.noteReclaimCandidates(syncedChanges)
            let landed = outcome.landedBatch ? inFlight : nil
            var owed = state.owed
            if let landed, let ours = entries.first(where: { $0.commit?.commitID == landed.commitID }) {
                // Each chunk once: a sparse file names its zero chunks hundreds of times.
                var seen = Set<ChunkHash>()
                let chunks = ours.commit!.ops.filter(\.announcesPendingContent).flatMap(\.chunks).filter {
                    seen.insert($0.hash).inserted
                }
                if !chunks.isEmpty { owed[ours.seq] = chunks }
            }
            let changes = outcome.changed.isEmpty ? [] : itemChanges(outcome.changed, previous: { outcome.previous[$0] }, state)
            return AppliedEntries(
                outcome: outcome, landed: landed, owed: owed, owedBefore: state.owed, syncedChanges: syncedChanges,
                synced: tree, landedSeqs: landed?.localIDs.compactMap { id in state.device.landed[id].map { (id, $0) } } ?? [],
                pendingBefore: pendingBefore, landedBefore: landedBefore, queuedAfter: state.device.pending.count,
                events: events, changes: changes)
        }
        let recorded = recordingApplied { db in
            if applied.owed != applied.owedBefore { try database.setMeta("owed", Replica.encodedOwed(applied.owed), db) }
            try database.saveItems(applied.syncedChanges, of: applied.synced, db)
            for entry in entries where entry.commit?.packs.isEmpty == false {
                try database.savePackedChunks(entry.commit!.packs, db)
            }
            if !applied.outcome.rewritten.isEmpty {
                try database.deletePending(applied.outcome.rewritten.map(\.localID), db)
                for change in applied.outcome.rewritten { try database.insertPending(change, db) }
            }
            if let landed = applied.landed {
                if let last = landed.localIDs.max() { try database.deletePending(through: last, db) }
                try database.setMeta("inFlight", nil, db)
                try database.recordLanded(applied.landedSeqs, keep: DeviceView.landedKept, db)
            }
        }
        try state.withLock { state throws(ReplicaError) in
            if case .failure(let error) = recorded {
                // The changes queued while the transaction ran follow the queue as it was.
                let queuedSince = state.device.pending.dropFirst(applied.queuedAfter)
                restoreRecordedTree(&state, pending: applied.pendingBefore + queuedSince, landed: applied.landedBefore)
                throw error
            }
            if applied.landed != nil { state.inFlight = nil }
            state.owed = applied.owed
            if let newest = entries.last(where: { $0.commit != nil })?.commit { state.collections.headTime = newest.time }
        }
        self.events.append(applied.events)
        for fold in applied.outcome.outcomes {
            for line in fold.rejected { logger.error("\(line)") }
            for line in fold.notes { logger.notice("\(line)") }
        }
        if let landed = applied.landed { try finishLanded(landed, entries: entries) }
        if !applied.outcome.changed.isEmpty {
            changeObserver.withLock { $0 }?(applied.changes)
            downloadWanted(applied.outcome.changed)
        }
    }

    /// What `apply` worked out under the state lock, for the transaction that records it.
    private struct AppliedEntries {
        var outcome: RemoteOutcome
        var landed: Batch?
        var owed: [UInt64: [ChunkRef]]
        var owedBefore: [UInt64: [ChunkRef]]
        var syncedChanges: Set<ItemID>
        /// The synced tree after the entries (a copy that shares storage: only a pull changes it).
        var synced: Tree
        /// Where each change of the batch landed (0: its content did not stay where it was put).
        var landedSeqs: [(Int64, UInt64)]
        var pendingBefore: [LocalChange]
        var landedBefore: [Int64: UInt64]
        /// The queue's length after the entries were applied.
        var queuedAfter: Int
        var events: [EventLog.Event]
        var changes: [ItemChange]
    }

    /// After pulled entries could not be recorded (disk full): memory goes back to the synced
    /// tree the database holds, with the queue as it was, so that nothing is ever built on
    /// state the database never saw; the entries are pulled again at the next try. (Applying
    /// to a copy instead would copy the whole container at every pull.) If even that read
    /// fails, syncing stops until a remount (`notRecorded`).
    private func restoreRecordedTree(_ state: inout ReplicaState, pending: [LocalChange], landed: [Int64: UInt64]) {
        do {
            let tree = try database.pool.read { db in try database.loadTree(db) }
            startOver(on: tree, pending: pending, landed: landed, &state)
        } catch {
            state.notRecorded = "cannot read back \(files.databasePath) after a failed write: \(error); remount"
            logger.error("\(state.notRecorded!)")
        }
    }

    /// Makes `tree` the synced tree (a snapshot; the database's after a failed recording)
    /// and builds the view on it again, with the queue and landed ids given. Under `state`.
    func startOver(on tree: Tree, pending: [LocalChange], landed: [Int64: UInt64], _ state: inout ReplicaState) {
        synced.withLock { $0 = tree }
        state.device = DeviceView(device: configuration.deviceName, synced: tree, pending: pending, landed: landed)
    }

    /// Runs `body` in a database write; a failure is logged and returned (the caller puts
    /// memory back as the database has it).
    private func recordingApplied(_ body: (Database) throws -> Void) -> Result<Void, ReplicaError> {
        do {
            return .success(try database.write(body))
        } catch {
            let failure = ReplicaError.localFailure(
                "cannot record pulled changes in \(files.databasePath) (free space; retried)", error)
            logger.error("\(failure)")
            return .failure(failure)
        }
    }

    /// After the device's own batch is in the journal: drop staged chunks nobody needs and,
    /// on a snapshot boundary, write the snapshot.
    private func finishLanded(_ batch: Batch, entries: [(seq: UInt64, commit: Commit?)]) throws {
        guard let ours = entries.first(where: { $0.commit?.commitID == batch.commitID }), let commit = ours.commit else {
            return
        }
        unstage(commit.ops.flatMap(\.chunkHashes))
        if ours.seq % configuration.snapshotInterval == 0 {
            let tree = synced.withLock { $0 }
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

    /// Forgets the local copies (staged, or in place) of chunks that no queued change and no
    /// owed upload needs any more.
    private func unstage(_ hashes: [ChunkHash]) {
        let (done, deletedHolders) = state.withLock { state in
            let done = state.unneeded(Set(hashes))
            let holders = done.flatMap { state.unstaged.locations(of: $0).map(\.id) }
            state.unstaged.remove(done)
            return (done, Set(holders.filter { !state.view.isLive($0) }))
        }
        for hash in done {
            files.unstage(hash)
        }
        // A file deleted before its bytes were uploaded frees its space now, not at the next
        // pass: on a full cache disk, the next write is waiting for it.
        if !deletedHolders.isEmpty { reclaimDeletedContent(among: deletedHolders) }
    }

    static func encodedOwed(_ owed: [UInt64: [ChunkRef]]) -> String? {
        owed.isEmpty ? nil : String(decoding: FormatCoding.encode(owed), as: UTF8.self)
    }

    /// Metadata first, second half: uploads the chunks of entries already in the journal,
    /// then says so with an `uploaded` entry (other devices' reads wait for it).
    private func payOwedUploads() async throws {
        while let (entry, chunks) = state.withLock({ $0.owed.min { $0.key < $1.key }.map { ($0.key, $0.value) } }) {
            // Small chunks in packs here too (a burst of small files with 4 MiB or more of new
            // bytes goes metadata first): the entry that says they are stored names the packs.
            let packs = try await upload(chunks, packing: true)
            var commit = Commit(
                commitID: RandomID.make(), device: configuration.deviceName, deviceID: deviceID,
                time: .now(), ops: [], uploaded: [entry])
            commit.packs = packs
            try await appendAtNextFreeNumber { _, _ in commit }
            // Memory follows the database: a failed write leaves the entry owed, and the next
            // pass records it again. (Only a push or pull, under `syncLock`, changes `owed`.)
            var owed = state.withLock { $0.owed }
            owed[entry] = nil
            try database.write { [owed] db in
                try database.setMeta("owed", Replica.encodedOwed(owed), db)
            }
            state.withLock { [owed] in $0.owed = owed }
            unstage(chunks.map(\.hash))
        }
    }

    /// Appends a commit at the next free journal number, catching up on the entries other
    /// devices took first. `make` builds the commit for a number, nil when none is due.
    func appendAtNextFreeNumber(_ make: (inout ReplicaState, UInt64) -> Commit?) async throws {
        while true {
            let encoding = synced.withLock { $0.nextEntryEncoding }
            let attempt = state.withLock { state -> (UInt64, Commit)? in
                let seq = state.device.syncedHead + 1
                return make(&state, seq).map { (seq, $0) }
            }
            guard let (seq, commit) = attempt else { return }
            let appended = try await container.append(commit, at: seq, as: encoding)
            if appended { CrashPoint.entryAppended.reach() }
            if appended, try await isBehindJournalFloor(seq) {
                // Written where compaction had deleted an entry: nobody reads it.
                try await container.withdraw(commit, at: seq)
                try await rebaseOnNewestSnapshot()
                continue
            }
            try await pullUnlocked(appended: appended ? (seq, commit) : nil)
            if appended { return }
        }
    }

    /// Uploads the next batch's chunks, then appends its commit; a batch with many new bytes
    /// goes metadata first (commit, then chunks). Returns how many queued changes the batch
    /// held; nil when the queue is empty.
    private func pushOneBatch() async throws -> Int? {
        // The batch is chosen under the state lock and recorded outside it (the transaction
        // also commits the queue's waiting writes): only a push changes `inFlight`.
        if state.withLock({ $0.inFlight == nil }) {
            let chosen = state.withLock { state -> Batch? in
                let ids = state.device.nextBatchIDs(
                    maximumOperations: configuration.maximumBatchOperations, maximumChunks: configuration.maximumBatchChunks)
                return ids.isEmpty ? nil : Batch(commitID: RandomID.make(), localIDs: ids)
            }
            guard let chosen else { return nil }
            try database.write { db in
                try database.setMeta("inFlight", String(decoding: FormatCoding.encode(chosen), as: UTF8.self), db)
            }
            state.withLock { $0.inFlight = chosen }
        }
        let (batch, chunks) = state.withLock { state -> (Batch, [ChunkRef]) in
            let batch = state.inFlight!
            let changes = state.device.pending.prefix(batch.localIDs.count)
            let chunks = changes.flatMap { $0.ops.flatMap(\.chunks) }.filter { !state.storedChunks.contains($0.hash) }
            return (batch, chunks)
        }
        let ops = state.withLock { $0.device.pending.prefix(batch.localIDs.count).flatMap(\.ops) }
        let unstored = Set(chunks.map(\.hash))
        let newBytes = Set(chunks).reduce(UInt64(0)) { $0 + UInt64($1.size) }
        let metadataFirst = newBytes >= configuration.metadataFirstBytes
        // Small chunks travel in packs, named by the entry (either encoding: a new
        // container's first entry is JSON).
        let packs = metadataFirst ? [] : try await upload(chunks, packing: true)
        let repacked = try await protectFromCollection(Set(ops.flatMap(\.chunkHashes)), of: ops, packs: packs)
        try await appendAtNextFreeNumber { state, seq in
            guard state.inFlight == batch else { return nil }  // landed while catching up
            var commit = state.device.commit(for: batch, device: configuration.deviceName, deviceID: deviceID, seq: seq)
            commit.packs = packs + repacked
            if metadataFirst {
                commit.ops = commit.ops.map { op in
                    op.chunks.contains { unstored.contains($0.hash) } ? op.markingContentPending() : op
                }
            }
            return commit
        }
        return batch.localIDs.count
    }

    /// Chunks below this size go up in packs (`packing`): a small file is one chunk.
    public static let packedChunkLimit: UInt32 = 1 << 20

    /// Missing chunks first: a commit never names a chunk the store lacks. Chunks go in
    /// groups (one store flush each), small groups under an upload limit so it is kept.
    /// With `packing`, the small ones go in packs instead, returned for the commit to name.
    @discardableResult
    private func upload(_ chunks: [ChunkRef], packing: Bool = false) async throws -> [PackRecord] {
        var seen = Set<ChunkHash>()
        var due = chunks.filter { chunk in
            seen.insert(chunk.hash).inserted
                && !state.withLock { $0.storedChunks.contains(chunk.hash) } && synced.withLock { $0.packedChunks[chunk.hash] == nil }
        }
        var pacer = UploadPacer(limit: configuration.uploadLimit)
        var packs: [PackRecord] = []
        if packing {
            let small = due.filter { $0.size < Replica.packedChunkLimit && !chunker.isZeroRunChunk($0) }
            due.removeAll { $0.size < Replica.packedChunkLimit && !chunker.isZeroRunChunk($0) }
            packs = try await uploadInPacks(small, pacer: &pacer)
        }
        let groupBytes = configuration.uploadLimit.map { max(1 << 20, Int($0 / 4)) } ?? (32 << 20)
        var next = due.startIndex
        while next < due.endIndex {
            var group: [(hash: ChunkHash, data: Data)] = []
            var bytes = 0
            while next < due.endIndex && (group.isEmpty || bytes + Int(due[next].size) <= groupBytes) {
                let chunk = due[next]
                next += 1
                if let data = localBytes(of: chunk) {
                    group.append((chunk.hash, data))
                    bytes += data.count
                } else if try await !container.hasChunk(chunk.hash) {
                    // A version superseded since (by a later save of the same file) is read
                    // by nobody: its lost chunk must not block the queue forever.
                    guard isCurrentContent(chunk.hash) else {
                        logger.warning("chunk \(chunk.hash) of a superseded version is gone from the cache; not uploaded")
                        continue
                    }
                    try recordLost(chunk.hash)
                }
            }
            guard !group.isEmpty else { continue }  // all were in the store already: no flush
            try await container.writeChunks(group)
            state.withLock { state in
                for chunk in group { state.storedChunks.insert(chunk.hash) }
            }
            try await pacer.sent(bytes)
        }
        return packs
    }

    /// Keeps uploads under `upload_limit`: after each write, waits until the bytes sent so
    /// far fit the limit since the first.
    struct UploadPacer {
        let limit: UInt64?
        let start = ContinuousClock.now
        var sent: UInt64 = 0

        mutating func sent(_ bytes: Int) async throws {
            sent += UInt64(bytes)
            guard let limit else { return }
            try await Task.sleep(until: start + .seconds(Double(sent) / Double(limit)), clock: .continuous)
        }
    }

    /// Small chunks as packs of up to `Pack.largest` bytes: one object, one inode and one PUT for
    /// many small files. A chunk whose bytes are gone is handled as `upload` does.
    private func uploadInPacks(_ chunks: [ChunkRef], pacer: inout UploadPacer) async throws -> [PackRecord] {
        var records: [PackRecord] = []
        var filler = PackFiller()
        func store(_ pack: Pack?) async throws {
            guard let pack else { return }
            // Not `storedChunks`: a packed chunk is stored once an entry names its pack. An
            // entry the store refuses leaves the pack unnamed (collected later), and the retry
            // packs its chunks again for the entry it writes.
            try await container.writePack(pack)
            CrashPoint.packWritten.reach()
            records.append(PackRecord(id: pack.id, chunks: pack.chunks))
            try await pacer.sent(pack.bytes.count)
        }
        for chunk in chunks {
            if let data = localBytes(of: chunk) {
                try await store(filler.add(chunk.hash, data))
            } else if try await !container.hasChunk(chunk.hash) {
                guard isCurrentContent(chunk.hash) else {
                    logger.warning("chunk \(chunk.hash) of a superseded version is gone from the cache; not uploaded")
                    continue
                }
                try recordLost(chunk.hash)
            }
        }
        try await store(filler.finish())
        return records
    }
}

extension Replica {
    /// The bytes of a chunk to upload; a chunk of zeros is made anew (no content file keeps
    /// those: `ContentChunker.Piece.isZeros`).
    func localBytes(of chunk: ChunkRef) -> Data? {
        if chunker.isZeroRunChunk(chunk) { return Data(count: Int(chunk.size)) }
        if let data = localBytes(of: chunk.hash) { return data }
        return chunker.zeroChunkHash(Int(chunk.size)) == chunk.hash ? Data(count: Int(chunk.size)) : nil
    }

    /// The bytes of a chunk to upload: copied aside, or still in a content file (checked
    /// against the hash: a write may have been changing them while they were read).
    func localBytes(of hash: ChunkHash) -> Data? {
        if let data = files.readStaged(hash) { return data }
        let locations = state.withLock { $0.unstaged.locations(of: hash) }
        // Kept from when the file was cut (a small file): those are the bytes the hash is of.
        if let bytes = locations.lazy.compactMap(\.piece.bytes).first { return bytes }
        for (id, piece) in locations {
            // Gone from the log meanwhile: the file was given its cache file (read below).
            if let staged = stagedBytes(of: piece, in: id), let staged, ChunkHash(of: staged) == hash { return staged }
            guard let fd = try? files.openContent(id, writable: false) else { continue }
            defer { try? fd.close() }
            if let data = try? FileIO.read(fd, offset: piece.offset, count: Int(piece.ref.size)),
                ChunkHash(of: data) == hash
            {
                return data
            }
        }
        return files.readStaged(hash)  // copied aside while it was being read
    }

    /// A chunk of a current version is gone from the cache and not in the store: nothing
    /// can bring it back. Its change goes on without it (the queue must not block for good on
    /// one damaged file), and the files naming it say so (`uploadingError`).
    private func recordLost(_ hash: ChunkHash) throws {
        // Recorded outside the state lock; only a push (under `syncLock`) adds lost chunks.
        var lost = state.withLock { $0.lostChunks }
        guard lost.insert(hash).inserted else { return }
        try database.write { [lost] db in
            try database.setMeta("lost", lost.map(\.hex).sorted().joined(separator: " "), db)
        }
        state.withLock { [lost] in $0.lostChunks = lost }
        logger.error("chunk \(hash) of a queued version is gone from the cache and was never uploaded: that version cannot be read on any device; write the file again")
    }

    /// Whether some item's current content as this device sees it (queued changes
    /// included) names `hash`. Not the synced tree's: a version pushed before a crash (its
    /// entry in the journal, its chunks still owed) whose file was written again before the
    /// crash is superseded by the queued version, not lost. Costly (every item): for
    /// failures only.
    func isCurrentContent(_ hash: ChunkHash) -> Bool {
        state.withLock { state in
            let view = state.device.view
            return view.allIDs.contains { view.item($0)?.chunks.contains(where: { $0.hash == hash }) == true }
        }
    }

    /// After a restart: which chunks of queued versions are only in their content files.
    /// Both the content records' versions and every queued version are looked at: a version
    /// queued and then superseded by a later save (a file committed halfway through being
    /// written) still has its chunks in place, at the offsets of its own chunk list, and
    /// the record names only the latest. (Uploads check each chunk's hash when they read it.)
    static func findUnstagedChunks(_ state: inout ReplicaState, _ files: LocalFiles, _ chunker: Chunker) {
        let needed = state.neededChunks
        guard !needed.isEmpty else { return }
        func add(_ chunks: [ChunkRef], of id: ItemID) {
            // A deleted file's last chunk is checked for zeros too (a costly hash, so for
            // those only): its space must come back on a full disk (a `fallocate`d file).
            let laidOut = state.view.isLive(id)
                ? ContentChunker.Piece.layout(chunks, zerosKnownBy: nil, runsOf: chunker)
                : ContentChunker.Piece.layout(chunks, zerosKnownBy: chunker, runsOf: chunker)
            let pieces = laidOut.filter {
                needed.contains($0.ref.hash) && !files.isStaged($0.ref.hash) && !$0.isZeros
            }
            state.unstaged.add(pieces, of: id)
        }
        for (id, record) in state.content { add(record.chunks, of: id) }
        for change in state.device.pending {
            for op in change.ops where !op.chunks.isEmpty { add(op.chunks, of: op.itemID) }
        }
    }
}

extension ReplicaState {
    /// Chunks that queued changes and owed uploads name.
    var neededChunks: Set<ChunkHash> {
        var needed = Set<ChunkHash>()
        forEachNeededChunk { chunk in
            needed.insert(chunk.hash)
            return true
        }
        return needed
    }

    /// Those of `hashes` that no queued change and no owed upload names: `hashes` minus
    /// `neededChunks`, without building that set (a landing asks this under the state lock
    /// with thousands of changes queued behind its batch: 2 ms to build it).
    func unneeded(_ hashes: Set<ChunkHash>) -> Set<ChunkHash> {
        var left = hashes
        forEachNeededChunk { chunk in
            left.remove(chunk.hash)
            return !left.isEmpty
        }
        return left
    }

    /// Calls `body` with each chunk queued changes and owed uploads name (repeats included)
    /// until it returns false.
    private func forEachNeededChunk(_ body: (ChunkRef) -> Bool) {
        for change in device.pending {
            for op in change.ops { for chunk in op.chunks { guard body(chunk) else { return } } }
        }
        for chunks in owed.values { for chunk in chunks { guard body(chunk) else { return } } }
    }

}

