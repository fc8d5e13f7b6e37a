import Foundation

/// The stable identity of an item: survives renames and moves. Chosen by the device that
/// creates the item (a random UUID), or derived by the fold (conflict copies).
public struct ItemID: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The container's top folder; it always exists.
    public static let root = ItemID("root")

    public var description: String { rawValue }

    public static func < (lhs: ItemID, rhs: ItemID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Ids from the store are untrusted: 1 to 255 bytes of `[A-Za-z0-9._@~-]`.
    public var isValid: Bool {
        let bytes = rawValue.utf8
        return !bytes.isEmpty && bytes.count <= 255
            && bytes.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                    UInt8(ascii: "@"), UInt8(ascii: "~"), UInt8(ascii: "-"):
                    true
                default:
                    false
                }
            }
    }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// An item's owner and group, as numbers (as tar and rsync keep them across machines).
public struct Owner: Hashable, Codable, Sendable {
    public var uid: UInt32
    public var gid: UInt32

    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }

    /// What items stored before owners were (and those with no owner given) belong to.
    public static let root = Owner(uid: 0, gid: 0)
}

public enum ItemKind: String, Codable, Sendable {
    case file, folder, symlink
    /// Special files (format 2): names with a mode, owner and times, never content; the
    /// kernel serves them (a FIFO's bytes never reach the mount, let alone the store).
    case fifo, socket
    case characterDevice = "char", blockDevice = "block"
    /// A hard link (format 3): one more name of another item (`Item.linkedItem`), which
    /// holds the content and attributes every name of it shows.
    case hardLink = "link"

    public var isSpecial: Bool {
        switch self {
        case .file, .folder, .symlink, .hardLink: false
        case .fifo, .socket, .characterDevice, .blockDevice: true
        }
    }

    /// Whether another name may be linked to an item of this kind (`link(2)`: not folders).
    public var isLinkable: Bool {
        switch self {
        case .folder, .hardLink: false
        case .file, .symlink, .fifo, .socket, .characterDevice, .blockDevice: true
        }
    }
}

/// A point in time as seconds and nanoseconds since 1970 (UTC), exact in JSON.
public struct Timestamp: Hashable, Comparable, Codable, Sendable {
    public var seconds: Int64
    public var nanoseconds: UInt32

    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static let zero = Timestamp(seconds: 0)

    /// Seconds a stored time may hold: about ±34,000 years, far beyond any filesystem's
    /// range, yet small enough that calendar arithmetic on it never overflows. Times are
    /// read from the store (untrusted): anything outside fails to decode.
    public static let validSeconds: ClosedRange<Int64> = -(1 << 40)...(1 << 40)

    /// `seconds` and `nanoseconds` if they make a valid time, else nil.
    public init?(validating seconds: Int64, nanoseconds: UInt32) {
        guard Timestamp.validSeconds.contains(seconds), nanoseconds < 1_000_000_000 else { return nil }
        self.init(seconds: seconds, nanoseconds: nanoseconds)
    }

    /// The nearest valid time (as ext4 clamps times outside its range): for times a local
    /// program sets with `utimensat`.
    public init(clamping seconds: Int64, nanoseconds: UInt32) {
        let clamped = min(max(seconds, Timestamp.validSeconds.lowerBound), Timestamp.validSeconds.upperBound)
        self.init(seconds: clamped, nanoseconds: min(nanoseconds, 999_999_999))
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let seconds = try container.decode(Int64.self, forKey: .seconds)
        let nanoseconds = try container.decode(UInt32.self, forKey: .nanoseconds)
        guard let time = Timestamp(validating: seconds, nanoseconds: nanoseconds) else {
            throw DecodingError.dataCorruptedError(
                forKey: .seconds, in: container, debugDescription: "time \(seconds) s \(nanoseconds) ns is out of range")
        }
        self = time
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    enum CodingKeys: String, CodingKey {
        case seconds = "s"
        case nanoseconds = "ns"
    }
}

/// One content-defined piece of a file: its hash names it in `chunks/`.
public struct ChunkRef: Hashable, Codable, Sendable {
    public var hash: ChunkHash
    public var size: UInt32

    public init(hash: ChunkHash, size: UInt32) {
        self.hash = hash
        self.size = size
    }

