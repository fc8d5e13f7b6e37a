import Foundation
import SwiftProtobuf

/// The bytes of a queued local change in a device's state database: protobuf
/// (`Protos/local_change.proto`). Every create, close of a written file and rename queues one,
/// on the caller's thread: JSON cost more than the rest of the queuing. (Changes queued as
/// JSON by earlier versions are rewritten by the state database's migration v3.)
public enum LocalChangeCoding {
    public static func encode(_ change: LocalChange) -> Data {
        var message = LocalChangeMessage()
        message.localID = change.localID
        message.time = TimestampMessage(change.time)
        message.ops = change.ops.map(OperationMessage.init)
        message.dependencies = Dictionary(uniqueKeysWithValues: change.dependencies.map { (Int64($0.key), $0.value) })
        // Serializing a message built here cannot fail (no required fields, no Any).
        return try! message.serializedBytes()
    }

    public static func decode(_ data: Data) throws -> LocalChange {
        let message = try LocalChangeMessage(serializedBytes: data)
        var dependencies: [Int: Int64] = [:]
        for (index, localID) in message.dependencies {
            guard let index = Int(exactly: index), index >= 0 else { throw LocalChangeCodingError.badDependency(index) }
            dependencies[index] = localID
        }
        return LocalChange(
            localID: message.localID, time: Timestamp(message.time), ops: try message.ops.map(ItemOperation.init),
            dependencies: dependencies)
    }
}

enum LocalChangeCodingError: Error, CustomStringConvertible {
    case missingOperation
    case badDependency(Int64)
    case badContent(String)

    var description: String {
        switch self {
        case .missingOperation: "a queued change holds an empty operation"
        case .badDependency(let index): "a queued change names operation \(index)"
        case .badContent(let id): "queued content of \(id): chunk hashes and sizes do not match"
        }
    }
}

/// Chunk lists in protobuf messages: the 32-byte digests end to end, and the sizes.
enum PackedChunks {
    static func hashes(_ chunks: [ChunkRef]) -> Data {
        var hashes = Data(capacity: chunks.count * ChunkHash.byteCount)
        for chunk in chunks { chunk.hash.append(to: &hashes) }
        return hashes
    }

    /// Nil when the hashes do not match the sizes.
    static func chunks(hashes: Data, sizes: [UInt32]) -> [ChunkRef]? {
        guard hashes.count == sizes.count * ChunkHash.byteCount else { return nil }
        return hashes.withUnsafeBytes { hashes in
            sizes.enumerated().map { index, size in
                let start = index * ChunkHash.byteCount
                let bytes = UnsafeRawBufferPointer(rebasing: hashes[start..<start + ChunkHash.byteCount])
                return ChunkRef(hash: ChunkHash(bytes: bytes), size: size)
            }
        }
    }
}

extension TimestampMessage {
    init(_ time: Timestamp) {
        self.init()
        seconds = time.seconds
        nanoseconds = time.nanoseconds
    }
}

extension Timestamp {
    init(_ message: TimestampMessage) {
        self.init(clamping: message.seconds, nanoseconds: message.nanoseconds)
    }
}

extension ContentMessage {
    init(_ content: Content) {
        self.init()
        size = content.size
        chunkHashes = PackedChunks.hashes(content.chunks)
        chunkSizes = content.chunks.map(\.size)
    }
}

extension Content {
    init(_ message: ContentMessage, of id: String) throws {
        guard let chunks = PackedChunks.chunks(hashes: message.chunkHashes, sizes: message.chunkSizes) else {
            throw LocalChangeCodingError.badContent(id)
        }
        self.init(size: message.size, chunks: chunks)
    }
}

extension [AttributeMessage] {
    init(_ xattrs: [String: Data]) {
        self = xattrs.sorted { $0.key < $1.key }.map { name, value in
            var attribute = AttributeMessage()
            attribute.name = name
            attribute.value = value
            return attribute
        }
    }

