import CFuseKernel
import Glibc

/// What a lookup (or create, mkdir, link...) answers: a node id the kernel will hold until
/// it forgets it, and the attributes, each with how long the kernel may keep it.
public struct Entry: Sendable {
    public var node: UInt64
    public var generation: UInt64
    public var attributes: stat
    public var entryTimeout: Double
    public var attributeTimeout: Double

    public init(node: UInt64, generation: UInt64, attributes: stat, entryTimeout: Double, attributeTimeout: Double) {
        self.node = node
        self.generation = generation
        self.attributes = attributes
        self.entryTimeout = entryTimeout
        self.attributeTimeout = attributeTimeout
    }
}

/// How the kernel treats an open file (`fuse_open_out.open_flags`).
public struct OpenFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The pages cached from earlier opens stay valid.
    public static let keepCache = OpenFlags(rawValue: UInt32(FOPEN_KEEP_CACHE))
    /// Reads and writes go to the backing file named by `OpenReply.backingID`, in the kernel.
    public static let passthrough = OpenFlags(rawValue: UInt32(ICLOUDFS_FOPEN_PASSTHROUGH))
}

/// An answer to `open`, `opendir` or `create`.
public struct OpenReply: Sendable {
    public var handle: UInt64
    public var flags: OpenFlags
    /// With `.passthrough`: the id `KernelChannel.openBacking` gave.
    public var backingID: Int32

    public init(handle: UInt64, flags: OpenFlags = [], backingID: Int32 = 0) {
        self.handle = handle
        self.flags = flags
        self.backingID = backingID
    }
}

/// Encoding of the reply bodies (linux/fuse.h). Pure: the unit tests check the layouts.
public enum ReplyEncoder {
    /// `st_*` fields as the kernel's `fuse_attr`.
    public static func attributes(_ value: stat) -> fuse_attr {
        var attributes = fuse_attr()
        attributes.ino = UInt64(value.st_ino)
        attributes.size = UInt64(bitPattern: Int64(value.st_size))
        attributes.blocks = UInt64(bitPattern: Int64(value.st_blocks))
        attributes.atime = UInt64(bitPattern: Int64(value.st_atim.tv_sec))
        attributes.mtime = UInt64(bitPattern: Int64(value.st_mtim.tv_sec))
        attributes.ctime = UInt64(bitPattern: Int64(value.st_ctim.tv_sec))
        attributes.atimensec = UInt32(truncatingIfNeeded: value.st_atim.tv_nsec)
        attributes.mtimensec = UInt32(truncatingIfNeeded: value.st_mtim.tv_nsec)
        attributes.ctimensec = UInt32(truncatingIfNeeded: value.st_ctim.tv_nsec)
        attributes.mode = value.st_mode
        attributes.nlink = UInt32(truncatingIfNeeded: value.st_nlink)
        attributes.uid = value.st_uid
        attributes.gid = value.st_gid
        attributes.rdev = UInt32(truncatingIfNeeded: value.st_rdev)
        attributes.blksize = UInt32(truncatingIfNeeded: value.st_blksize)
        return attributes
    }

    /// Seconds as the protocol's whole seconds and nanoseconds (negative: zero).
    static func timeout(_ seconds: Double) -> (seconds: UInt64, nanoseconds: UInt32) {
        guard seconds > 0 else { return (0, 0) }
        let whole = seconds.rounded(.down)
        return (UInt64(whole), UInt32(min(999_999_999, ((seconds - whole) * 1e9).rounded())))
    }

    public static func entry(_ entry: Entry) -> fuse_entry_out {
        var out = fuse_entry_out()
        out.nodeid = entry.node
        out.generation = entry.generation
        (out.entry_valid, out.entry_valid_nsec) = timeout(entry.entryTimeout)
        (out.attr_valid, out.attr_valid_nsec) = timeout(entry.attributeTimeout)
        out.attr = attributes(entry.attributes)
        return out
    }