    enum CodingKeys: String, CodingKey {
        case hash, size
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        hash = try ChunkHash.decodeHex(container, .hash)
        size = try container.decode(UInt32.self, forKey: .size)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(hash.hex, forKey: .hash)
        try container.encode(size, forKey: .size)
    }
}

/// An earlier content of a file, kept for `icloudfs versions` and `restore` (see FORMAT.md
/// "History").
public struct PastVersion: Hashable, Codable, Sendable {
    /// The journal entry that made it (the file's `contentVersion` then).
    public var seq: UInt64
    /// When and by which device it was made (the commit's time and device).
    public var time: Timestamp
    public var device: String
    public var size: UInt64
    public var chunks: [ChunkRef]
    /// When a later content replaced it: it is kept for the retention period from then.
    public var replaced: Timestamp

    public init(seq: UInt64, time: Timestamp, device: String, size: UInt64, chunks: [ChunkRef], replaced: Timestamp) {
        self.seq = seq
        self.time = time
        self.device = device
        self.size = size
        self.chunks = chunks
        self.replaced = replaced
    }
}

/// When and by which device an item was deleted (the commit's time and device).
public struct Deletion: Hashable, Codable, Sendable {
    public var time: Timestamp
    public var device: String

    public init(time: Timestamp, device: String) {
        self.time = time
        self.device = device
    }
}

/// An item of the container's tree as the fold of the journal leaves it.
///
/// A tree holds one per item, so its size is most of a large container's memory: fields
/// most items leave nil live in one shared box (``Item/Rare``), and the stored properties
/// are ordered so that little is lost to alignment (192 bytes instead of 320).
public struct Item: Hashable, Sendable {
    public var id: ItemID
    public var parent: ItemID
    public var name: String
    public var chunks: [ChunkRef]
    /// Extended attributes by full name (`user.foo`, `security.capability`, POSIX ACLs;
    /// see `AttributeName`); never `user.icloud.*`.
    public var xattrs: [String: Data] { didSet { FileCapabilities.note(xattrs) } }
    public var size: UInt64
    /// The journal sequence number of the last change of any kind.
    public var version: UInt64
    /// The journal sequence number of the last content change (creation counts).
    public var contentVersion: UInt64
    /// Which device made the current content (see ``contentTime``).
    public var contentDevice: String?
    private var rare: RareBox?
    public var mtime: Timestamp
    /// Permission bits only (`0o7777`).
    public var mode: UInt32
    /// The last change of the item's content, attributes or name (nil: `mtime`).
    public var ctime: Timestamp?
    /// The access time as last set (`utimensat`; reads do not move it); nil: `mtime`.
    public var atime: Timestamp?
    /// When and by which device (``contentDevice``) a file's current content was made (the
    /// commit's); nil for contents folded before history was kept.
    public var contentTime: Timestamp?
    /// Owner and group; nil for 0 and 0 (items stored before owners were). See ``ownerOrRoot``.
    public var owner: Owner?
    public var kind: ItemKind
    /// Tombstone: kept so that a later edit or a write into a deleted folder can revive it.
    public var deleted: Bool
    /// `true` while the device that wrote this content is still uploading its chunks
    /// (metadata first); nil otherwise. See ``isContentPending``.
    public var contentPending: Bool?

    /// The fields few items set (links, conflicts, history, tombstones' deletions).
    struct Rare: Hashable, Sendable {
        /// Where a symlink points; nil for other kinds.
        var target: String?
        /// For a conflict copy, the item it conflicts with, until it is renamed away.
        var conflictOf: ItemID?
        /// For a conflict copy whose content continues another item's line of edits (the
        /// copy was made from, or later saved by, an edit of that item): that item. nil when
        /// the content was written to this item itself. Decides where a save based on it goes.
        var contentFrom: ItemID?
        /// A device file's device number (`st_rdev`); nil for every other kind.
        var device: UInt64?
        /// For a hard link: the item it is a name of; nil for every other kind.
        var linkedItem: ItemID?
        /// A file's earlier contents still kept, oldest first; nil: none.
        var history: [PastVersion]?
        /// For a tombstone: its deletion (nil for tombstones folded before this was kept).
        var deletion: Deletion?

        var isEmpty: Bool { self == Rare() }
    }

    /// Immutable: a change makes a new box, so copies of an item never share a change.
    private final class RareBox: Sendable {
        let fields: Rare
        init(_ fields: Rare) { self.fields = fields }
    }

    /// The rare fields, all nil when none is set.
    private var rareFields: Rare {
        get { rare?.fields ?? Rare() }
        set { rare = newValue.isEmpty ? nil : RareBox(newValue) }
    }

