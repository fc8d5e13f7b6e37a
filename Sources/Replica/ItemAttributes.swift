import ContainerFormat

/// What `stat` shows of an item.
public struct ItemAttributes: Sendable, Equatable {
    public var id: ItemID
    public var inode: UInt64
    public var kind: ItemKind
    /// Permission bits.
    public var mode: UInt32
    public var size: UInt64
    /// Bytes that are not holes (`st_blocks`): a file's long runs of zeros are holes on
    /// every device (see `Chunker.isZeroRunChunk`).
    public var allocatedSize: UInt64 = 0
    public var mtime: Timestamp
    public var ctime: Timestamp
    public var atime: Timestamp
    public var linkCount: UInt32
    public var target: String?
    public var owner: Owner = .root
    /// A device file's device number; 0 for every other kind.
    public var device: UInt64 = 0
}
