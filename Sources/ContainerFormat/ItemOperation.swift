import Foundation

/// New content of a file: its size and chunk list (the sizes add up to `size`).
public struct Content: Hashable, Codable, Sendable {
    public var size: UInt64
    public var chunks: [ChunkRef]

    public init(size: UInt64, chunks: [ChunkRef]) {
        self.size = size
        self.chunks = chunks
    }

    public static let empty = Content(size: 0, chunks: [])

    /// The chunk sizes add up to the size (an untrusted entry may lie).
    public var isConsistent: Bool {
        chunks.reduce(UInt64(0)) { $0 + UInt64($1.size) } == size
    }
}

/// One change to one item, as a device recorded it. `base` is the item's `contentVersion`
/// the device had seen: the fold compares it to decide conflicts (see ``Tree``).
public enum ItemOperation: Hashable, Sendable {
    case create(Create)
    case update(Update)
    case move(Move)
    case delete(Delete)

    public struct Create: Hashable, Codable, Sendable {
        public var id: ItemID
        public var parent: ItemID
        public var name: String
        public var kind: ItemKind
        public var mode: UInt32
        public var mtime: Timestamp
        public var content: Content
        public var target: String?
        public var xattrs: [String: Data]
        /// Metadata first: the chunks follow; a later entry's `uploaded` says when.
        public var contentPending: Bool?
        /// Absent: 0 and 0 (commits before format 2 have none).
        public var owner: Owner?
        /// A device file's device number.
        public var device: UInt64?
        /// A hard link's item (format 3).
        public var linkedItem: ItemID?
        /// When the name was made (its folder's times), when this create also carries the
        /// file's first content and `mtime` is its last write's (format 7); nil: `mtime`.
        public var nameTime: Timestamp?
        /// When the item's attributes last changed, when this create also carries attributes
        /// set after it was made (format 8: `foldingIn`); nil: `mtime`.
        public var ctime: Timestamp?
        /// An access time set after the item was made (format 8); nil: none.
        public var atime: Timestamp?

        public init(
            id: ItemID, parent: ItemID, name: String, kind: ItemKind, mode: UInt32,
            mtime: Timestamp, content: Content = .empty, target: String? = nil,
            xattrs: [String: Data] = [:], owner: Owner? = nil, device: UInt64? = nil,
            linkedItem: ItemID? = nil
        ) {
            self.id = id
            self.parent = parent
            self.name = name
            self.kind = kind
            self.mode = mode
            self.mtime = mtime
            self.content = content
            self.target = target
            self.xattrs = xattrs
            self.owner = owner
            self.device = device
            self.linkedItem = linkedItem
        }

        /// This create with `update` made part of it, as if the item had been made so: a new
        /// item's later attributes (`chmod`, `chown`, `utimens`, `setfattr` after `tar x`
        /// made it) and a new file's first content. Nil when the create cannot carry it: a
        /// hard link (its item has the attributes), content for a file that has some already,
        /// or an upload marker.
        public func foldingIn(_ update: Update) -> Create? {
            guard kind != .hardLink, update.contentPending == nil, contentPending == nil else { return nil }
            var create = self
            if let content = update.content {
                guard kind == .file, self.content.size == 0, self.content.chunks.isEmpty else { return nil }
                create.content = content
            }
            if let mtime = update.mtime {
                // The folder's times stay those of the name's making.
                if create.nameTime == nil { create.nameTime = create.mtime }
                create.mtime = mtime
            }
            if let mode = update.mode { create.mode = mode }
            if let owner = update.owner { create.owner = owner == .root ? nil : owner }
            if let xattrs = update.xattrs { create.xattrs = xattrs }
            if let atime = update.atime { create.atime = atime }
            // Content with nothing else moves the change time to its last write's (`mtime`, as
            // a write does); attributes, to when they were set.
            let onlyWritten = update.content != nil && update.mode == nil && update.owner == nil
                && update.xattrs == nil && update.atime == nil
            create.ctime = onlyWritten ? nil : update.ctime ?? create.ctime
            return create
        }

        /// Makes `item` again, as it is (the journal's tree lost it; see `DeviceView`).
        public init(recreating item: Item) {
            self.init(
                id: item.id, parent: item.parent, name: item.name, kind: item.kind, mode: item.mode, mtime: item.mtime,
                content: Content(size: item.size, chunks: item.chunks), target: item.target, xattrs: item.xattrs,
                owner: item.owner, device: item.device, linkedItem: item.linkedItem)
        }
    }

    /// Content and/or attributes; absent fields stay as they are.
    public struct Update: Hashable, Codable, Sendable {
        public var id: ItemID
        public var base: UInt64
        public var content: Content?
        public var mode: UInt32?
        public var mtime: Timestamp?
        public var xattrs: [String: Data]?
        /// Metadata first: the chunks follow; a later entry's `uploaded` says when.
        public var contentPending: Bool?
        public var owner: Owner?
        public var atime: Timestamp?
        /// When the device made the change (format 2; absent before).
        public var ctime: Timestamp?

