/// `user.openvfs.data`: each file's state as openVFS (the Linux virtual files of OpenCloud
/// and Nextcloud) publishes it, so that tools written for it (a Dolphin overlay plugin) show
/// icloudfs states too: a MessagePack map of `etag`, `fileid`, `pinstate`, `size` and
/// `state`, in that order (as openVFS writes it). Read-only here; docs/SEMANTICS.md
/// "openVFS's attribute" says how the states map.
public struct OpenVFSData: Equatable, Sendable {
    public enum State: UInt8, Sendable {
        case hydrated = 0, dehydrated = 1, hydrating = 2
    }

    public enum PinState: UInt8, Sendable {
        case unspecified = 0, onlineOnly = 1, alwaysLocal = 2, inherited = 3, excluded = 4
    }

    public static let name = "user.openvfs.data"

    public var etag: String
    public var fileID: String
    public var size: UInt64
    public var state: State
    public var pinState: PinState

    public init(etag: String, fileID: String, size: UInt64, state: State, pinState: PinState) {
        self.etag = etag
        self.fileID = fileID
        self.size = size
        self.state = state
        self.pinState = pinState
    }

    /// The MessagePack bytes: a map of five entries, keys in byte order.
    public var encoded: [UInt8] {
        var bytes: [UInt8] = [0x85]
        MessagePack.append(string: "etag", to: &bytes)
        MessagePack.append(string: etag, to: &bytes)
        MessagePack.append(string: "fileid", to: &bytes)
        MessagePack.append(string: fileID, to: &bytes)
        MessagePack.append(string: "pinstate", to: &bytes)
        MessagePack.append(unsigned: UInt64(pinState.rawValue), to: &bytes)
        MessagePack.append(string: "size", to: &bytes)
        MessagePack.append(unsigned: size, to: &bytes)
        MessagePack.append(string: "state", to: &bytes)
        MessagePack.append(unsigned: UInt64(state.rawValue), to: &bytes)
        return bytes
    }
}

/// The two MessagePack types the attribute needs, each in its shortest form (as openVFS's
/// encoder writes them).
enum MessagePack {
    static func append(string: String, to bytes: inout [UInt8]) {
        let utf8 = Array(string.utf8)
        switch utf8.count {
        case ..<32: bytes.append(0xa0 | UInt8(utf8.count))
        case ..<0x100: bytes += [0xd9, UInt8(utf8.count)]
        case ..<0x10000: bytes += [0xda] + bigEndian(UInt64(utf8.count), 2)
        default: bytes += [0xdb] + bigEndian(UInt64(utf8.count), 4)
        }
        bytes += utf8
    }

    static func append(unsigned value: UInt64, to bytes: inout [UInt8]) {
        switch value {
        case ..<0x80: bytes.append(UInt8(value))
        case ..<0x100: bytes += [0xcc, UInt8(value)]
        case ..<0x10000: bytes += [0xcd] + bigEndian(value, 2)
        case ..<0x1_0000_0000: bytes += [0xce] + bigEndian(value, 4)
        default: bytes += [0xcf] + bigEndian(value, 8)
        }
    }

    private static func bigEndian(_ value: UInt64, _ count: Int) -> [UInt8] {
        (0..<count).reversed().map { UInt8(truncatingIfNeeded: value >> (8 * UInt64($0))) }
    }
}
