import CFuseKernel
import Foundation
import Glibc
import SystemPackage

/// What the kernel is told at mount time.
public struct KernelMountOptions: Sendable {
    /// Shown as the mount's source in /proc/mounts and `df` (the container).
    public var source: String
    public var readOnly = false
    public var allowOther = false
    public var defaultPermissions = false
    /// The kernel's generic flags by name (`noexec`, `nosuid`, `noatime`, ...), as given.
    public var flags: [String] = []

    public init(source: String) {
        self.source = source
    }

    /// The filesystem type the kernel shows: `fuse.icloudfs`.
    public static let subtype = "icloudfs"
}

/// Mounting and unmounting. As root: `mount(2)` with a `/dev/fuse` descriptor of our own.
/// As another user: `fusermount3` (setuid root, from the fuse3 package) mounts and hands the
/// descriptor back over a socket, as libfuse does; it also unmounts.
public enum KernelMount {
    /// Mounts at `mountPoint`; the `/dev/fuse` descriptor the session serves.
    public static func mount(at mountPoint: String, _ options: KernelMountOptions) throws(Errno) -> Int32 {
        geteuid() == 0 ? try mountAsRoot(at: mountPoint, options) : try mountWithHelper(at: mountPoint, options)
    }

    /// Detaches the mount (lazily: open files keep it served until they close). Never fails:
    /// a mount already gone is the usual case (`umount` came first).
    public static func unmount(_ mountPoint: String) {
        if geteuid() == 0 {
            _ = umount2(mountPoint, Int32(MNT_DETACH))
        } else {
            _ = runHelper(["-u", "-q", "-z", "--", mountPoint], descriptor: nil)
        }
    }

    /// Mount flags by option name: set by the first, cleared by the second.
    public static let flagNames: [String: (set: UInt, clear: UInt)] = [
        "ro": (UInt(MS_RDONLY), 0), "rw": (0, UInt(MS_RDONLY)),
        "nosuid": (UInt(MS_NOSUID), 0), "suid": (0, UInt(MS_NOSUID)),
        "nodev": (UInt(MS_NODEV), 0), "dev": (0, UInt(MS_NODEV)),
        "noexec": (UInt(MS_NOEXEC), 0), "exec": (0, UInt(MS_NOEXEC)),
        "sync": (UInt(MS_SYNCHRONOUS), 0), "async": (0, UInt(MS_SYNCHRONOUS)),
        "dirsync": (UInt(MS_DIRSYNC), 0),
        "noatime": (UInt(MS_NOATIME), 0), "atime": (0, UInt(MS_NOATIME)),
        "nodiratime": (UInt(MS_NODIRATIME), 0), "diratime": (0, UInt(MS_NODIRATIME)),
        "relatime": (UInt(MS_RELATIME), 0), "norelatime": (0, UInt(MS_RELATIME)),
        "strictatime": (UInt(MS_STRICTATIME), 0),
    ]

    /// `flags` (option names) applied over `base`.
    public static func mountFlags(_ flags: [String], over base: UInt) -> UInt {
        flags.reduce(base) { result, name in
            guard let flag = flagNames[name] else { return result }
            return (result | flag.set) & ~flag.clear
        }
    }

    private static func mountAsRoot(at mountPoint: String, _ options: KernelMountOptions) throws(Errno) -> Int32 {
        let device = open("/dev/fuse", O_RDWR | O_CLOEXEC)
        guard device >= 0 else { throw Errno(rawValue: errno) }
        var root = stat()
        guard stat(mountPoint, &root) == 0 else {
            let failure = errno
            close(device)
            throw Errno(rawValue: failure)
        }
        // As libfuse: nosuid and nodev unless asked otherwise.
        let flags = mountFlags(options.flags + (options.readOnly ? ["ro"] : []), over: UInt(MS_NOSUID | MS_NODEV))
        var data = ["fd=\(device)", "rootmode=\(String(root.st_mode & S_IFMT, radix: 8))", "user_id=0", "group_id=0"]
        if options.allowOther { data.append("allow_other") }
        if options.defaultPermissions { data.append("default_permissions") }
        let source = options.source.isEmpty ? KernelMountOptions.subtype : options.source
        guard Glibc.mount(source, mountPoint, "fuse.\(KernelMountOptions.subtype)", flags, data.joined(separator: ",")) == 0
        else {
            let failure = errno
            close(device)
            throw Errno(rawValue: failure)
        }
        return device
    }

    private static func mountWithHelper(at mountPoint: String, _ options: KernelMountOptions) throws(Errno) -> Int32 {
        var sockets: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sockets) == 0 else { throw Errno(rawValue: errno) }
        defer { close(sockets[0]) }
        var list = ["fsname=\(options.source.replacingOccurrences(of: ",", with: "_"))", "subtype=\(KernelMountOptions.subtype)"]
        if options.readOnly { list.append("ro") }
        if options.allowOther { list.append("allow_other") }
        if options.defaultPermissions { list.append("default_permissions") }
        list += options.flags
        let status = runHelper(["-o", list.joined(separator: ","), "--", mountPoint], descriptor: sockets[1])
        close(sockets[1])
        guard status == 0 else { throw Errno(rawValue: EPERM) }
        let device = icloudfs_receive_descriptor(sockets[0])
        guard device >= 0 else { throw Errno(rawValue: EIO) }
        return device
    }

    /// Runs fusermount3 with `arguments` (and `descriptor` as its `_FUSE_COMMFD`); its exit
    /// status. `posix_spawn`, not `Process`: the descriptor must reach the helper open.
    private static func runHelper(_ arguments: [String], descriptor: Int32?) -> Int32 {
        var environment = ProcessInfo.processInfo.environment
        if let descriptor {
            _ = fcntl(descriptor, F_SETFD, 0)  // not close-on-exec: the helper finds it by number
            environment["_FUSE_COMMFD"] = String(descriptor)
        }
        let argv = ([helperPath] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        guard posix_spawn(&pid, helperPath, nil, nil, argv, envp) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED and WEXITSTATUS, which Swift does not import (macros).
        return status & 0x7f == 0 ? (status >> 8) & 0xff : -1
    }

    static var helperPath: String {
        ["/usr/bin/fusermount3", "/bin/fusermount3", "/usr/local/bin/fusermount3"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        } ?? "fusermount3"
    }
}