        public init(
            id: ItemID, base: UInt64, content: Content? = nil, mode: UInt32? = nil,
            mtime: Timestamp? = nil, xattrs: [String: Data]? = nil, owner: Owner? = nil
        ) {
            self.id = id
            self.base = base
            self.content = content
            self.mode = mode
            self.mtime = mtime
            self.xattrs = xattrs
            self.owner = owner
        }
    }

    public struct Move: Hashable, Codable, Sendable {
        public var id: ItemID
        public var base: UInt64
        public var parent: ItemID
        public var name: String
        /// When the device made the change (format 2; absent before).
        public var ctime: Timestamp?

        public init(id: ItemID, base: UInt64, parent: ItemID, name: String) {
            self.id = id
            self.base = base
            self.parent = parent
            self.name = name
        }
    }

    public struct Delete: Hashable, Codable, Sendable {
        public var id: ItemID
        public var base: UInt64
        /// When the device made the change (format 2; absent before).
        public var ctime: Timestamp?

        public init(id: ItemID, base: UInt64) {
            self.id = id
            self.base = base
        }
    }

    /// The operation with its change time set (where it has none yet): a device stamps its
    /// changes when it makes them.
    public func stamped(_ time: Timestamp) -> ItemOperation {
        switch self {
        case .create: return self  // made at its `mtime`
        case .update(var op):
            op.ctime = op.ctime ?? time
            return .update(op)
        case .move(var op):
            op.ctime = op.ctime ?? time
            return .move(op)
        case .delete(var op):
            op.ctime = op.ctime ?? time
            return .delete(op)
        }
    }

    /// The operation of an entry written before names were bytes (format 3), its names and
    /// target read as `NameBytes.literal`.
    func withLiteralNames() -> ItemOperation {
        switch self {
        case .create(var op):
            op.name = NameBytes.literal(op.name)
            op.target = op.target.map(NameBytes.literal)
            return .create(op)
        case .move(var op):
            op.name = NameBytes.literal(op.name)
            return .move(op)
        case .update, .delete:
            return self
        }
    }

    /// The same operation announcing content whose chunks are uploaded after the commit.
    public func markingContentPending() -> ItemOperation {
        switch self {
        case .create(var op) where !op.content.chunks.isEmpty:
            op.contentPending = true
            return .create(op)
        case .update(var op) where !(op.content?.chunks.isEmpty ?? true):
            op.contentPending = true
            return .update(op)
        default:
            return self
        }
    }

    /// Whether this operation announces content whose chunks may not be stored yet.
    public var announcesPendingContent: Bool {
        switch self {
        case .create(let op): op.contentPending == true
        case .update(let op): op.contentPending == true
        case .move, .delete: false
        }
    }

    public var itemID: ItemID {
        switch self {
        case .create(let op): op.id
        case .update(let op): op.id
        case .move(let op): op.id
        case .delete(let op): op.id
        }
    }

    /// The items the operation needs to exist: its own, and the folder (or linked item) it
    /// names.
    public var namedItems: [ItemID] {
        switch self {
        case .create(let op): [op.parent] + (op.linkedItem.map { [$0] } ?? [])
        case .update(let op): [op.id]
        case .move(let op): [op.id, op.parent]
        case .delete(let op): [op.id]
        }
    }
}

extension ItemOperation: Codable {
    private enum Kind: String, Codable {
        case create, update, move, delete
    }

    private enum CodingKeys: String, CodingKey {
        case op
    }

    public init(from decoder: any Decoder) throws {
        let kind = try decoder.container(keyedBy: CodingKeys.self).decode(Kind.self, forKey: .op)
        switch kind {
        case .create: self = .create(try Create(from: decoder))
        case .update: self = .update(try Update(from: decoder))
        case .move: self = .move(try Move(from: decoder))
        case .delete: self = .delete(try Delete(from: decoder))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .create(let op):
            try container.encode(Kind.create, forKey: .op)
            try op.encode(to: encoder)
        case .update(let op):
            try container.encode(Kind.update, forKey: .op)
            try op.encode(to: encoder)
        case .move(let op):
            try container.encode(Kind.move, forKey: .op)
            try op.encode(to: encoder)
        case .delete(let op):
            try container.encode(Kind.delete, forKey: .op)
            try op.encode(to: encoder)
        }
    }
}

extension ItemOperation {
    /// The chunks this operation's new content names.
    public var chunks: [ChunkRef] {
        switch self {
        case .create(let op): op.content.chunks
        case .update(let op): op.content?.chunks ?? []
        case .move, .delete: []
        }
    }

    public var chunkHashes: [ChunkHash] { chunks.map(\.hash) }
}
