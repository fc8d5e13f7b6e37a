/// A container's `identity` record, written once when the container is created.
///
/// The random `token` tells containers apart: a device's cache records the token it was made
/// for, and is never mixed with a container of another token (a re-created container with
/// the same name has a new token).
public struct Identity: Hashable, Codable, Sendable {
    public static let formatVersion = 1

    public var format: Int
    public var container: String
    public var token: String
    public var created: Timestamp
    public var chunking: ChunkingParameters

    public init(container: String, token: String, created: Timestamp, chunking: ChunkingParameters = .standard) {
        format = Identity.formatVersion
        self.container = container
        self.token = token
        self.created = created
        self.chunking = chunking
    }
}

/// The whole tree as of a journal sequence number, so a new device need not replay the
/// journal from the start.
/// Formats 2 to 7 are the protobuf form (`SnapshotCoding`; 3 adds owners, special files and
/// times, 4 hard links, 5 history, 6 the retention policy, 7 the journal's format: entries
/// after it may be protobuf); format 1, JSON, is still read.
public struct Snapshot: Codable, Sendable {
    public static let formatVersion = 8

    public var format: Int
    public var seq: UInt64
    /// Every item, tombstones included, sorted by id.
    public var items: [Item]
    /// The retention policy the journal set (nil: the standard one).
    public var policy: RetentionPolicy?
    /// `Tree.journalFormat` at `seq` (format 7).
    public var journalFormat = 0
    /// `Tree.packedChunks` at `seq` (format 8).
    public var packedChunks: [ChunkHash: PackedLocation] = [:]

    enum CodingKeys: String, CodingKey { case format, seq, items, policy }

    public init(of tree: Tree) {
        self.init(
            format: Snapshot.formatVersion, seq: tree.head, items: tree.allItems, policy: tree.policy,
            journalFormat: tree.journalFormat)
        packedChunks = tree.packedChunks
    }

    public init(format: Int, seq: UInt64, items: [Item], policy: RetentionPolicy? = nil, journalFormat: Int = 0) {
        self.format = format
        self.seq = seq
        self.items = items
        self.policy = policy
        self.journalFormat = journalFormat
    }

    public var tree: Tree {
        Tree(items: items, head: seq, policy: policy, journalFormat: journalFormat, packedChunks: packedChunks)
    }
}
