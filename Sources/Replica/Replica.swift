import BlobStore
import ContainerFormat
import Foundation
import GRDB
import Logging
import Synchronization

/// One device of a container: its local state, kept in the cache folder, and the
/// background work that keeps it in sync with the store.
///
/// Metadata calls are synchronous and quick (memory, plus one SQLite write for changes);
/// only reads that must download and explicit sync calls are `async`. Local changes are
/// recorded in the durable queue before a call returns, then pushed in the background.
public final class Replica: Sendable {
    public let configuration: ReplicaConfiguration
    public let identity: Identity
    let container: ContainerStore
    let database: StateDatabase
    let files: LocalFiles
    let chunker: Chunker
    public let deviceID: String
    let logger: Logger
    /// Lock order, outermost first; a lock is only ever taken while holding those above it
    /// (docs/ARCHITECTURE.md, "Threads and locks"):
    /// 1. `syncLock` (async: one pull or push at a time; held across store calls);
    /// 1b. `inMemory.moving`, one new file's move out of memory (or its close into the
    ///    staging log); the move's write takes the file's lock below;
    /// 2. `fileLocks`, one file's (its local copy: copying queued bytes aside, `pwrite` of a
    ///    downloaded chunk, `ftruncate`, its content record in the database); never two;
    /// 3. `state` (the namespace: view, queue and content records, in memory; no file I/O
    ///    under it, and no transaction but a rebase on a snapshot's: a push records its
    ///    batch and a pull its entries after letting go);
    /// 4. `synced` (the journal's tree, which only the sync engine changes);
    /// 5. the state database's `order` lock and GRDB's writer queue (`database.write`);
    /// 6. small leaf mutexes (`pushPending`, `changeObserver`, `DownloadTable`, ...).
    /// So nothing that runs on the database's writer queue (an `asyncWrite` completion, a
    /// `writeSoon` closure) may take `state`: a writer waiting for it while `state` waits for
    /// the writer is a deadlock. Such completions hop to another thread first.
    let state: MeasuredMutex<ReplicaState>
    /// The fold of the journal as far as this device has read it. Only the sync engine
    /// changes it (a pull's fold, a rebase, under `syncLock`), outside `state`: a large batch's
    /// fold holds up no lookup. Others read where chunks are packed and the retention policy.
    let synced: MeasuredMutex<Tree>
    let fileLocks = FileLocks()
    let syncLock = AsyncLock()
    /// A wake-up for local changes is already scheduled (see `pushAfterPause`).
    let pushPending = Mutex(false)
    /// A push was asked for (`syncSoon`, `sync --wait`, a burst's pause): the next push goes
    /// up at once. Other wake-ups (a new journal entry, the poll) push only what is due.
    let pushRequested = Mutex(true)
    /// The sync loop; its `wakeup` starts a pull or push early.
    let loop = BackgroundLoop()
    /// Its rounds, each told when it ends (`waitUntilUploaded`).
    let rounds = SyncRounds()
    /// Automatic collection (`ReplicaConfiguration.autoCollect`) and usage measured lately.
    let collection = Mutex(CollectionTasks())
    let changeObserver = Mutex<(@Sendable ([ItemChange]) -> Void)?>(nil)
    let downloads = DownloadTable()
    let commits = BackgroundCommits()
    /// New small files written into memory until their close (`makeFileInMemory`).
    let inMemory = FilesInMemory()
    /// The start's queuing of files written before the last shutdown (`reconcileContentFiles`):
    /// the first push waits for it, so that it never takes a version those files' bytes have
    /// since left behind for one whose chunks were lost.
    let startupQueuing = Mutex<Task<Void, Never>?>(nil)
    let events: EventLog
    /// This device's hold on its cache folder, from `open` until `stop` has finished.
    let cacheLock: CacheLock

    /// Opens (or creates) the device state in `configuration.cacheDirectory` for the
    /// container in `store`, and catches up with the journal if the store can be reached.
    public static func open(
        _ configuration: ReplicaConfiguration, store: any BlobStore, logger: Logger
    ) async throws -> Replica {
        let cacheLock = try await CacheLock.acquire(
            folder: configuration.cacheDirectory, owner: configuration.cacheOwner,
            wait: configuration.cacheLockWait, grace: configuration.cacheLockGrace)
        let container: ContainerStore
        let files: LocalFiles
        let database: StateDatabase
        do {
            let store = configuration.offline ? UnreachableStore(location: store.location) : store
            container = try ContainerStore(store: store, container: configuration.container)
            files = try LocalFiles(root: configuration.cacheDirectory, stagingSegmentSize: configuration.stagingSegmentSize)
            database = try StateDatabase(
                path: files.databasePath, logger: logger, freeSpareSpace: { [files] in files.releaseReserve() })
        } catch {
            throw ReplicaError.wrapping(error)
        }
        let identity = try await Replica.resolveIdentity(configuration, container, database, logger)
        let replica = try Replica(configuration, identity, container, database, files, cacheLock, logger)
        do {
            try await replica.bootstrapFromSnapshot()
            try await replica.pull()
        } catch let error as StoreError where error.isTransient {
            logger.warning("store unreachable, starting from the local cache: \(error)")
            replica.state.withLock { $0.uploadError = error.description }
        }
        return replica
    }

