import ContainerFormat

/// The `user.icloud.*` picture of an item: per file, and aggregated over a folder's
/// contents (byte-weighted percentages), so the mount root shows the whole container.
extension Replica {
    public func syncState(of id: ItemID) throws(ReplicaError) -> SyncState {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.liveItem(id) else { throw .notFound }
            let pending = state.itemsWithPendingChanges
            var result = item.kind == .folder ? folderState(item, &state, pending) : fileState(item, &state, pending)
            result.isPinned = isPinned(id, state)
            return result
        }
    }

    /// Whether `id` (a file, or a folder with everything in it) is all in the store: nothing
    /// queued, unsaved or still owed by any device. A folder is answered from the few items
    /// that are not (queued changes, files being written, content announced before its
    /// chunks), so a large container answers as fast as a small one: `icloudfs sync --wait`
    /// asks the root after each sync round. A file is answered by itself (`icloudfs status`
    /// asks every file).
    public func isUploaded(_ id: ItemID) throws(ReplicaError) -> Bool {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.liveItem(id) else { throw .notFound }
            // The whole container (`sync --wait` asks after each sync round): any queued change
            // says no, without a set of the queue's items (30,000 after a long offline spell).
            if id == .root { return state.device.pending.isEmpty && folderIsUploaded(id, &state, []) }
            let pending = state.itemsWithPendingChanges
            if item.kind != .folder { return fileState(item, &state, pending).isUploaded }
            return folderIsUploaded(id, &state, pending)
        }
    }

    /// Scans every content record for files being written: for folders only.
    private func folderIsUploaded(_ id: ItemID, _ state: inout ReplicaState, _ pending: Set<ItemID>) -> Bool {
        let view = state.view
        // Queued changes of items gone since (deletes, moves away) count where they were.
        func within(_ other: ItemID) -> Bool {
            id == .root || other == id || view.isAncestor(id, of: other)
        }
        if pending.contains(where: within) { return false }
        let unsaved = state.content.contains { $0.value.dirty && view.liveItem($0.key) != nil && within($0.key) }
        return !unsaved && !view.itemsWithPendingContent.contains { view.liveItem($0) != nil && within($0) }
    }

    /// `isPinned` is left false here (it walks up the ancestors, and a folder's tally does
    /// not use it): `syncState` sets it for the item asked about.
    func fileState(_ item: Item, _ state: inout ReplicaState, _ pending: Set<ItemID>) -> SyncState {
        let record = state.content[item.id]
        let matchesVersion = record.map { $0.dirty || ($0.chunks == item.chunks && $0.size == item.size) } ?? false
        let status: SyncState.DownloadingStatus
        let percentDownloaded: Double
        if isDownloaded(item, record) {
            status = .current
            percentDownloaded = 100
        } else if let record, record.isComplete, record.size > 0 {
            status = .downloaded
            percentDownloaded = 0
        } else {
            status = .notDownloaded
            percentDownloaded = matchesVersion ? Double(record!.present.coveredBytes(below: item.size)) * 100 / Double(item.size) : 0
        }
        let isUploading = isUploading(item, record, &state, pending)
        let isLost = !state.lostChunks.isEmpty && item.kind == .file
            && item.chunks.contains { state.lostChunks.contains($0.hash) }
        let isUploaded = !isUploading && !item.isContentPending && !isLost
        return SyncState(
            itemIdentifier: item.id.rawValue, downloadingStatus: status,
            isDownloading: state.downloading.contains(item.id), percentDownloaded: percentDownloaded,
            downloadRequested: state.downloadRequested.contains(item.id), isUploaded: isUploaded,
            isUploading: isUploading,
            percentUploaded: isUploaded ? 100 : isUploading ? uploadedShare(of: item, &state) : 0,
            hasUnresolvedConflicts: state.view.hasUnresolvedConflicts(item.id),
            downloadingError: state.downloadErrors[item.id], uploadingError: isLost ? Replica.lostContentError : isUploading ? state.uploadError : nil,
            isPinned: false)
    }

    /// `isDownloaded` of `fileState`, alone: a query's condition on it looks at nothing else.
    func isDownloaded(_ item: Item, _ record: ContentRecord?) -> Bool {
        guard item.kind == .file, item.size > 0 else { return true }
        guard let record, record.isComplete else { return false }
        return record.dirty || (record.chunks == item.chunks && record.size == item.size)
    }

    /// `isUploading` of `fileState`, alone.
    func isUploading(_ item: Item, _ record: ContentRecord?, _ state: inout ReplicaState, _ pending: Set<ItemID>) -> Bool {
        // Metadata first: this device still owes the chunks, or another device does.
        let owedHere = item.isContentPending && state.owed[item.contentVersion] != nil
        return pending.contains(item.id) || record?.dirty == true || owedHere
    }

    static let lostContentError = ReplicaError.contentLost(
        "the cache lost this version's bytes before they were uploaded; no device can read it: write the file again"
    ).description

    /// Share of the bytes of the newest queued content of `id` already in the store.
    private func uploadedShare(of item: Item, _ state: inout ReplicaState) -> Double {
        let newest = state.device.pending.reversed().lazy.flatMap(\.ops).first { $0.itemID == item.id && !$0.chunks.isEmpty }
        guard let chunks = newest?.chunks ?? (item.isContentPending ? item.chunks : nil) else { return 0 }
        let total = chunks.reduce(0) { $0 + UInt64($1.size) }
        let stored = chunks.filter { state.storedChunks.contains($0.hash) }.reduce(0) { $0 + UInt64($1.size) }
        return total == 0 ? 0 : Double(stored) * 100 / Double(total)
    }

    private func folderState(_ folder: Item, _ state: inout ReplicaState, _ pending: Set<ItemID>) -> SyncState {
        var tally = FolderTally()
        if folder.id != .root { tally.add(fileState(folder, &state, pending), size: 0) }
        var stack = [folder.id]
        while let next = stack.popLast() {
            for child in state.view.childIDs(of: next) {
                // A hard link counts as its item (once per name, as `du -l` would).
                guard let named = state.view.item(child).flatMap(state.view.resolved),
                    let item = state.liveItem(named.id)
                else { continue }
                tally.conflicts = tally.conflicts || state.view.hasUnresolvedConflicts(item.id)
                if item.kind == .folder { stack.append(item.id) }
                tally.add(fileState(item, &state, pending), size: item.kind == .folder ? 0 : item.size)
            }
        }
        // Queued deletes (and moves away) concern items no longer listed here.
        let queuedForGoneItems = pending.contains { id in
            state.view.liveItem(id) == nil && (folder.id == .root || state.view.isAncestor(folder.id, of: id))
        }
        let isUploaded = folderIsUploaded(folder.id, &state, pending)
        return SyncState(
            itemIdentifier: folder.id.rawValue,
            downloadingStatus: tally.allDownloaded ? .current : .notDownloaded,
            isDownloading: tally.anyDownloading,
            percentDownloaded: tally.allDownloaded ? 100 : min(99.9, tally.percent(tally.downloadedBytes)),
            downloadRequested: tally.anyDownloadRequested, isUploaded: isUploaded,
            isUploading: tally.anyUploading || queuedForGoneItems,
            percentUploaded: isUploaded ? 100 : min(99.9, tally.percent(tally.uploadedBytes)),
            hasUnresolvedConflicts: tally.conflicts,
            downloadingError: tally.downloadingError,
            uploadingError: tally.uploadingError ?? (isUploaded ? nil : state.uploadError),
            isPinned: false)
    }
}

