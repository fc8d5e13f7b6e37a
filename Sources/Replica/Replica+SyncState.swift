import ContainerFormat

/// The `user.icloud.*` picture of an item: per file, and aggregated over a folder's
/// contents (byte-weighted percentages), so the mount root shows the whole container.
extension Replica {
    public func syncState(of id: ItemID) throws(ReplicaError) -> SyncState {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.liveItem(id) else { throw .notFound }
            let pending = state.itemsWithPendingChanges
            if item.kind != .folder { return fileState(item, state, pending) }
            return folderState(item, state, pending)
        }
    }

    private func fileState(_ item: Item, _ state: ReplicaState, _ pending: Set<ItemID>) -> SyncState {
        let record = state.content[item.id]
        let matchesVersion = record.map { $0.dirty || ($0.chunks == item.chunks && $0.size == item.size) } ?? false
        let status: SyncState.DownloadingStatus
        let percentDownloaded: Double
        if item.kind != .file || item.size == 0 || (matchesVersion && record!.isComplete) {
            status = .current
            percentDownloaded = 100
        } else if let record, record.isComplete, record.size > 0 {
            status = .downloaded
            percentDownloaded = 0
        } else {
            status = .notDownloaded
            percentDownloaded = matchesVersion ? Double(record!.present.coveredBytes(below: item.size)) * 100 / Double(item.size) : 0
        }
        // Metadata first: this device still owes the chunks, or another device does.
        let owedHere = item.isContentPending && state.owed[item.contentVersion] != nil
        let isUploading = pending.contains(item.id) || record?.dirty == true || owedHere
        let isUploaded = !isUploading && !item.isContentPending
        return SyncState(
            itemIdentifier: item.id.rawValue, downloadingStatus: status,
            isDownloading: state.downloading.contains(item.id), percentDownloaded: percentDownloaded,
            downloadRequested: state.downloadRequested.contains(item.id), isUploaded: isUploaded,
            isUploading: isUploading,
            percentUploaded: isUploaded ? 100 : isUploading ? uploadedShare(of: item, state) : 0,
            hasUnresolvedConflicts: state.view.hasUnresolvedConflicts(item.id),
            downloadingError: state.downloadErrors[item.id], uploadingError: isUploading ? state.uploadError : nil,
            isPinned: isPinned(item.id, state))
    }

    /// Share of the bytes of the newest queued content of `id` already in the store.
    private func uploadedShare(of item: Item, _ state: ReplicaState) -> Double {
        let newest = state.device.pending.reversed().lazy.flatMap(\.ops).first { $0.itemID == item.id && !$0.chunks.isEmpty }
        guard let chunks = newest?.chunks ?? (item.isContentPending ? item.chunks : nil) else { return 0 }
        let total = chunks.reduce(0) { $0 + UInt64($1.size) }
        let stored = chunks.filter { state.storedChunks.contains($0.hash) }.reduce(0) { $0 + UInt64($1.size) }
        return total == 0 ? 0 : Double(stored) * 100 / Double(total)
    }

    private func folderState(_ folder: Item, _ state: ReplicaState, _ pending: Set<ItemID>) -> SyncState {
        var all = folder.id == .root ? [] : [fileState(folder, state, pending)]
        var sizes: [UInt64] = all.map { _ in 0 }
        var conflicts = false
        var stack = [folder.id]
        while let next = stack.popLast() {
            for child in state.view.children(of: next) {
                guard let item = state.liveItem(child.id) else { continue }
                conflicts = conflicts || state.view.hasUnresolvedConflicts(item.id)
                if item.kind == .folder {
                    stack.append(item.id)
                    all.append(fileState(item, state, pending))
                    sizes.append(0)
                } else {
                    all.append(fileState(item, state, pending))
                    sizes.append(item.size)
                }
            }
        }
        let totalBytes = sizes.reduce(0, +)
        func weighted(_ percent: (SyncState) -> Double, whenEmpty: Bool) -> Double {
            guard totalBytes > 0 else { return whenEmpty ? 100 : 0 }
            return zip(all, sizes).reduce(0.0) { $0 + percent($1.0) * Double($1.1) } / Double(totalBytes)
        }
        // Queued deletes (and moves away) concern items no longer listed here.
        let queuedForGoneItems = pending.contains { id in
            state.view.liveItem(id) == nil && (folder.id == .root || state.view.isAncestor(folder.id, of: id))
        }
        let isUploaded = all.allSatisfy(\.isUploaded) && !queuedForGoneItems
        let isDownloaded = all.allSatisfy(\.isDownloaded)
        return SyncState(
            itemIdentifier: folder.id.rawValue,
            downloadingStatus: isDownloaded ? .current : .notDownloaded,
            isDownloading: all.contains(where: \.isDownloading),
            percentDownloaded: isDownloaded ? 100 : min(99.9, weighted(\.percentDownloaded, whenEmpty: false)),
            downloadRequested: all.contains(where: \.downloadRequested), isUploaded: isUploaded,
            isUploading: all.contains(where: \.isUploading) || queuedForGoneItems, percentUploaded: isUploaded ? 100 : min(99.9, weighted(\.percentUploaded, whenEmpty: false)),
            hasUnresolvedConflicts: conflicts,
            downloadingError: all.lazy.compactMap(\.downloadingError).first,
            uploadingError: all.lazy.compactMap(\.uploadingError).first ?? (isUploaded ? nil : state.uploadError),
            isPinned: isPinned(folder.id, state))
    }
}