    private init(
        _ configuration: ReplicaConfiguration, _ identity: Identity, _ container: ContainerStore,
        _ database: StateDatabase, _ files: LocalFiles, _ cacheLock: CacheLock, _ logger: Logger
    ) throws {
        self.configuration = configuration
        self.cacheLock = cacheLock
        self.identity = identity
        self.container = container
        self.database = database
        self.files = files
        self.logger = logger
        let chunker = Chunker(identity.chunking)
        self.chunker = chunker
        events = EventLog()
        do {
            let loaded = try database.write { db -> (ReplicaState, Tree, String) in
                var deviceID = try database.meta("deviceID", db)
                if deviceID == nil {
                    deviceID = RandomID.make()
                    try database.setMeta("deviceID", deviceID, db)
                }
                let tree = try database.loadTree(db)
                try database.compactPackedChunks(tree.packedChunks, db)
                let pending = try database.loadPending(db)
                let landed = try database.loadLanded(db)
                let inFlight = try database.meta("inFlight", db).map {
                    try FormatCoding.decode(Batch.self, from: Data($0.utf8))
                }
                let nextLocalID = Int64(try database.meta("nextLocalID", db) ?? "1") ?? 1
                var state = ReplicaState(
                    device: DeviceView(device: configuration.deviceName, synced: tree, pending: pending, landed: landed),
                    nextLocalID: nextLocalID, inFlight: inFlight, content: ContentRecords(try database.loadContent(db), staging: files.staging))
                state.noteReclaimCandidates(state.content.ids)
                state.owed = try database.meta("owed", db).map {
                    try FormatCoding.decode([UInt64: [ChunkRef]].self, from: Data($0.utf8))
                } ?? [:]
                state.lostChunks = Set((try database.meta("lost", db) ?? "").split(separator: " ").compactMap {
                    ChunkHash(hex: String($0))
                })
                state.localAccessTimes = try database.loadAccessTimes(db)
                Replica.findUnstagedChunks(&state, files, chunker)
                return (state, tree, deviceID!)
            }
            state = MeasuredMutex(loaded.0)
            synced = MeasuredMutex(loaded.1)
            deviceID = loaded.2
        } catch {
            throw ReplicaError.wrapping(error)
        }
        do {
            try files.staging.removeUnheld()  // every record holds its location by now
        } catch {
            logger.warning("cannot list \(files.staging.folder): \(error)")
        }
        reconcileContentFiles()
        files.startNewContent(
            unrecorded: { [weak self] ids in
                self?.state.withLock { state in ids.filter { state.content[$0] == nil && state.device.view.item($0) == nil } } ?? []
            },
            recordQueued: { [database] in try database.flush() })
    }

    /// The container's identity, creating the container if allowed; a cache made for another
    /// container or another incarnation of it is refused.
    private static func resolveIdentity(
        _ configuration: ReplicaConfiguration, _ container: ContainerStore, _ database: StateDatabase,
        _ logger: Logger
    ) async throws -> Identity {
        let cached = try? await database.pool.read { db in
            try database.meta("identity", db).map { try FormatCoding.decode(Identity.self, from: Data($0.utf8)) }
        }
        var remote: Identity?
        do {
            remote = try await container.readIdentity()
            if remote == nil, configuration.createIfMissing {
                let proposed = Identity(
                    container: configuration.container, token: RandomID.make(), created: Timestamp.now())
                remote = try await container.createIdentity(proposed)
                logger.info("created container \(configuration.container) in \(container.store.location)")
            }
        } catch let error as StoreError where error.isTransient && cached != nil {
            logger.warning("store unreachable (\(error)); using the cached identity")
            return cached!
        } catch {
            throw ReplicaError.wrapping(error)
        }
        guard let remote else {
            throw ReplicaError.store(.notFound("container \(configuration.container) does not exist in \(container.store.location)"))
        }
        if let cached, cached.token != remote.token {
            throw ReplicaError.identityMismatch(
                "the cache \(configuration.cacheDirectory) belongs to container identity \(cached.token), but the store holds identity \(remote.token); use another cache folder")
        }
        if cached == nil {
            try database.write { db in
                try database.setMeta("identity", String(decoding: FormatCoding.encode(remote), as: UTF8.self), db)
            }
        }
        return remote
    }

