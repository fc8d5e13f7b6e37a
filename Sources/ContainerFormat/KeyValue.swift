import Foundation

/// A value of a container's key-value store (docs/FORMAT.md "kv/SEQ"): what a property list
/// holds, written as JSON. JSON's `null` is not a value (a key is removed instead).
public indirect enum KeyValue: Sendable, Equatable, Codable {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    case string(String)
    case array([KeyValue])
    case dictionary([String: KeyValue])

    public init(from decoder: any Decoder) throws {
        let single = try decoder.singleValueContainer()
        if let value = try? single.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? single.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? single.decode(Double.self) {
            self = .real(value)
        } else if let value = try? single.decode(String.self) {
            self = .string(value)
        } else if let value = try? single.decode([KeyValue].self) {
            self = .array(value)
        } else if let value = try? single.decode([String: KeyValue].self) {
            self = .dictionary(value)
        } else {
            throw DecodingError.dataCorruptedError(
                in: single, debugDescription: "not a key-value store value (null, or not JSON)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        switch self {
        case .bool(let value): try single.encode(value)
        case .integer(let value): try single.encode(value)
        case .real(let value): try single.encode(value)
        case .string(let value): try single.encode(value)
        case .array(let value): try single.encode(value)
        case .dictionary(let value): try single.encode(value)
        }
    }

    /// The value of JSON text (a command's argument); nil if it is not JSON or is `null`.
    public init?(json: String) {
        guard let value = try? JSONDecoder().decode(KeyValue.self, from: Data(json.utf8)) else { return nil }
        self = value
    }

    /// Its JSON text, keys sorted: what `kv get` prints and what the quota counts.
    public var json: String { String(decoding: FormatCoding.encode(self), as: UTF8.self) }
}

/// The limits of one container's key-value store, as Apple's `NSUbiquitousKeyValueStore`
/// has them (docs/SEMANTICS.md "The key-value store").
public enum KeyValueLimits {
    /// Keys and values (as JSON) of all keys together, in bytes.
    public static let totalBytes = 1 << 20
    public static let keys = 1024
    /// A key's length in bytes of UTF-8.
    public static let keyBytes = 64

    /// Why `key` cannot be a key, or nil.
    public static func problem(withKey key: String) -> String? {
        if key.isEmpty { return "a key cannot be empty" }
        if key.utf8.count > keyBytes { return "key \(key.debugDescription) is \(key.utf8.count) bytes; at most \(keyBytes) bytes of UTF-8" }
        return nil
    }

    /// Why `values` cannot be the whole store, or nil.
    public static func problem(withStore values: [String: KeyValue]) -> String? {
        if values.count > keys {
            return "the store would hold \(values.count) keys; at most \(keys)"
        }
        let bytes = values.reduce(0) { $0 + $1.key.utf8.count + $1.value.json.utf8.count }
        if bytes > totalBytes {
            return "the store would hold \(bytes) bytes; at most \(totalBytes) (1 MiB) for keys and values together"
        }
        return nil
    }
}

/// One change of the key-value store as a device made it: keys set and removed at one time,
/// all or none (an object `kv/SEQ` in the store, appended as journal entries are).
public struct KeyValueRecord: Codable, Sendable, Equatable {
    public var format = 1
    public var device: String
    public var deviceID: String
    public var time: Timestamp
    public var set: [String: KeyValue]
    public var removed: [String]

    public init(device: String, deviceID: String, time: Timestamp, set: [String: KeyValue], removed: [String]) {
        self.device = device
        self.deviceID = deviceID
        self.time = time
        self.set = set
        self.removed = removed
    }

    public static let currentFormat = 1
    /// A record is small (the whole store is at most 1 MiB); anything larger is not one.
    public static let maximumSize: UInt64 = 4 << 20

    public static func decode(_ data: Data) throws -> KeyValueRecord {
        let record = try FormatCoding.decode(KeyValueRecord.self, from: data)
        guard record.format <= currentFormat else {
            throw FormatError.unsupportedFormat(what: "key-value record", version: record.format)
        }
        return record
    }
}

/// The merged key-value store: per key the latest write by time wins (ties: the larger
/// device id), a removal included, so devices that applied the same records in any order
/// hold the same values. Removed keys are kept as such to order later writes against them.
public struct KeyValueTable: Codable, Sendable, Equatable {
    public struct Entry: Codable, Sendable, Equatable {
        public var value: KeyValue?
        public var time: Timestamp
        public var deviceID: String

        func isOlder(than other: Entry) -> Bool {
            (time, deviceID) < (other.time, other.deviceID)
        }
    }

    public private(set) var entries: [String: Entry] = [:]

    public init() {}

    /// The keys with a value.
    public var values: [String: KeyValue] { entries.compactMapValues(\.value) }

    public func value(of key: String) -> KeyValue? { entries[key]?.value }

    /// Applies `record`; returns the keys whose value changed.
    @discardableResult
    public mutating func apply(_ record: KeyValueRecord) -> [String] {
        var changed: [String] = []
        let writes = record.set.map { ($0.key, Optional($0.value)) } + record.removed.map { ($0, KeyValue?.none) }
        for (key, value) in writes {
            let entry = Entry(value: value, time: record.time, deviceID: record.deviceID)
            if let current = entries[key], !current.isOlder(than: entry) { continue }
            if entries[key]?.value != value { changed.append(key) }
            entries[key] = entry
        }
        return changed.sorted()
    }
}
