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

/// A remote change of one item, with what the kernel's caches need to know of it: where it is
/// now and whether its content changed (so the FUSE layer asks the replica nothing more).
public struct ItemChange: Sendable {
    public let id: ItemID
    /// Its inode number, if it was ever given one (the kernel can hold only those).
    public let inode: UInt64?
    /// Its folder and name now; nil once it is gone.
    public let parent: ItemID?
    /// The folder's inode number, if it has one.
    public let parentInode: UInt64?
    public let name: String?
    /// Its size or content changed: a size or pages the kernel cached are stale.
    public let contentChanged: Bool
}
