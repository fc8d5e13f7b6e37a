import Foundation
import SwiftProtobuf

/// The bytes of snapshots/SEQ. Format 2 is protobuf (`Protos/snapshot.proto`): a new device
/// decodes a 100,000-item snapshot in a fraction of what format 1's JSON took (most of a
/// mount's start-up). Format 1 snapshots, written before, are still read.
public enum SnapshotCoding {
    public static func encode(_ snapshot: Snapshot) -> Data {
        var message = SnapshotMessage()
        message.format = UInt32(snapshot.format)
        message.seq = snapshot.seq
        message.items = snapshot.items.map(ItemMessage.init)
        if let policy = snapshot.policy { message.policy = RetentionMessage(policy) }
        message.journalFormat = UInt32(clamping: snapshot.journalFormat)
        message.packs = PackRecord.grouping(snapshot.packedChunks).map(PackMessage.init)
        // Serializing a message built here cannot fail (no required fields, no Any).
        return try! message.serializedBytes()
    }

    public static func decode(_ data: Data) throws -> Snapshot {
        var snapshot: Snapshot
        if data.first == UInt8(ascii: "{") {
            snapshot = try FormatCoding.decode(Snapshot.self, from: data)  // format 1: JSON
        } else {
            let outline = try SnapshotOutline(serializedBytes: data)
            snapshot = Snapshot(
                format: Int(outline.format), seq: outline.seq, items: try decodeItems(outline.items),
                policy: outline.hasPolicy ? RetentionPolicy(outline.policy) : nil,
                journalFormat: Int(outline.journalFormat))
            // A record that does not add up locates nothing (its chunks read as missing).
            for pack in outline.packs.compactMap({ try? PackRecord($0) }) {
                for chunk in pack.chunks {
                    snapshot.packedChunks[chunk.hash] = PackedLocation(pack: pack.id, offset: chunk.offset, size: chunk.size)
                }
            }
        }
        if snapshot.format < 4 {  // written before names were bytes
            for index in snapshot.items.indices {
                snapshot.items[index].name = NameBytes.literal(snapshot.items[index].name)
                snapshot.items[index].target = snapshot.items[index].target.map(NameBytes.literal)
            }
        }
        return snapshot
    }

    /// The items of a snapshot, in order, decoded on every core (a part of the list each):
    /// a million items took 3 s on one.
    static func decodeItems(_ encoded: [Data]) throws -> [Item] {
        let parts = encoded.count < 20_000 ? 1 : min(ProcessInfo.processInfo.activeProcessorCount, 8)
        let partSize = (encoded.count + parts - 1) / parts
        let decoded = concurrentMap(parts) { part in
            let range = min(part * partSize, encoded.count)..<min((part + 1) * partSize, encoded.count)
            return Result { () throws -> [Item] in
                // One id per folder for the parent of its items (most share one).
                var parents: [String: ItemID] = [:]
                var items: [Item] = []
                items.reserveCapacity(range.count)
                for bytes in encoded[range] {
                    items.append(try Item(ItemMessage(serializedBytes: bytes), parents: &parents))
                }
                return items
            }
        }
        var items: [Item] = []
        items.reserveCapacity(encoded.count)
        for part in decoded { items += try part.get() }
        return items
    }

    /// A copy of `string` in a new allocation. The items outlive the decoded messages; strings
    /// shared with them would be scattered over pages the messages freed, and keep them
    /// resident (about 40 MB for 100,000 items).
    static func fresh(_ string: String) -> String {
        string.withCString { String(cString: $0) }
    }
}

/// Why a snapshot's item could not be read.
struct SnapshotItemError: Error, CustomStringConvertible {
    var description: String
}

extension ItemMessage {
    init(_ item: Item) {
        self.init()
        id = item.id.rawValue
        parent = item.parent.rawValue
        name = item.name
        kind = KindMessage(item.kind)
        mode = item.mode
        mtimeSeconds = item.mtime.seconds
        mtimeNanoseconds = item.mtime.nanoseconds
        size = item.size
        chunkHashes = PackedChunks.hashes(item.chunks)
        chunkSizes = item.chunks.map(\.size)
        if let target = item.target { self.target = target }
        xattrs = [AttributeMessage](item.xattrs)
        version = item.version
        contentVersion = item.contentVersion
        deleted = item.deleted
        if let conflictOf = item.conflictOf { self.conflictOf = conflictOf.rawValue }
        if let contentFrom = item.contentFrom { self.contentFrom = contentFrom.rawValue }
        contentPending = item.isContentPending
        if let owner = item.owner {
            uid = owner.uid
            gid = owner.gid
        }
        if let device = item.device { self.device = device }
        if let ctime = item.ctime {
            ctimeSeconds = ctime.seconds
            ctimeNanoseconds = ctime.nanoseconds
        }
        if let atime = item.atime {
            atimeSeconds = atime.seconds
            atimeNanoseconds = atime.nanoseconds
        }
        if let linkedItem = item.linkedItem { self.linkedItem = linkedItem.rawValue }
        if let contentTime = item.contentTime {
            contentTimeSeconds = contentTime.seconds
            contentTimeNanoseconds = contentTime.nanoseconds
        }
        if let contentDevice = item.contentDevice { self.contentDevice = contentDevice }
        history = (item.history ?? []).map(PastVersionMessage.init)
        if let deletion = item.deletion {
            deletedSeconds = deletion.time.seconds
            deletedNanoseconds = deletion.time.nanoseconds
            deletedBy = deletion.device
        }
    }
}

