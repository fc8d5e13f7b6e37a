import ContainerFormat

/// Everything a replica keeps in memory, behind one lock (`Replica.state`). No file I/O and
/// no `await` while it is held; the only database writes under it are the sync engine's own
/// (a batch in flight, a pull's apply). A file's I/O runs under its `Replica.fileLocks`.
struct ReplicaState: Sendable {
    var device: DeviceView
    var nextLocalID: Int64
    /// The batch being pushed; persisted so a restarted process pushes the same commit.
    var inFlight: Batch?
    var content: ContentRecords
    /// Local copies whose item may have gone (deleted here or on another device, expired):
    /// the periodic pass looks at these for space to reclaim, not at every copy.
    var reclaimCandidates: Set<ItemID> = []
    /// Bumped by every local write, so a commit can tell if the file changed while chunking.
    var writeGeneration: [ItemID: UInt64] = [:]
    /// Writes copying bytes into a content file right now (a commit waits for them).
    var writesInFlight: [ItemID: Int] = [:]
    /// Chunks of queued versions whose only copy is in their content files.
    var unstaged = UnstagedChunks()
    /// Bytes written (or truncated away) since each dirty file was last clean: a commit
    /// chunks only around them (`ContentChunker`). No entry for a dirty file (written before
    /// a restart): every byte is chunked.
    var changedSinceClean: [ItemID: ByteRanges] = [:]
    /// Local modification times of files written since their last commit.
    var dirtyMtime: [ItemID: Timestamp] = [:]
    /// Modes set on files being written: queued with their content at the next commit.
    var dirtyMode: [ItemID: UInt32] = [:]
    /// Owners set on files being written (`cp -a`, `rsync -a` as root): queued likewise.
    var dirtyOwner: [ItemID: Owner] = [:]
    var dirtyAtime: [ItemID: Timestamp] = [:]
    /// Access times moved by reads on this device (`AccessTimeRule`); never queued. Any
    /// access time set since (`utimensat`, a remote change) takes over.
    var localAccessTimes: [ItemID: Timestamp] = [:]
    /// When a file being written last changed (a write, a truncation, an attribute): its
    /// ctime until the commit, which carries it.
    var dirtyCtime: [ItemID: Timestamp] = [:]
    var openCount: [ItemID: Int] = [:]
    /// Files open for writing that the kernel writes itself (passthrough): their bytes change
    /// unseen (`Replica+OutsideWrites.swift`).
    var outsideWriters: [ItemID: OutsideWriters] = [:]
    /// Folders open here (`opendir`): one replaced by a rename still answers `fstat`.
    var openFolders: [ItemID: Int] = [:]
    /// Files being downloaded to be opened for writing: kept (never evicted) meanwhile.
    var openingForWrite: [ItemID: Int] = [:]
    /// For open files: the chunk list of the version the first opener saw (close-to-open).
    var versionAtOpen: [ItemID: [ChunkRef]] = [:]
    /// For open files: the version they were opened at (the base of saves and unlinks).
    var openedBase: [ItemID: BaseVersion] = [:]
    /// Open files unlinked on this device: their handles' later writes are dropped, as POSIX
    /// has it. Forgotten at the last close: if the delete is declined (another device's edit
    /// wins), later saves here are edits like any other. A file deleted by another device
    /// while open here is revived by its writes.
    var unlinkedHere: Set<ItemID> = []
    /// `O_TMPFILE` files: open, with no name, known only here (nothing queued) until
    /// `makeLink` names them; dropped at their last close. Their attributes are these.
    var anonymousFiles: [ItemID: Item] = [:]
    var downloading: Set<ItemID> = []
    var downloadRequested: Set<ItemID> = []
    /// Whole-file downloads waiting for a background worker, and how many workers run.
    var downloadQueue: [ItemID] = []
    var downloadWorkers = 0
    var downloadErrors: [ItemID: String] = [:]
    /// Chunks landed in each file's local copy since its download progress was last recorded.
    var chunksSinceProgressRecord: [ItemID: Int] = [:]
    /// The present bytes of all local copies when their files were last measured and found
    /// to fit the cache bound, and when (see `enforceCacheBound`).
    var cacheLastFitted: (present: UInt64, at: ContinuousClock.Instant)?
    var uploadError: String?
    /// This device's journal entries published metadata first, with the chunks still owed
    /// to the store (persisted as meta `owed`; paid, then announced with `uploaded`).
    var owed: [UInt64: [ChunkRef]] = [:]
    /// Set when what this device applied from the store could not be recorded in its cache
    /// and memory cannot go back to what the database holds (the snapshot it started from,
    /// or a failed read-back after pulled entries failed to record): syncing stops, with
    /// this as the reason, until a remount starts again from the database.
    var notRecorded: String?
    /// Chunks of queued versions whose bytes were gone from the cache before they reached
    /// the store (a damaged cache): their changes were pushed without them rather than
    /// blocking the queue for good, and files still naming them show `uploadingError`
    /// (`contentLost`). Persisted as meta `lost`.
    var lostChunks: Set<ChunkHash> = []
    /// Chunks known to be in the store (uploaded or seen there) during this run.
    var storedChunks: Set<ChunkHash> = []
    /// What this device knows of the store's collections (its records, the journal floor).
    var collections = CollectionWatch()
    /// When the last local change was queued (a burst is under way if it was just now).
    var lastLocalChange: ContinuousClock.Instant?