/// A folder's picture summed over its contents as they are visited (a whole container's
/// worth of per-item states is never held at once).
private struct FolderTally {
    var totalBytes: UInt64 = 0
    /// Byte-weighted sums of the items' percentages (percent × bytes).
    var downloadedBytes = 0.0
    var uploadedBytes = 0.0
    var allDownloaded = true
    var anyDownloading = false
    var anyDownloadRequested = false
    var anyUploading = false
    var conflicts = false
    var downloadingError: String?
    var uploadingError: String?

    mutating func add(_ state: SyncState, size: UInt64) {
        totalBytes += size
        downloadedBytes += state.percentDownloaded * Double(size)
        uploadedBytes += state.percentUploaded * Double(size)
        allDownloaded = allDownloaded && state.isDownloaded
        anyDownloading = anyDownloading || state.isDownloading
        anyDownloadRequested = anyDownloadRequested || state.downloadRequested
        anyUploading = anyUploading || state.isUploading
        downloadingError = downloadingError ?? state.downloadingError
        uploadingError = uploadingError ?? state.uploadingError
    }

    /// The byte-weighted percentage (0 for a folder of empty files).
    func percent(_ weightedSum: Double) -> Double {
        totalBytes == 0 ? 0 : weightedSum / Double(totalBytes)
    }
}