    // MARK: - Observing

    /// Called (on a background task) with the items whose visible state changed because of
    /// remote changes, each with what the kernel's caches need to know of it (`ItemChange`):
    /// the FUSE layer invalidates them with that alone.
    public func setChangeObserver(_ observer: (@Sendable ([ItemChange]) -> Void)?) {
        changeObserver.withLock { $0 = observer }
    }

    /// The changes of `ids` as observers see them, worked out under the state lock:
    /// `previous` gives each item as it was before. An item the kernel would see as it was
    /// is left out: this device's own batch landing changes only what `stat` does not show
    /// (journal numbers, the content's time, the upload's pending mark), and telling the
    /// kernel of every file of a `tar x` again cost two notifications per file.
    func itemChanges(_ ids: Set<ItemID>, previous: (ItemID) -> Item?, _ state: ReplicaState) -> [ItemChange] {
        ids.compactMap { id in
            let now = state.device.view.liveItem(id)
            let old = previous(id)
            // A file with hard links shows a link count the other names change.
            if let old, let now, Replica.showsTheSame(old, now), state.device.view.linkCount(of: id) <= 1 { return nil }
            let parent = now?.parent
            return ItemChange(
                id: id, parent: parent, name: now?.name,
                contentChanged: old != nil && now != nil && (old?.size != now?.size || old?.chunks != now?.chunks))
        }
    }

    /// Whether the kernel would see `a` and `b` alike: name and place, attributes, content
    /// and extended attributes (it caches POSIX ACLs).
    private static func showsTheSame(_ a: Item, _ b: Item) -> Bool {
        a.parent == b.parent && a.name == b.name && a.kind == b.kind && a.mode == b.mode && a.size == b.size
            && a.chunks == b.chunks && a.mtime == b.mtime && a.ctime == b.ctime && a.atime == b.atime
            && a.owner == b.owner && a.target == b.target && a.device == b.device && a.linkedItem == b.linkedItem
            && a.xattrs == b.xattrs
    }

    // MARK: - Kept for the kernel layer

    /// The kernel layer's node numbers (inode numbers, its own: `NodeNumbers` in FuseAdapter),
    /// kept with the cache state so that they outlive a mount. Stored, never read, here.
    public func savedNodeNumbers() throws(ReplicaError) -> [(UInt64, ItemID)] {
        do {
            // A read: a write would wait for a new device's snapshot to be recorded (a
            // second for 100,000 items), and the mount with it. Only the kernel layer
            // writes this table, and it has not started yet.
            return try database.pool.read { db in try database.loadInodes(db) }
        } catch {
            throw ReplicaError.wrapping(error)
        }
    }

    /// Keeps new node numbers: as a queued change, they wait in order until they are
    /// recorded (a full disk), and `stop` records them before it ends.
    public func saveNodeNumbers(_ assignments: [(UInt64, ItemID)]) {
        guard !assignments.isEmpty else { return }
        database.writeSoon { [database] db in try database.saveInodes(assignments, db) }
    }

    // MARK: - Lifecycle

    /// Starts the background loop: pull remote changes every `pollInterval`, push the queue.
    public func start() {
        // Where the store can notify, a new journal entry wakes the loop at once.
        loop.start(notifiedBy: container.store, under: "\(configuration.container)/journal/") { [self] in
            await runSyncLoop()
        }
        if configuration.autoCollect && !configuration.offline {
            collection.withLock { tasks in
                guard tasks.automatic == nil else { return }
                tasks.automatic = Task.detached { [self] in await runCollectionLoop() }
            }
        }
    }

    /// Stops the background loop. Queued changes stay in the cache for the next start.
    public func stop() async {
        cacheLock.markStopping()
        let collecting = collection.withLock { tasks in
            defer { tasks = CollectionTasks() }
            return [tasks.automatic, tasks.requested].compactMap { $0 }
        }
        for task in collecting { task.cancel() }
        // Files written before the last shutdown still being queued: queued before the
        // database's last flush, not after it.
        await startupQueuing.withLock({ $0 })?.value
        moveAllOutOfMemory()
        await commits.drain()
        await loop.stop()
        do {
            try database.flush()
        } catch {
            logger.error("cannot record the last changes in \(files.databasePath): \(error)")
        }
        files.stopNewContent()
        if LockStatistics.enabled { logger.notice("\(LockStatistics.table())") }
        cacheLock.release()
    }
}
