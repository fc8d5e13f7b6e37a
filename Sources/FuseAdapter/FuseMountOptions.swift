import FuseKernel

/// What the FUSE layer needs to know of the mount options.
public struct FuseMountOptions: Sendable {
    public var readOnly = false
    public var allowOther = false
    public var defaultPermissions = false
    /// Owner and group shown for every item instead of the stored ones (nil: the stored).
    public var uid: UInt32?
    public var gid: UInt32?
    public var umask: UInt32 = 0
    /// POSIX ACLs (`-o acl`): the kernel checks access by them and leaves the umask to us.
    public var acl = false
    public var debug = false
    /// Reads of complete local copies served by the kernel (FUSE passthrough), where it can.
    public var passthrough = true
    /// Programs whose opens of files not all downloaded are refused (`HydrationRefusals`).
    public var noHydrate = FuseMountOptions.defaultNoHydrate
    public static var defaultNoHydrate: Set<String> { HydrationRefusals.defaultPrograms }
    /// Kernel mount flags (`noexec`, `nosuid`, `nodev`, ...) passed on as given.
    public var kernelFlags: [String] = []
    /// `fsname` shown in `mount` and `df` (the container).
    public var source: String

    public init(source: String, uid: UInt32?, gid: UInt32?) {
        self.source = source
        self.uid = uid
        self.gid = gid
    }

    /// What the kernel is told at mount time.
    var kernelMountOptions: KernelMountOptions {
        var options = KernelMountOptions(source: source)
        options.readOnly = readOnly
        options.allowOther = allowOther
        options.defaultPermissions = defaultPermissions
        options.flags = kernelFlags
        return options
    }
}
