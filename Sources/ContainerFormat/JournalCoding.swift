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
        return commit
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
