import Foundation

/// One journal entry: a batch of operations by one device, applied in order.
public struct Commit: Hashable, Codable, Sendable {
    /// 2: operations may carry owners (`Owner`); format 1 entries are read as owned by 0.
    /// 3: hard links (items of kind `link`), and names as bytes (`NameBytes`).
    /// 4: retention (`policy`, `expire`).
    /// 5: entries may be protobuf (`JournalCoding`) after the first entry of format 5.
    /// 6: entries may name packs (`packs`).
    /// 7: a create may carry its file's first content (`nameTime`).
    /// 8: a create may carry attributes set after it was made (`ctime`, `atime`).
    public static let formatVersion = 8

    public var format: Int
    /// Random, chosen once per queued commit: lets a device recognise its own commit after a
    /// crash, so that a retry never writes the same change twice.
    public var commitID: String
    /// The device name shown in conflict copies.
    public var device: String
    public var deviceID: String
    /// The device's clock when it queued the commit (used for conflict copy names).
    public var time: Timestamp
    public var ops: [ItemOperation]
    /// Journal entries of this device whose pending content (metadata first) is now
    /// entirely in the store.
    public var uploaded: [UInt64]
    /// A new retention policy (`icloudfs policy`).
    public var policy: RetentionPolicy?
    /// What the retention period no longer keeps goes (written by the collector).
    public var expire: Expiry?
    /// Packs holding chunks this entry names (format 6).
    public var packs: [PackRecord] = []

    public init(
        commitID: String, device: String, deviceID: String, time: Timestamp, ops: [ItemOperation],
        uploaded: [UInt64] = []
    ) {
        self.init(
            format: Commit.formatVersion, commitID: commitID, device: device, deviceID: deviceID, time: time, ops: ops,
            uploaded: uploaded, droppedOperations: 0)
    }

    /// A decoded entry (`JournalCoding`).
    init(
        format: Int, commitID: String, device: String, deviceID: String, time: Timestamp, ops: [ItemOperation],
        uploaded: [UInt64], droppedOperations: Int
    ) {
        self.format = format
        self.commitID = commitID
        self.device = device
        self.deviceID = deviceID
        self.time = time
        self.ops = ops
        self.uploaded = uploaded
        self.droppedOperations = droppedOperations
    }

    enum CodingKeys: String, CodingKey {
        case format, commitID = "commit", device, deviceID, time, ops, uploaded, policy, expire, packs
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decode(Int.self, forKey: .format)
        commitID = try container.decode(String.self, forKey: .commitID)
        device = try container.decode(String.self, forKey: .device)
        deviceID = try container.decode(String.self, forKey: .deviceID)
        time = try container.decode(Timestamp.self, forKey: .time)
        // One bad operation must not hide the others: keep those that decode.
        let decoded = try container.decode([LossyOperation].self, forKey: .ops)
        ops = decoded.compactMap(\.operation)
        if format < 3 { ops = ops.map { $0.withLiteralNames() } }
        droppedOperations = decoded.count - ops.count
        uploaded = try container.decodeIfPresent([UInt64].self, forKey: .uploaded) ?? []
        policy = try container.decodeIfPresent(RetentionPolicy.self, forKey: .policy)
        expire = try container.decodeIfPresent(Expiry.self, forKey: .expire)
        packs = try container.decodeIfPresent([PackRecord].self, forKey: .packs) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(format, forKey: .format)
        try container.encode(commitID, forKey: .commitID)
        try container.encode(device, forKey: .device)
        try container.encode(deviceID, forKey: .deviceID)
        try container.encode(time, forKey: .time)
        try container.encode(ops, forKey: .ops)
        if !uploaded.isEmpty { try container.encode(uploaded, forKey: .uploaded) }
        try container.encodeIfPresent(policy, forKey: .policy)
        try container.encodeIfPresent(expire, forKey: .expire)
        if !packs.isEmpty { try container.encode(packs, forKey: .packs) }
    }

    /// Not encoded; how many operations of a decoded entry could not be read.
    public private(set) var droppedOperations: Int = 0

    public static func == (lhs: Commit, rhs: Commit) -> Bool {
        lhs.format == rhs.format && lhs.commitID == rhs.commitID && lhs.device == rhs.device
            && lhs.deviceID == rhs.deviceID && lhs.time == rhs.time && lhs.ops == rhs.ops
            && lhs.uploaded == rhs.uploaded && lhs.policy == rhs.policy && lhs.expire == rhs.expire
            && lhs.packs == rhs.packs
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(commitID)
    }
}

private struct LossyOperation: Decodable {
    var operation: ItemOperation?

    init(from decoder: any Decoder) throws {
        operation = try? ItemOperation(from: decoder)
    }
}

/// The one JSON form of everything the format stores: sorted keys, so equal values give
/// equal bytes on every device.
public enum FormatCoding {
    public static func encode(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding our own value types cannot fail.
        return try! encoder.encode(value)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try JSONDecoder().decode(type, from: data)
    }
}
