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
    /// Whether reads of `id` can go to its local copy with no download and no record: the
    /// copy is complete and holds the version an open would read.
    public func hasCurrentCompleteCopy(_ id: ItemID) -> Bool {
        state.withLock { state in
            guard let record = state.content[id], record.isComplete else { return false }
            return record.dirty || state.view.liveItem(id)?.chunks == record.chunks
                || state.versionAtOpen[id] == record.chunks
        }
    }

    /// Before the kernel may write `file`'s local copy: the bytes of queued versions still
    /// there are copied aside (the kernel will not ask), and the copy is recorded as written
    /// before any byte lands (as a first `write` is).
    public func beginOutsideWrites(_ file: OpenFile) throws(ReplicaError) {
        let id = file.id
        try fileLocks.withLock(id) { () throws(ReplicaError) in
            try copyQueuedBytesAside(of: id, in: 0..<UInt64.max)
            let firstWrite = state.withLock { state -> ContentRecord? in
                state.outsideWriters[id, default: 0] += 1
                guard let record = state.content[id], !record.dirty else { return nil }
                return record.with(dirty: true)
            }
            if let firstWrite {
                state.withLock { $0.content[id] = firstWrite }
                try saveContent(id, firstWrite)
            }
        }
    }

    /// The kernel stopped writing through `file`: the local copy as it is now is the file's
    /// content (every byte changed, as far as the replica knows). Its close queues it.
    public func endOutsideWrites(_ file: OpenFile) {
        let id = file.id
        var info = stat()
        let size = fstat(file.descriptor, &info) == 0 ? UInt64(max(0, info.st_size)) : nil
        state.withLock { state in
            state.outsideWriters[id, default: 1] -= 1
            if state.outsideWriters[id] == 0 { state.outsideWriters[id] = nil }
            guard let size, var record = state.content[id] else { return }
            record.size = size
            record.present = ByteRanges()
            record.present.insert(0..<size)
            record.dirty = true
            state.content[id] = record
            // Chunked anew from end to end: the replica saw none of the writes.
            state.changedSinceClean[id] = nil
            state.writeGeneration[id, default: 0] += 1
            let now = Timestamp.now()
            state.dirtyMtime[id] = now
            state.dirtyCtime[id] = now
        }
    }
}
