import ContainerFormat
import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// What is kept locally: eviction (`user.icloud.evict`), pinning (`user.icloud.isPinned`),
/// the cache bound (`cache_size=`) and greedy downloading (`greedy`).
extension Replica {
    /// Drops the local copy of a file (a folder: of every file below it) so it becomes a
    /// placeholder again; size and dates stay. Refused with `busy` for a file with changes
    /// not yet uploaded or that is open (for a folder, after evicting everything else).
    public func evict(_ id: ItemID) throws(ReplicaError) {
        let (kind, candidates, pending, busy) = try state.withLock {
            state throws(ReplicaError) -> (ItemKind, [ItemID], Set<ItemID>, [String]) in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            let pending = state.itemsWithPendingChanges
            var candidates: [ItemID] = []
            var busy: [String] = []
            for file in files(below: item, state) {
                if let why = whyBusy(file, state, pending) {
                    busy.append("\(state.view.path(of: file) ?? file.rawValue) \(why)")
                } else {
                    candidates.append(file)
                }
            }
            return (item.kind, candidates, pending, busy)
        }
        var refused = busy
        for file in candidates {
            if let why = try evictFile(file, pending) { refused.append(why) }
        }
        if kind == .folder {
            try fileLocks.withLock(id) { () throws(ReplicaError) in
                guard state.withLock({ $0.content[id]?.pinned == true }) else { return }
                try saveContent(id, nil)
                state.withLock { $0.content[id] = nil }
            }
        }
        if !refused.isEmpty { throw .busy(refused.joined(separator: "; ")) }
    }

    /// Drops the local copy of `file`, unless it became busy meanwhile: then says why.
    private func evictFile(_ file: ItemID, _ pending: Set<ItemID>) throws(ReplicaError) -> String? {
        try fileLocks.withLock(file) { () throws(ReplicaError) -> String? in
            try copyQueuedBytesAside(of: file, in: 0..<UInt64.max)  // owed chunks
            let outcome = state.withLock { state -> (busy: String?, record: ContentRecord?) in
                if let why = whyBusy(file, state, pending) { return ("\(state.view.path(of: file) ?? file.rawValue) \(why)", nil) }
                let record = state.content.removeValue(forKey: file)
                state.downloadRequested.remove(file)
                state.downloadErrors[file] = nil
                return (nil, record)
            }
            guard outcome.busy == nil else { return outcome.busy }
            do throws(ReplicaError) {
                try saveContent(file, nil)
            } catch {
                // The copy stays, and memory says so, as the database does (which still
                // names its place in the staging log: that segment is not removed yet).
                state.withLock { state in
                    guard state.content[file] == nil else { return }
                    if let location = outcome.record?.staged { files.staging.hold(location) }
                    state.content[file] = outcome.record
                }
                throw error
            }
            files.removeContent(file)
            return nil
        }
    }

