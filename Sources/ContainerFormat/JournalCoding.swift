import Foundation
import SwiftProtobuf

/// The bytes of journal/SEQ: JSON (formats 1 to 5) or protobuf (format 5,
/// `Protos/journal.proto`), told apart by the first byte (`{` is JSON; a protobuf entry
/// starts with its format field). JSON of a large batch's operations cost more of a device's
/// time than writing the batch's chunks.
///
/// A reader older than format 5 cannot tell a protobuf entry from a damaged one and would
/// skip it: so a device writes protobuf only once the journal holds an entry of format 5
/// before the one it appends (`Tree.nextEntryEncoding`). Those older readers stop at that
/// entry (its format is newer than theirs) instead of skipping what follows it.
public enum JournalCoding {
    public enum Encoding: Sendable {
        case json
        case binary
    }

    public static func encode(_ commit: Commit, as encoding: Encoding) -> Data {
        switch encoding {
        case .json:
            return FormatCoding.encode(commit)
        case .binary:
            var message = JournalEntryMessage()
            message.format = UInt32(commit.format)
            message.commit = commit.commitID
            message.device = commit.device
            message.deviceID = commit.deviceID
            message.time = TimestampMessage(commit.time)
            message.ops = commit.ops.map(OperationMessage.init)
            message.uploaded = commit.uploaded
            if let policy = commit.policy { message.policy = RetentionMessage(policy) }
            if let expire = commit.expire {
                var expiry = ExpiryMessage()
                expiry.versionsBefore = TimestampMessage(expire.versionsBefore)
                expiry.deletedBefore = TimestampMessage(expire.deletedBefore)
                message.expire = expiry
            }
            message.packs = commit.packs.map(PackMessage.init)
            // Serializing a message built here cannot fail (no required fields, no Any).
            return try! message.serializedBytes()
        }
    }

    public static func decode(_ data: Data) throws -> Commit {
        if data.first == UInt8(ascii: "{") { return try FormatCoding.decode(Commit.self, from: data) }
        let message = try JournalEntryMessage(serializedBytes: data)
        // One bad operation must not hide the others (as in JSON): keep those that decode.
        let ops = message.ops.compactMap { try? ItemOperation($0) }
        var commit = Commit(
            format: Int(message.format), commitID: message.commit, device: message.device,
            deviceID: message.deviceID, time: Timestamp(message.time), ops: ops, uploaded: message.uploaded,
            droppedOperations: message.ops.count - ops.count)
        if message.hasPolicy { commit.policy = RetentionPolicy(message.policy) }
        if message.hasExpire {
            commit.expire = Expiry(
                versionsBefore: Timestamp(message.expire.versionsBefore),
                deletedBefore: Timestamp(message.expire.deletedBefore))
        }
        // A record that does not add up locates nothing: its chunks read as missing, never wrong.
        commit.packs = message.packs.compactMap { try? PackRecord($0) }
        return commit
    }
}

extension PackMessage {
    init(_ pack: PackRecord) {
        self.init()
        id = Data(pack.id.bytes)
        chunkHashes = PackedChunks.hashes(pack.chunks.map { ChunkRef(hash: $0.hash, size: $0.size) })
        chunkSizes = pack.chunks.map(\.size)
        chunkOffsets = pack.chunks.map(\.offset)
    }
}

extension PackRecord {
    /// The packs of a map of packed chunks, in one order for the same map (snapshots of one
    /// tree are the same bytes).
    public static func grouping(_ packed: [ChunkHash: PackedLocation]) -> [PackRecord] {
        Dictionary(grouping: packed, by: \.value.pack)
            .map { id, chunks in
                PackRecord(id: id, chunks: chunks.map { $0.value.chunk($0.key) }.sorted { $0.offset < $1.offset })
            }
            .sorted { $0.id < $1.id }
    }

    init(_ message: PackMessage) throws {
        guard message.id.count == ChunkHash.byteCount,
            let refs = PackedChunks.chunks(hashes: message.chunkHashes, sizes: message.chunkSizes),
            message.chunkOffsets.count == refs.count
        else { throw PackError.malformed("a journal entry's pack record does not add up") }
        self.init(
            id: message.id.withUnsafeBytes { ChunkHash(bytes: $0) },
            chunks: zip(refs, message.chunkOffsets).map { PackedChunk(hash: $0.hash, offset: $1, size: $0.size) })
    }
}

/// The JSON form of a pack record (a JSON entry's `packs`: a new container's first entry):
/// `{"pack": HEX, "chunks": [{"hash": HEX, "offset": N, "size": N}, ...]}`.
extension PackRecord: Codable {
    enum CodingKeys: String, CodingKey {
        case pack, chunks
    }

    public init(from decoder: any Swift.Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try ChunkHash.decodeHex(container, .pack)
        chunks = try container.decode([PackedChunk].self, forKey: .chunks)
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.hex, forKey: .pack)
        try container.encode(chunks, forKey: .chunks)
    }
}

extension PackedChunk: Codable {
    enum CodingKeys: String, CodingKey {
        case hash, offset, size
    }

    public init(from decoder: any Swift.Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        hash = try ChunkHash.decodeHex(container, .hash)
        offset = try container.decode(UInt64.self, forKey: .offset)
        size = try container.decode(UInt32.self, forKey: .size)
    }

    public func encode(to encoder: any Swift.Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(hash.hex, forKey: .hash)
        try container.encode(offset, forKey: .offset)
        try container.encode(size, forKey: .size)
    }
}

extension RetentionMessage {
    init(_ policy: RetentionPolicy) {
        self.init()
        versionsSeconds = policy.versions
        deletedSeconds = policy.deleted
        graceSeconds = policy.grace
    }
}

extension RetentionPolicy {
    init(_ message: RetentionMessage) {
        self.init(versions: message.versionsSeconds, deleted: message.deletedSeconds, grace: message.graceSeconds)
    }
}
