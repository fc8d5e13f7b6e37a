import ContainerFormat
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Files the kernel reads and writes itself (FUSE passthrough): reads need nothing from the
/// replica, but writes bypass `write`, which records what changed. An open for writing
/// that the kernel serves this way is bracketed by `beginOutsideWrites` and
/// `endOutsideWrites`: the whole file counts as changed, and is queued at the end.
extension Replica {
    /// A file the kernel writes is chunked whole at each commit; above this size it is
    /// queued only when the last such open ends.
    public static let largestFileQueuedWhileWrittenOutside: UInt64 = 16 << 20

    /// The size of the local copy of `id` if reads can go to it with no download and no
    /// record: it is complete and holds the version an open would read. Else nil.
    public func completeCopySize(of id: ItemID) -> UInt64? {
        state.withLock { state in
            guard let record = state.content[id], record.isComplete else { return nil }
            let current =
                record.dirty || state.view.liveItem(id)?.chunks == record.chunks || state.versionAtOpen[id] == record.chunks
            return current ? record.size : nil
        }
    }

    /// Whether the opens of `id` here read a version older than the current one (close-to-open
    /// keeps it for them): at the last close, the kernel's pages and size of it are stale.
    public func keepsOlderVersionForOpens(_ id: ItemID) -> Bool {
        state.withLock { state in
            guard let item = state.view.liveItem(id), let record = state.content[id], !record.dirty else { return false }
            return state.keepsOpenedVersion(item, record)
        }
    }

    /// Before the kernel may write `file`'s local copy: the bytes of queued versions still
    /// there are copied aside (the kernel will not ask), and the copy is recorded as written
    /// before any byte lands (as a first `write` is). `created`: the file was just made (its
    /// create's open): it has no queued version and its record is written already, and
    /// nothing else can reach it before the create is answered (the kernel holds its folder
    /// locked), so there is nothing to copy and no file lock to take.
    public func beginOutsideWrites(_ file: OpenFile, created: Bool = false) throws(ReplicaError) {
        let id = file.id
        var info = stat()
        let modified = fstat(file.descriptor, &info) == 0 ? Timestamp(clamping: Int64(info.st_mtim.tv_sec), nanoseconds: UInt32(clamping: info.st_mtim.tv_nsec)) : nil
        if created { return state.withLock { addOutsideWriter(file, modified, &$0) } }
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            try copyQueuedBytesAside(of: id, in: 0..<UInt64.max)
            let firstWrite = state.withLock { state -> ContentRecord? in
                addOutsideWriter(file, modified, &state)
                let record = recordBeforeWrite(id, &state)
                return record.dirty ? nil : record.with(dirty: true)
            }
            if let firstWrite {
                state.withLock { $0.content[id] = firstWrite }
                do throws(ReplicaError) {
                    try saveContent(id, firstWrite)
                } catch {
                    forgetOutsideWriter(file)  // the open fails: its descriptor is closed next
                    throw error
                }
            }
        }
    }

    /// `file`'s descriptor joins the writers of its copy (`refreshOutsideWritten` looks through
    /// it); `modified`: the copy's mtime now, so that only a write changes the file's time.
    private func addOutsideWriter(_ file: OpenFile, _ modified: Timestamp?, _ state: inout ReplicaState) {
        state.outsideWriters[file.id, default: OutsideWriters(lastSeenModified: modified)].descriptors.append(file.descriptor)
        state.changedSinceClean[file.id] = nil
    }

    /// The kernel stopped writing through `file`: the local copy as it is now is the file's
    /// content (every byte changed, as far as the replica knows). Its close queues it.
    public func endOutsideWrites(_ file: OpenFile) {
        let id = file.id
        refreshOutsideWritten(id, through: file.fd)  // before the count drops: the last one's times still count
        forgetOutsideWriter(file)
    }

    private func forgetOutsideWriter(_ file: OpenFile) {
        state.withLock { state in
            if let index = state.outsideWriters[file.id]?.descriptors.firstIndex(of: file.descriptor) {
                state.outsideWriters[file.id]?.descriptors.remove(at: index)
            }
            if state.outsideWriters[file.id]?.descriptors.isEmpty == true { state.outsideWriters[file.id] = nil }
        }
    }

    /// The attributes of `id`, its local copy taken as it is now if the kernel writes it.
    public func refreshedAttributes(of id: ItemID) throws(ReplicaError) -> ItemAttributes {
        refreshIfWrittenOutside(id)
        return try attributes(of: id)
    }

    /// `refreshOutsideWritten` if the kernel is writing `id`.
    func refreshIfWrittenOutside(_ id: ItemID) {
        if state.withLock({ $0.outsideWriters[id] != nil }) { refreshOutsideWritten(id) }
    }

    /// Takes the local copy of `id`, written by the kernel, as it is now: its size, every
    /// byte present and changed (chunked anew from end to end: the replica saw none of the
    /// writes), and its modification time if the kernel wrote it. `descriptor`: the content
    /// file, if the caller has it open.
    func refreshOutsideWritten(_ id: ItemID, through descriptor: FileDescriptor? = nil) {
        state.withLock { refreshOutsideWritten(id, through: descriptor, &$0) }
    }

    /// `refreshOutsideWritten`, in a hold of the state lock the caller has.
    func refreshOutsideWritten(_ id: ItemID, through descriptor: FileDescriptor?, _ state: inout ReplicaState) {
        // A writer's descriptor stays open while its writer is recorded: one read under the
        // lock is safe to use under it. None: the last writer ended since the caller looked,
        // and that end looked at the file (a look now, by name, would mark the file written
        // again after its close had queued it, and nothing would queue it again).
        guard let fd = descriptor?.rawValue ?? state.outsideWriters[id]?.descriptors.last else {
            return
        }
        // Looked at under the lock: two refreshes at once (a commit's and a release's)
        // must not record the older look last (a file written between them was
        // recorded, and queued, as empty).
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        let size = UInt64(max(0, info.st_size))
        let modified = Timestamp(
            clamping: Int64(info.st_mtim.tv_sec), nanoseconds: UInt32(clamping: info.st_mtim.tv_nsec))
        var record = recordBeforeWrite(id, &state)
        record.size = size
        record.present = ByteRanges([0..<size])
        record.dirty = true
        state.content[id] = record
        state.changedSinceClean[id] = nil
        state.writeGeneration[id, default: 0] += 1
        if state.outsideWriters[id] != nil, state.outsideWriters[id]?.lastSeenModified != modified {
            state.outsideWriters[id]?.lastSeenModified = modified
            state.dirtyMtime[id] = modified
            state.dirtyCtime[id] = modified
        }
    }
}