    /// Borrowed, not copied: a getter returned a copy of the tree (a retain of each of its
    /// tables) at each of the many reads of it under the lock.
    var view: Tree {
        _read { yield device.view }
    }

    /// The item as the user sees it, with the size, time and mode of unsaved local writes.
    func liveItem(_ id: ItemID) -> Item? {
        // Not `.map(withUnsavedWrites)`: the method reference captures a copy of the state.
        guard let item = device.view.liveItem(id) else { return nil }
        return withUnsavedWrites(item)
    }

    /// `liveItem`, or an `O_TMPFILE` file's (not `?? anonymousFiles[id]` at the caller: the
    /// `??`'s closure captured a copy of the whole state).
    func liveOrAnonymousItem(_ id: ItemID) -> Item? {
        if let item = liveItem(id) { return item }
        return anonymousFiles[id]
    }

    /// `liveItem`, or, for a file (or folder) removed while it is open here, the item it was: `fstat`,
    /// `ftruncate` and `lseek(SEEK_END)` on an open descriptor work as on a local disk.
    func itemOfOpenHandle(_ id: ItemID) -> Item? {
        if let item = liveItem(id) { return item }
        guard openCount[id] != nil || openFolders[id] != nil, var item = device.view.item(id) ?? anonymousFiles[id] else {
            return nil
        }
        // Unlinked while open (or never linked): its bytes live only here, and queuing them changes nothing (the
        // delete stands), so its size is the local copy's even once that is clean again. (The
        // deleted item's size is whatever was last queued: 0 for a file removed before its
        // first close was queued, which made the kernel cut reads after an invalidation.)
        if let record = content[id] { item.size = record.size }
        return withUnsavedWrites(item)
    }

    private func withUnsavedWrites(_ item: Item) -> Item {
        guard let record = content[item.id] else { return item }
        guard record.dirty else {
            // A version kept for the opens here shows its own size until they all close:
            // what those opens (and new ones meanwhile) read is that version, whole.
            guard keepsOpenedVersion(item, record) else { return item }
            var item = item
            item.size = record.size
            return item
        }
        var item = item
        item.size = record.size
        item.mtime = dirtyMtime[item.id] ?? item.mtime
        item.mode = dirtyMode[item.id] ?? item.mode
        if let owner = dirtyOwner[item.id] { item.owner = owner == .root ? nil : owner }
        item.atime = dirtyAtime[item.id] ?? item.atime
        item.ctime = dirtyCtime[item.id] ?? item.ctime
        return item
    }

    /// Close-to-open: while a file is open, a complete local copy of the version that was
    /// opened keeps being read; a newer version (`item`, from another device) shows at the
    /// next open after all close (as a program that replaced a file keeps reading the old one).
    func keepsOpenedVersion(_ item: Item, _ record: ContentRecord) -> Bool {
        versionAtOpen[item.id] == record.chunks && record.isComplete && record.chunks != item.chunks
    }

    /// Remembers those of `ids` that have a local copy but no live item, for the periodic
    /// pass to reclaim (`Replica.reclaimDeletedContent`).
    mutating func noteReclaimCandidates(_ ids: some Sequence<ItemID>) {
        for id in ids where content[id] != nil && !view.isLive(id) { reclaimCandidates.insert(id) }
    }

    /// Items some queued change touches.
    var itemsWithPendingChanges: Set<ItemID> {
        Set(device.pending.flatMap { $0.ops.map(\.itemID) })
    }
}

/// The opens of one file that the kernel writes itself, and its content file's modification
/// time when last looked at (a later one says the kernel wrote it since).
struct OutsideWriters: Sendable {
    var lastSeenModified: Timestamp?
    /// The writers' own descriptors of the local copy, one per writer, each open until its
    /// `endOutsideWrites`: a refresh (a `setattr` or `stat` of the file while it is
    /// written, `tar x`'s chown, chmod and utimens before each close) looks through one
    /// instead of opening the file by its path.
    var descriptors: [Int32] = []
}
