import CFuseKernel

/// What a filesystem served by a `KernelSession` implements.
public protocol KernelFileSystem: AnyObject, Sendable {
    /// The connection's settings, from what the kernel offers at `FUSE_INIT`.
    func connect(_ offered: KernelInit) -> ConnectionSettings
    /// Answers `request` (exactly once, from any thread, now or later). Runs on a worker
    /// thread: what blocks here holds one worker (the pool grows up to its bound).
    func serve(_ request: Request, _ operation: Operation)
    /// The kernel dropped `count` lookups of `node` (never answered).
    func forget(_ node: UInt64, _ count: UInt64)
}

/// Capabilities this filesystem may ask for at `FUSE_INIT` (linux/fuse.h's `FUSE_*`
/// init flags; bits 32..63 travel in `flags2`).
public struct Capabilities: OptionSet, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let asyncRead = Capabilities(rawValue: UInt64(FUSE_ASYNC_READ))
    public static let atomicTruncate = Capabilities(rawValue: UInt64(FUSE_ATOMIC_O_TRUNC))
    public static let bigWrites = Capabilities(rawValue: UInt64(FUSE_BIG_WRITES))
    public static let dontMask = Capabilities(rawValue: UInt64(FUSE_DONT_MASK))
    public static let readdirPlus = Capabilities(rawValue: UInt64(FUSE_DO_READDIRPLUS))
    public static let readdirPlusAuto = Capabilities(rawValue: UInt64(FUSE_READDIRPLUS_AUTO))
    public static let asyncDirectIO = Capabilities(rawValue: UInt64(FUSE_ASYNC_DIO))
    public static let parallelDirectoryOperations = Capabilities(rawValue: UInt64(FUSE_PARALLEL_DIROPS))
    /// The filesystem clears set-id bits on write, truncation and chown (the kernel says
    /// when); the kernel then stops asking for `security.capability` before every write.
    public static let handleKillPrivilegesV2 = Capabilities(rawValue: UInt64(FUSE_HANDLE_KILLPRIV_V2))
    public static let posixACL = Capabilities(rawValue: UInt64(FUSE_POSIX_ACL))
    public static let maxPages = Capabilities(rawValue: UInt64(FUSE_MAX_PAGES))
    public static let ioctlOnFolders = Capabilities(rawValue: UInt64(FUSE_IOCTL_DIR))
    public static let exportSupport = Capabilities(rawValue: UInt64(FUSE_EXPORT_SUPPORT))
    public static let passthrough = Capabilities(rawValue: UInt64(ICLOUDFS_FUSE_PASSTHROUGH_FLAG2) << 32)
    static let extendedInit = Capabilities(rawValue: UInt64(FUSE_INIT_EXT))
}

/// The connection's settings, answered to `FUSE_INIT`.
public struct ConnectionSettings: Sendable {
    /// Asked for; the session keeps those the kernel offered.
    public var capabilities: Capabilities = []
    public var maxReadahead: UInt32 = 128 << 10
    public var maxWrite: UInt32 = 1 << 20
    public var timeGranularity: UInt32 = 1
    /// How deep filesystems may stack on the backing files of passthrough opens.
    public var maxStackDepth: UInt32 = 1

    public init() {}
}

/// Facts about the protocol this layer speaks.
public enum KernelProtocol {
    /// The newest protocol version it knows, e.g. "7.45" (the kernel may speak an older one).
    public static let version = "\(FUSE_KERNEL_VERSION).\(ICLOUDFS_FUSE_KERNEL_MINOR)"
    /// The node id of the mount's root.
    public static let rootNode: UInt64 = 1
}