    /// Sets a rare field; setting nil where none is set makes no box.
    private mutating func setRare<Value>(_ field: WritableKeyPath<Rare, Value?>, _ value: Value?) {
        if value != nil || rare != nil { rareFields[keyPath: field] = value }
    }

    public var target: String? {
        get { rare?.fields.target }
        set { setRare(\.target, newValue) }
    }
    public var conflictOf: ItemID? {
        get { rare?.fields.conflictOf }
        set { setRare(\.conflictOf, newValue) }
    }
    public var contentFrom: ItemID? {
        get { rare?.fields.contentFrom }
        set { setRare(\.contentFrom, newValue) }
    }
    public var device: UInt64? {
        get { rare?.fields.device }
        set { setRare(\.device, newValue) }
    }
    public var linkedItem: ItemID? {
        get { rare?.fields.linkedItem }
        set { setRare(\.linkedItem, newValue) }
    }
    public var history: [PastVersion]? {
        get { rare?.fields.history }
        set { setRare(\.history, newValue) }
    }
    public var deletion: Deletion? {
        get { rare?.fields.deletion }
        set { setRare(\.deletion, newValue) }
    }

    public var ownerOrRoot: Owner { owner ?? .root }

    /// Equal but for version numbers (what a device's own change landing renumbers).
    /// (History and the content's time are not shown by `stat`: they are left out too; a
    /// batch lands at its first change's time.)
    public static func sameApartFromVersions(_ a: Item?, _ b: Item?) -> Bool {
        guard var a, var b else { return a == nil && b == nil }
        (a.version, a.contentVersion, a.contentTime, a.history, a.deletion) = (0, 0, nil, nil, nil)
        (b.version, b.contentVersion, b.contentTime, b.history, b.deletion) = (0, 0, nil, nil, nil)
        return a == b
    }

    /// The content is named but not all of its chunks are in the store yet.
    public var isContentPending: Bool {
        get { contentPending == true }
        set { contentPending = newValue ? true : nil }
    }

    public static func == (lhs: Item, rhs: Item) -> Bool {
        lhs.id == rhs.id && lhs.parent == rhs.parent && lhs.name == rhs.name && lhs.chunks == rhs.chunks
            && lhs.xattrs == rhs.xattrs && lhs.size == rhs.size && lhs.version == rhs.version
            && lhs.contentVersion == rhs.contentVersion && lhs.contentDevice == rhs.contentDevice
            && lhs.mtime == rhs.mtime && lhs.mode == rhs.mode && lhs.ctime == rhs.ctime && lhs.atime == rhs.atime
            && lhs.contentTime == rhs.contentTime && lhs.owner == rhs.owner && lhs.kind == rhs.kind
            && lhs.deleted == rhs.deleted && lhs.contentPending == rhs.contentPending
            && (lhs.rare === rhs.rare || lhs.rareFields == rhs.rareFields)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(id)
        hasher.combine(version)
        hasher.combine(name)
    }

    public init(
        id: ItemID, parent: ItemID, name: String, kind: ItemKind, mode: UInt32,
        mtime: Timestamp, size: UInt64 = 0, chunks: [ChunkRef] = [], target: String? = nil,
        xattrs: [String: Data] = [:], version: UInt64 = 0, contentVersion: UInt64 = 0,
        deleted: Bool = false, conflictOf: ItemID? = nil, contentFrom: ItemID? = nil,
        isContentPending: Bool = false, owner: Owner? = nil, device: UInt64? = nil,
        ctime: Timestamp? = nil, atime: Timestamp? = nil, linkedItem: ItemID? = nil,
        contentTime: Timestamp? = nil, contentDevice: String? = nil, history: [PastVersion]? = nil,
        deletion: Deletion? = nil
    ) {
        self.id = id
        self.parent = parent
        self.name = name
        self.kind = kind
        self.mode = mode
        self.mtime = mtime
        self.size = size
        self.chunks = chunks
        self.xattrs = xattrs
        FileCapabilities.note(xattrs)
        self.version = version
        self.contentVersion = contentVersion
        self.deleted = deleted
        self.contentPending = isContentPending ? true : nil
        self.owner = owner
        self.ctime = ctime
        self.atime = atime
        self.contentTime = contentTime
        self.contentDevice = contentDevice
        let rare = Rare(
            target: target, conflictOf: conflictOf, contentFrom: contentFrom, device: device,
            linkedItem: linkedItem, history: history, deletion: deletion)
        self.rare = rare.isEmpty ? nil : RareBox(rare)
    }

