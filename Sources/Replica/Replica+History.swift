import ContainerFormat
import Foundation

/// One content version of a file, as `icloudfs versions` lists it.
public struct FileVersion: Codable, Sendable, Equatable {
    /// The journal entry that made it (in the device's view, a change still queued here has
    /// a provisional number, `DeviceView.provisionalSeq`, until it lands).
    public var seq: UInt64
    public var time: Timestamp
    public var device: String
    public var size: UInt64
    public var current: Bool
}

/// A file's content history: its versions, and restoring one (a normal change).
extension Replica {
    /// The file's versions, newest first: the current content and the earlier ones kept.
    public func versions(of id: ItemID) throws(ReplicaError) -> [FileVersion] {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            guard item.kind == .file else { throw .invalidArgument("only files have versions") }
            let current = FileVersion(
                seq: item.contentVersion, time: item.contentTime ?? item.mtime, device: item.contentDevice ?? "",
                size: item.size, current: true)
            let past = (item.history ?? []).reversed().map {
                FileVersion(seq: $0.seq, time: $0.time, device: $0.device, size: $0.size, current: false)
            }
            return [current] + past
        }
    }

    /// Makes version `seq` of the file its content again (a change like an edit: it syncs,
    /// and conflicts with a concurrent edit as any edit does), or with `name`, a new file
    /// beside it holding that version. Either way the content is the store's: read, it
    /// downloads like a placeholder.
    public func restore(_ id: ItemID, version seq: UInt64, as name: String? = nil) throws(ReplicaError) {
        if let name, let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        let dropped = try state.withLock { state throws(ReplicaError) -> Bool in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            guard item.kind == .file else { throw .invalidArgument("only files have versions") }
            let content: Content
            if item.contentVersion == seq {
                content = Content(size: item.size, chunks: item.chunks)
            } else if let past = item.history?.last(where: { $0.seq == seq }) {
                content = Content(size: past.size, chunks: past.chunks)
            } else {
                throw .invalidArgument("no version \(seq) of this file is kept (icloudfs versions lists them)")
            }
            let now = Timestamp.now()
            if let name {
                guard state.view.child(named: name, in: item.parent) == nil else { throw .exists }
                enqueue([(.create(.init(
                    id: RandomID.makeItemID(), parent: item.parent, name: name, kind: .file, mode: item.mode,
                    mtime: now, content: content, xattrs: item.xattrs, owner: item.owner)), nil)], &state)
                return false
            }
            guard item.contentVersion != seq else { return false }
            guard state.openCount[id] == nil, state.content[id]?.dirty != true else {
                throw .busy("the file is open or being written here")
            }
            let base = state.device.base(of: id)
            // The local copy holds the version being replaced: it goes, the file reads as a
            // placeholder of the restored one.
            state.content[id] = nil
            state.changedSinceClean[id] = nil
            enqueue([(.update(.init(id: id, base: 0, content: content, mtime: now)), base)], &state, content: [id])
            return true
        }
        if dropped { files.removeContent(id) }
    }
}

/// A deleted file or folder still kept, as `icloudfs deleted` lists it.
public struct DeletedItem: Codable, Sendable, Equatable {
    public var id: String
    /// Where it was, from the container's top (`/`-joined names).
    public var path: String
    public var folder: Bool
    public var size: UInt64
    public var time: Timestamp
    public var device: String
}

/// Recently deleted items: listing them, and bringing one back.
extension Replica {
    /// How long before a folder's deletion the deletions below it by the same device count as
    /// one (`rm -r` removes the files first): those come back with it.
    static let deletedTogether: Int64 = 600

    /// Deleted files and folders, newest first; with `path`, only those at or below it.
    public func deletedItems(under path: String? = nil) -> [DeletedItem] {
        state.withLock { state in
            let tree = state.view
            return tree.allIDs.compactMap { id -> DeletedItem? in
                guard let item = tree.item(id), item.deleted, !tree.isLive(id), item.kind != .hardLink,
                    let deletion = item.deletion, let itemPath = tree.path(of: id)
                else { return nil }
                if let path, !path.isEmpty, itemPath != path, !itemPath.hasPrefix(path + "/") { return nil }
                return DeletedItem(
                    id: id.rawValue, path: itemPath, folder: item.kind == .folder, size: item.size,
                    time: deletion.time, device: deletion.device)
            }.sorted { ($0.time, $0.path) > ($1.time, $1.path) }
        }
    }

    /// Brings a deleted item back where it was (its folder too, if that was deleted), or
    /// under `name` in that folder; a folder comes back with what was deleted with it.
    /// Returns its path. A change like a rename: it syncs.
    public func undelete(_ id: ItemID, as name: String? = nil) throws(ReplicaError) -> String {
        if let name, let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        return try state.withLock { state throws(ReplicaError) in
            let tree = state.view
            guard let item = tree.item(id), item.deleted, !tree.isLive(id), item.kind != .hardLink,
                let deletion = item.deletion
            else { throw .notFound }
            var ops: [(ItemOperation, BaseVersion?)] = [
                (.move(.init(id: id, base: 0, parent: item.parent, name: name ?? item.name)), nil)
            ]
            if item.kind == .folder {
                let together = tree.allIDs.compactMap { tree.item($0) }.filter { below in
                    guard below.deleted, let when = below.deletion, when.device == deletion.device,
                        when.time <= deletion.time, when.time.seconds >= deletion.time.seconds - Replica.deletedTogether
                    else { return false }
                    return tree.isAncestor(id, of: below.id)
                }
                // Folders before what they hold.
                let depth = { (item: Item) -> Int in
                    var depth = 0
                    var current = item.parent
                    while current != id, let parent = tree.item(current), depth < Tree.maximumDepth {
                        depth += 1
                        current = parent.parent
                    }
                    return depth
                }
                for below in together.sorted(by: { depth($0) < depth($1) }) {
                    ops.append((.move(.init(id: below.id, base: 0, parent: below.parent, name: below.name)), nil))
                }
            }
            enqueue(ops, &state)
            return state.view.path(of: id) ?? item.name
        }
    }
}

/// The container's retention policy (FORMAT.md "Retention").
extension Replica {
    /// The policy the journal set, as far as this device has read it.
    public var retentionPolicy: RetentionPolicy {
        synced.withLock { $0.policy ?? .standard }
    }

    /// Sets the container's policy: an entry of its own, written now (not queued: it needs
    /// the store), which every device folds.
    public func setRetentionPolicy(_ policy: RetentionPolicy) async throws {
        try await syncLock.withLock {
            try await pullUnlocked()
            var commit = Commit(
                commitID: RandomID.make(), device: configuration.deviceName, deviceID: deviceID, time: .now(), ops: [])
            commit.policy = policy
            try await appendAtNextFreeNumber { _, _ in commit }
        }
    }
}