    /// Pins ("keep downloaded": downloaded now and never evicted) or unpins an item. A
    /// pinned folder pins everything below it, also what arrives later.
    public func setPinned(_ id: ItemID, _ pinned: Bool) throws(ReplicaError) {
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            // Recorded, then shown: a pin that cannot be recorded is not in effect.
            let record = try state.withLock { state throws(ReplicaError) in
                guard state.view.liveItem(id) != nil else { throw .notFound }
                var record = state.content[id] ?? ContentRecord.empty
                record.pinned = pinned
                return record
            }
            try saveContent(id, record)
            state.withLock { state in
                if var current = state.content[id] {
                    current.pinned = pinned
                    state.content[id] = current
                } else {
                    state.content[id] = record
                }
            }
        }
        if pinned { startDownload(id) }
    }

    /// Whether `id` or a folder above it is pinned.
    func isPinned(_ id: ItemID, _ state: ReplicaState) -> Bool {
        var current = id
        for _ in 0..<Tree.maximumDepth {
            if state.content[current]?.pinned == true { return true }
            guard current != .root, let item = state.view.item(current) else { return false }
            current = item.parent
        }
        return false
    }

    /// Bytes of downloaded content kept locally, and how many of them may not be evicted.
    public func cacheUsage() -> (total: UInt64, unevictable: UInt64) {
        localCopies().reduce(into: (total: UInt64(0), unevictable: UInt64(0))) { usage, copy in
            usage.total += copy.bytes
            if !copy.evictable { usage.unevictable += copy.bytes }
        }
    }

    /// A file's local copy, as the cache bound counts it.
    struct LocalCopy {
        var id: ItemID
        /// The space it takes: its present bytes, less the holes of a large copy.
        var bytes: UInt64
        var lastAccess: Int64
        /// Clean, closed and unpinned.
        var evictable: Bool
    }

    /// How long a measurement of the local copies that fitted the cache bound stands while
    /// their present bytes do not change.
    static let cacheRemeasureInterval = Duration.seconds(30)

    /// Present bytes from which a copy's file is measured: below, holes do not matter, and
    /// a stat per small file every second would.
    static let measuredCopyBytes: UInt64 = 1 << 20

    /// The local copies holding bytes. A sparse file's holes take no space, so a copy of
    /// `measuredCopyBytes` or more counts the blocks its file takes, if fewer than its
    /// present bytes: a 20 GB disk image with 1 MB written must not evict everything else.
    /// The files are measured after the state's lock is released. (Not from the chunk list,
    /// as `st_blocks` is: a copy being written has holes no chunk list knows yet.)
    func localCopies() -> [LocalCopy] {
        var copies = state.withLock { state -> [LocalCopy] in
            let pending = state.itemsWithPendingChanges
            return state.content.compactMap { id, record in
                let bytes = record.present.coveredBytes(below: record.size)
                guard bytes > 0 else { return nil }
                let evictable = whyBusy(id, state, pending) == nil && !isPinned(id, state)
                    && state.view.item(id)?.kind == .file
                return LocalCopy(id: id, bytes: bytes, lastAccess: record.lastAccess, evictable: evictable)
            }
        }
        for index in copies.indices where copies[index].bytes >= Self.measuredCopyBytes {
            guard let taken = files.spaceTaken(byContentOf: copies[index].id) else { continue }
            copies[index].bytes = min(copies[index].bytes, taken)
        }
        return copies
    }

    /// Drops the local copies of deleted files (here or on another device) that nothing
    /// needs any more: without this, every deleted file's bytes stayed in the cache.
    /// `among`: only these items (those whose queued bytes just landed), else the copies
    /// whose item went since they were last looked at (`reclaimCandidates`).
    func reclaimDeletedContent(among candidates: Set<ItemID>? = nil) {
        let reclaimed = state.withLock { state -> [(ItemID, ContentRecord)] in
            // A queued delete needs no bytes; queued versions before it find theirs through
            // `unstaged`, which `isReclaimable` checks.
            var reclaimed: [(ItemID, ContentRecord)] = []
            for id in candidates ?? state.reclaimCandidates {
                guard let record = state.content[id], !state.view.isLive(id) else {
                    state.reclaimCandidates.remove(id)  // gone already, or live again
                    continue
                }
                guard isReclaimable(id, state) else {
                    state.reclaimCandidates.insert(id)  // looked at again at the next pass
                    continue
                }
                reclaimed.append((id, record))
                state.content[id] = nil
                state.changedSinceClean[id] = nil
                state.reclaimCandidates.remove(id)
            }
            return reclaimed
        }
        guard !reclaimed.isEmpty else {
            if candidates == nil { files.keepReserve() }
            return
        }
        // The bytes go first: nothing reads them (deleted, no open handle, no queued version
        // needs them), and on a full disk the record of their going needs the space they
        // free. A record left naming a removed file is a lost copy, reclaimed again later.
        for (id, _) in reclaimed { files.removeContent(id) }
        do {
            try database.write { db in
                for (id, _) in reclaimed { try database.saveContent(id, nil, db) }
            }
            files.keepReserve()
        } catch {
            // Memory stays with the database: the records come back, to be recorded gone
            // at the next pass.
            state.withLock { state in
                for (id, record) in reclaimed where state.content[id] == nil {
                    if let location = record.staged { files.staging.hold(location) }
                    state.content[id] = record
                }
                state.noteReclaimCandidates(reclaimed.map { $0.0 })
            }
            logger.warning("cannot record that \(reclaimed.count) deleted file(s) left the cache: \(error); tried again shortly")
        }
    }

    /// Evicts clean, unpinned, closed files, least recently used first, until downloaded
    /// content fits in `cacheSize`. Files that cannot be evicted may exceed the bound.
    func enforceCacheBound() {
        let bound = configuration.cacheSize
        let now = ContinuousClock.now
        // The present bytes first (no file measured): they are never fewer than the space
        // taken. Over the bound but the same as when the files last fitted (a large sparse
        // file keeps them over for good), the files are measured again only now and then:
        // writes into holes take space without changing them.
        let present = state.withLock { state -> UInt64? in
            let present = state.content.presentBytes
            if let fitted = state.cacheLastFitted, fitted.present == present, now - fitted.at < Self.cacheRemeasureInterval {
                return nil
            }
            return present
        }
        guard let present, present > bound else { return }
        let copies = localCopies()
        var total = copies.reduce(UInt64(0)) { $0 + $1.bytes }
        guard total > bound else {
            state.withLock { $0.cacheLastFitted = (present, now) }
            return
        }
        var victims: [ItemID] = []
        for copy in copies.filter(\.evictable).sorted(by: { $0.lastAccess < $1.lastAccess }) where total > bound {
            victims.append(copy.id)
            total -= copy.bytes
        }
        for id in victims {
            do {
                try evict(id)
                logger.debug("evicted \(id) to keep the cache under \(bound) bytes")
            } catch {
                logger.debug("could not evict \(id): \(error)")
            }
        }
    }

    /// Starts background downloads of files that should be local: everything when greedy,
    /// and pinned files, among `ids` (nil: the whole container).
    func downloadWanted(_ ids: Set<ItemID>?) {
        let wanted = state.withLock { state -> [ItemID] in
            guard configuration.greedy || state.content.pinnedCount > 0 else { return [] }
            let candidates = ids.map(Array.init) ?? state.view.allIDs
            return candidates.filter { id in
                guard let item = state.view.liveItem(id), item.kind == .file, item.size > 0 else { return false }
                let record = state.content[id]
                let current = record.map { !$0.dirty && $0.chunks == item.chunks && $0.isComplete } ?? false
                return !current && record?.dirty != true && (configuration.greedy || isPinned(id, state))
            }
        }
        for id in wanted { startBackgroundDownload(id) }
    }

    /// Why a file's local copy must stay, or nil when it may be evicted. `pending` is
    /// `state.itemsWithPendingChanges`, computed once by callers that loop over files.
    func whyBusy(_ id: ItemID, _ state: ReplicaState, _ pending: Set<ItemID>) -> String? {
        if state.content[id]?.dirty == true || pending.contains(id) {
            return "has changes not yet uploaded"
        }
        if state.openCount[id] != nil || state.openingForWrite[id] != nil { return "is open" }
        return nil
    }

    /// `item` if it is a file, or the files anywhere in it if it is a folder.
    func files(below item: Item, _ state: ReplicaState) -> [ItemID] {
        guard item.kind == .folder else { return item.kind == .file ? [item.id] : [] }
        var found: [ItemID] = []
        var stack = [item.id]
        while let next = stack.popLast() {
            for id in state.view.childIDs(of: next) {
                guard let child = state.view.item(id).flatMap(state.view.resolved) else { continue }
                if child.kind == .folder { stack.append(child.id) } else if child.kind == .file { found.append(child.id) }
            }
        }
        var seen = Set<ItemID>()
        return found.filter { seen.insert($0).inserted }  // a file with several names in it, once
    }
}