    var dictionary: [String: Data] {
        Dictionary(map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }
}

extension OperationMessage {
    init(_ operation: ItemOperation) {
        self.init()
        switch operation {
        case .create(let op):
            var message = CreateMessage()
            message.id = op.id.rawValue
            message.parent = op.parent.rawValue
            message.name = op.name
            message.kind = KindMessage(op.kind)
            message.mode = op.mode
            message.mtime = TimestampMessage(op.mtime)
            message.content = ContentMessage(op.content)
            if let target = op.target { message.target = target }
            message.xattrs = [AttributeMessage](op.xattrs)
            if let pending = op.contentPending { message.contentPending = pending }
            if let owner = op.owner {
                message.uid = owner.uid
                message.gid = owner.gid
            }
            if let device = op.device { message.device = device }
            if let linkedItem = op.linkedItem { message.linkedItem = linkedItem.rawValue }
            if let nameTime = op.nameTime { message.nameTime = TimestampMessage(nameTime) }
            if let ctime = op.ctime { message.ctime = TimestampMessage(ctime) }
            if let atime = op.atime { message.atime = TimestampMessage(atime) }
            create = message
        case .update(let op):
            var message = UpdateMessage()
            message.id = op.id.rawValue
            message.base = op.base
            if let content = op.content { message.content = ContentMessage(content) }
            if let mode = op.mode { message.mode = mode }
            if let mtime = op.mtime { message.mtime = TimestampMessage(mtime) }
            if let xattrs = op.xattrs {
                var attributes = AttributesMessage()
                attributes.items = [AttributeMessage](xattrs)
                message.xattrs = attributes
            }
            if let pending = op.contentPending { message.contentPending = pending }
            if let owner = op.owner {
                message.uid = owner.uid
                message.gid = owner.gid
            }
            if let atime = op.atime { message.atime = TimestampMessage(atime) }
            if let ctime = op.ctime { message.ctime = TimestampMessage(ctime) }
            update = message
        case .move(let op):
            var message = MoveMessage()
            message.id = op.id.rawValue
            message.base = op.base
            message.parent = op.parent.rawValue
            message.name = op.name
            if let ctime = op.ctime { message.ctime = TimestampMessage(ctime) }
            move = message
        case .delete(let op):
            var message = DeleteMessage()
            message.id = op.id.rawValue
            message.base = op.base
            if let ctime = op.ctime { message.ctime = TimestampMessage(ctime) }
            delete = message
        }
    }
}

extension ItemOperation {
    init(_ message: OperationMessage) throws {
        switch message.operation {
        case .create(let m):
            var op = ItemOperation.Create(
                id: ItemID(m.id), parent: ItemID(m.parent), name: m.name, kind: try ItemKind(m.kind, of: m.id),
                mode: m.mode, mtime: Timestamp(m.mtime), content: try Content(m.content, of: m.id),
                target: m.hasTarget ? m.target : nil, xattrs: m.xattrs.dictionary)
            op.contentPending = m.hasContentPending ? m.contentPending : nil
            op.owner = m.hasUid ? Owner(uid: m.uid, gid: m.gid) : nil
            op.device = m.hasDevice ? m.device : nil
            op.linkedItem = m.hasLinkedItem ? ItemID(m.linkedItem) : nil
            op.nameTime = m.hasNameTime ? Timestamp(m.nameTime) : nil
            op.ctime = m.hasCtime ? Timestamp(m.ctime) : nil
            op.atime = m.hasAtime ? Timestamp(m.atime) : nil
            self = .create(op)
        case .update(let m):
            var op = ItemOperation.Update(
                id: ItemID(m.id), base: m.base, content: m.hasContent ? try Content(m.content, of: m.id) : nil,
                mode: m.hasMode ? m.mode : nil, mtime: m.hasMtime ? Timestamp(m.mtime) : nil,
                xattrs: m.hasXattrs ? m.xattrs.items.dictionary : nil)
            op.contentPending = m.hasContentPending ? m.contentPending : nil
            op.owner = m.hasUid ? Owner(uid: m.uid, gid: m.gid) : nil
            op.atime = m.hasAtime ? Timestamp(m.atime) : nil
            op.ctime = m.hasCtime ? Timestamp(m.ctime) : nil
            self = .update(op)
        case .move(let m):
            var op = ItemOperation.Move(id: ItemID(m.id), base: m.base, parent: ItemID(m.parent), name: m.name)
            op.ctime = m.hasCtime ? Timestamp(m.ctime) : nil
            self = .move(op)
        case .delete(let m):
            var op = ItemOperation.Delete(id: ItemID(m.id), base: m.base)
            op.ctime = m.hasCtime ? Timestamp(m.ctime) : nil
            self = .delete(op)
        case nil:
            throw LocalChangeCodingError.missingOperation
        }
    }
}