    public static func attributes(_ value: stat, timeout seconds: Double) -> fuse_attr_out {
        var out = fuse_attr_out()
        (out.attr_valid, out.attr_valid_nsec) = timeout(seconds)
        out.attr = attributes(value)
        return out
    }

    public static func open(_ reply: OpenReply) -> fuse_open_out {
        var out = fuse_open_out()
        out.fh = reply.handle
        out.open_flags = reply.flags.rawValue
        // `padding` in 7.38's header is `backing_id` since 7.40.
        out.padding = UInt32(bitPattern: reply.backingID)
        return out
    }

    public static func statfs(_ info: statvfs) -> fuse_statfs_out {
        var out = fuse_statfs_out()
        out.st.blocks = UInt64(info.f_blocks)
        out.st.bfree = UInt64(info.f_bfree)
        out.st.bavail = UInt64(info.f_bavail)
        out.st.files = UInt64(info.f_files)
        out.st.ffree = UInt64(info.f_ffree)
        out.st.bsize = UInt32(truncatingIfNeeded: info.f_bsize)
        out.st.namelen = UInt32(truncatingIfNeeded: info.f_namemax)
        out.st.frsize = UInt32(truncatingIfNeeded: info.f_frsize)
        return out
    }
}

/// A `readdir` or `readdirplus` answer being filled: records of `fuse_dirent` (with
/// `fuse_entry_out` before each for readdirplus), each padded to 8 bytes, up to the size the
/// kernel asked for.
public struct DirectoryBuffer {
    public let capacity: Int
    private(set) var bytes: [UInt8] = []

    public init(capacity: Int) {
        self.capacity = capacity
        bytes.reserveCapacity(min(capacity, 1 << 16))
    }

    public var isEmpty: Bool { bytes.isEmpty }

    /// Adds a `readdir` record; false (and nothing added) if it does not fit.
    public mutating func add(name: KernelName, inode: UInt64, mode: UInt32, nextOffset: UInt64) -> Bool {
        append(entry: nil, name: name, inode: inode, mode: mode, nextOffset: nextOffset)
    }

    /// Adds a `readdirplus` record: `entry` nil for a name the kernel must not look up from
    /// the listing (`.` and `..`: node id 0). False (and nothing added) if it does not fit.
    public mutating func addPlus(entry: Entry?, name: KernelName, inode: UInt64, mode: UInt32, nextOffset: UInt64) -> Bool {
        var out = fuse_entry_out()
        if let entry { out = ReplyEncoder.entry(entry) } else { out.attr.ino = inode; out.attr.mode = mode }
        return append(entry: out, name: name, inode: inode, mode: mode, nextOffset: nextOffset)
    }

    private mutating func append(entry: fuse_entry_out?, name: KernelName, inode: UInt64, mode: UInt32, nextOffset: UInt64)
        -> Bool
    {
        let entrySize = entry == nil ? 0 : MemoryLayout<fuse_entry_out>.size
        let direntSize = MemoryLayout<fuse_dirent>.size
        let size = (entrySize + direntSize + name.count + 7) & ~7
        guard bytes.count + size <= capacity else { return false }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: size))
        bytes.withUnsafeMutableBytes { buffer in
            let record = UnsafeMutableRawBufferPointer(rebasing: buffer[start...])
            if let entry { record.storeBytes(of: entry, toByteOffset: 0, as: fuse_entry_out.self) }
            var dirent = fuse_dirent()
            dirent.ino = inode
            dirent.off = nextOffset
            dirent.namelen = UInt32(name.count)
            dirent.type = (mode & S_IFMT) >> 12
            record.storeBytes(of: dirent, toByteOffset: entrySize, as: fuse_dirent.self)
            name.withUnsafeBytes { name in
                UnsafeMutableRawBufferPointer(rebasing: record[(entrySize + direntSize)...]).copyMemory(from: name)
            }
        }
        return true
    }

    /// The records, to send.
    public func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        bytes.withUnsafeBytes(body)
    }
}