extension PastVersionMessage {
    init(_ past: PastVersion) {
        self.init()
        seq = past.seq
        timeSeconds = past.time.seconds
        timeNanoseconds = past.time.nanoseconds
        device = past.device
        size = past.size
        chunkHashes = PackedChunks.hashes(past.chunks)
        chunkSizes = past.chunks.map(\.size)
        replacedSeconds = past.replaced.seconds
        replacedNanoseconds = past.replaced.nanoseconds
    }
}

/// A file's past versions in a device's state database: protobuf (`PastVersionsMessage`), the
/// encoding snapshots use for them. A file written often rewrites its history with every
/// change: JSON of its chunk lists cost a sixth of the daemon's time under random writes.
public enum HistoryCoding {
    public static func encode(_ history: [PastVersion]) -> Data {
        var message = PastVersionsMessage()
        message.versions = history.map(PastVersionMessage.init)
        // Serializing a message built here cannot fail (no required fields, no Any).
        return try! message.serializedBytes()
    }

    public static func decode(_ data: Data, of id: String) throws -> [PastVersion] {
        try PastVersionsMessage(serializedBytes: data).versions.map { try PastVersion($0, of: id) }
    }
}

extension PastVersion {
    init(_ message: PastVersionMessage, of id: String) throws {
        guard let chunks = PackedChunks.chunks(hashes: message.chunkHashes, sizes: message.chunkSizes),
            let time = Timestamp(validating: message.timeSeconds, nanoseconds: message.timeNanoseconds),
            let replaced = Timestamp(validating: message.replacedSeconds, nanoseconds: message.replacedNanoseconds)
        else { throw SnapshotItemError(description: "item \(id): a past version is malformed") }
        self.init(seq: message.seq, time: time, device: message.device, size: message.size, chunks: chunks, replaced: replaced)
    }
}

extension Item {
    /// `parents`: the ids already made for each parent (most items share a folder: one
    /// string for all).
    init(_ message: ItemMessage, parents: inout [String: ItemID]) throws {
        guard let chunks = PackedChunks.chunks(hashes: message.chunkHashes, sizes: message.chunkSizes) else {
            throw SnapshotItemError(description: "item \(message.id): chunk hashes and sizes do not match")
        }
        guard let mtime = Timestamp(validating: message.mtimeSeconds, nanoseconds: message.mtimeNanoseconds) else {
            throw SnapshotItemError(description: "item \(message.id): time \(message.mtimeSeconds) s is out of range")
        }
        func time(_ seconds: Int64, _ nanoseconds: UInt32, present: Bool) throws -> Timestamp? {
            guard present else { return nil }
            guard let time = Timestamp(validating: seconds, nanoseconds: nanoseconds) else {
                throw SnapshotItemError(description: "item \(message.id): time \(seconds) s is out of range")
            }
            return time
        }
        let ctime = try time(message.ctimeSeconds, message.ctimeNanoseconds, present: message.hasCtimeSeconds)
        let atime = try time(message.atimeSeconds, message.atimeNanoseconds, present: message.hasAtimeSeconds)
        let contentTime = try time(
            message.contentTimeSeconds, message.contentTimeNanoseconds, present: message.hasContentTimeSeconds)
        let history = message.history.isEmpty ? nil : try message.history.map { try PastVersion($0, of: message.id) }
        let deletion = try time(message.deletedSeconds, message.deletedNanoseconds, present: message.hasDeletedSeconds)
            .map { Deletion(time: $0, device: SnapshotCoding.fresh(message.deletedBy)) }
        let parent = parents[message.parent] ?? ItemID(SnapshotCoding.fresh(message.parent))
        parents[message.parent] = parent
        self.init(
            id: ItemID(SnapshotCoding.fresh(message.id)), parent: parent, name: SnapshotCoding.fresh(message.name),
            kind: try ItemKind(message.kind, of: message.id), mode: message.mode,
            mtime: mtime,
            size: message.size, chunks: chunks, target: message.hasTarget ? message.target : nil,
            xattrs: message.xattrs.dictionary,
            version: message.version, contentVersion: message.contentVersion, deleted: message.deleted,
            conflictOf: message.hasConflictOf ? ItemID(message.conflictOf) : nil,
            contentFrom: message.hasContentFrom ? ItemID(message.contentFrom) : nil,
            isContentPending: message.contentPending,
            owner: message.hasUid || message.hasGid ? Tree.stored(Owner(uid: message.uid, gid: message.gid)) : nil,
            device: message.hasDevice ? message.device : nil,
            ctime: ctime, atime: atime,
            linkedItem: message.hasLinkedItem ? ItemID(SnapshotCoding.fresh(message.linkedItem)) : nil,
            contentTime: contentTime,
            contentDevice: message.hasContentDevice ? SnapshotCoding.fresh(message.contentDevice) : nil,
            history: history, deletion: deletion)
    }
}

extension KindMessage {
    init(_ kind: ItemKind) {
        switch kind {
        case .file: self = .file
        case .folder: self = .folder
        case .symlink: self = .symlink
        case .fifo: self = .fifo
        case .socket: self = .socket
        case .characterDevice: self = .characterDevice
        case .blockDevice: self = .blockDevice
        case .hardLink: self = .hardLink
        }
    }
}

extension ItemKind {
    init(_ message: KindMessage, of id: String) throws {
        switch message {
        case .file: self = .file
        case .folder: self = .folder
        case .symlink: self = .symlink
        case .fifo: self = .fifo
        case .socket: self = .socket
        case .characterDevice: self = .characterDevice
        case .blockDevice: self = .blockDevice
        case .hardLink: self = .hardLink
        case .UNRECOGNIZED(let value): throw SnapshotItemError(description: "item \(id): unknown kind \(value)")
        }
    }
}