    public static func rootFolder() -> Item {
        Item(id: .root, parent: .root, name: "", kind: .folder, mode: 0o755, mtime: .zero)
    }
}

/// Format 1 snapshots hold items as JSON, one key per field (nil fields left out).
extension Item: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, parent, name, kind, mode, mtime, size, chunks, target, xattrs, version, contentVersion
        case deleted, conflictOf, contentFrom, contentPending, owner, device, ctime, atime, linkedItem
        case contentTime, contentDevice, history, deletion
    }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try values.decode(ItemID.self, forKey: .id), parent: try values.decode(ItemID.self, forKey: .parent),
            name: try values.decode(String.self, forKey: .name), kind: try values.decode(ItemKind.self, forKey: .kind),
            mode: try values.decode(UInt32.self, forKey: .mode), mtime: try values.decode(Timestamp.self, forKey: .mtime),
            size: try values.decode(UInt64.self, forKey: .size), chunks: try values.decode([ChunkRef].self, forKey: .chunks),
            target: try values.decodeIfPresent(String.self, forKey: .target),
            xattrs: try values.decode([String: Data].self, forKey: .xattrs),
            version: try values.decode(UInt64.self, forKey: .version),
            contentVersion: try values.decode(UInt64.self, forKey: .contentVersion),
            deleted: try values.decode(Bool.self, forKey: .deleted),
            conflictOf: try values.decodeIfPresent(ItemID.self, forKey: .conflictOf),
            contentFrom: try values.decodeIfPresent(ItemID.self, forKey: .contentFrom),
            isContentPending: try values.decodeIfPresent(Bool.self, forKey: .contentPending) == true,
            owner: try values.decodeIfPresent(Owner.self, forKey: .owner),
            device: try values.decodeIfPresent(UInt64.self, forKey: .device),
            ctime: try values.decodeIfPresent(Timestamp.self, forKey: .ctime),
            atime: try values.decodeIfPresent(Timestamp.self, forKey: .atime),
            linkedItem: try values.decodeIfPresent(ItemID.self, forKey: .linkedItem),
            contentTime: try values.decodeIfPresent(Timestamp.self, forKey: .contentTime),
            contentDevice: try values.decodeIfPresent(String.self, forKey: .contentDevice),
            history: try values.decodeIfPresent([PastVersion].self, forKey: .history),
            deletion: try values.decodeIfPresent(Deletion.self, forKey: .deletion))
    }

    public func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(id, forKey: .id)
        try values.encode(parent, forKey: .parent)
        try values.encode(name, forKey: .name)
        try values.encode(kind, forKey: .kind)
        try values.encode(mode, forKey: .mode)
        try values.encode(mtime, forKey: .mtime)
        try values.encode(size, forKey: .size)
        try values.encode(chunks, forKey: .chunks)
        try values.encodeIfPresent(target, forKey: .target)
        try values.encode(xattrs, forKey: .xattrs)
        try values.encode(version, forKey: .version)
        try values.encode(contentVersion, forKey: .contentVersion)
        try values.encode(deleted, forKey: .deleted)
        try values.encodeIfPresent(conflictOf, forKey: .conflictOf)
        try values.encodeIfPresent(contentFrom, forKey: .contentFrom)
        try values.encodeIfPresent(contentPending, forKey: .contentPending)
        try values.encodeIfPresent(owner, forKey: .owner)
        try values.encodeIfPresent(device, forKey: .device)
        try values.encodeIfPresent(ctime, forKey: .ctime)
        try values.encodeIfPresent(atime, forKey: .atime)
        try values.encodeIfPresent(linkedItem, forKey: .linkedItem)
        try values.encodeIfPresent(contentTime, forKey: .contentTime)
        try values.encodeIfPresent(contentDevice, forKey: .contentDevice)
        try values.encodeIfPresent(history, forKey: .history)
        try values.encodeIfPresent(deletion, forKey: .deletion)
    }
}

extension Timestamp {
    public static func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(seconds: Int64(spec.tv_sec), nanoseconds: UInt32(spec.tv_nsec))
    }

    /// This time moved by `seconds` (clamped to the valid range).
    public func adding(seconds: Int64) -> Timestamp {
        Timestamp(clamping: self.seconds + seconds, nanoseconds: nanoseconds)
    }

    public var date: Date { Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9) }

    public init(_ date: Date) {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        self.init(clamping: Int64(seconds), nanoseconds: UInt32((date.timeIntervalSince1970 - seconds) * 1e9))
    }
}
