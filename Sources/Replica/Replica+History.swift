import ContainerFormat
import Foundation

/// One content version of a file, as `icloudfs versions` lists it.
public struct FileVersion: Codable, Sendable, Equatable {
    /// The journal entry that made it (in the device's view, a change still queued here has
    /// a provisional number until it lands).
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
                    id: ItemID(UUID().uuidString), parent: item.parent, name: name, kind: .file, mode: item.mode,
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
