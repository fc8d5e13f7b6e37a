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
    /// Kernel mount flags (`noexec`, `nosuid`, `nodev`, ...) passed on as given.
    public var kernelFlags: [String] = []
    /// `fsname` shown in `mount` and `df` (the container).
    public var source: String

    public init(source: String, uid: UInt32?, gid: UInt32?) {
        self.source = source
        self.uid = uid
        self.gid = gid
    }

    /// The largest read the kernel asks for. libfuse answers a read by splicing from the
    /// cache file only if the reply and three pages fit its pipe, and pipes stop at 1 MiB
    /// without CAP_SYS_RESOURCE: larger reads (1020 KiB with 4 MiB read-ahead) were copied
    /// through a new buffer instead. (Also told to libfuse at init, which checks they agree.)
    static let maximumRead = (1 << 20) - (4 << 12)

    /// The `-o` options libfuse takes at mount time.
    var kernelOptions: String {
        var options = [
            "fsname=\(source.replacingOccurrences(of: ",", with: "_"))", "subtype=icloudfs",
            "max_read=\(FuseMountOptions.maximumRead)",
        ]
        if readOnly { options.append("ro") }
        if allowOther { options.append("allow_other") }
        if defaultPermissions { options.append("default_permissions") }
        options += kernelFlags
        return options.joined(separator: ",")
    }
}
