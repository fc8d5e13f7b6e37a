import ContainerFormat

/// What `stat` shows of an item.
public struct ItemAttributes: Sendable, Equatable {
    public var id: ItemID
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

extension ItemAttributes {
    /// What `Replica.attributes` shows of a file just created at `time` (empty, one name, all
    /// times its creation's), worked out before its create is queued (`NewFileAnswer`).
    static func newFile(_ id: ItemID, mode: UInt32, owner: Owner, at time: Timestamp) -> ItemAttributes {
        ItemAttributes(
            id: id, kind: .file, mode: mode, size: 0, mtime: time, ctime: time, atime: time, linkCount: 1,
            target: nil, owner: owner)
    }
}

/// A remote change of one item, with what the kernel's caches need to know of it: where it is
/// now and whether its content changed (so the FUSE layer asks the replica nothing more).
public struct ItemChange: Sendable {
    public let id: ItemID
    /// Its folder and name now; nil once it is gone.
    public let parent: ItemID?
    public let name: String?
    /// Its size or content changed: a size or pages the kernel cached are stale.
    public let contentChanged: Bool
}
