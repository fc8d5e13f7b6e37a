import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// `mount -o remount,ro` (or `,rw`, and the kernel's flags) of a mounted container: the
/// kernel changes the mount's flags; the daemon goes on serving it.
enum Remount {
    static func apply(_ options: MountOptions, at mountPoint: String) throws {
        guard ExtendedAttributes.isOnMount(mountPoint) else {
            throw ExitMessage("\(mountPoint): not on an icloudfs mount (remount changes a mount that exists)")
        }
        var flags = UInt(MS_REMOUNT)
        if options.readOnly { flags |= UInt(MS_RDONLY) }
        let named: [String: Int] = [
            "nosuid": Int(MS_NOSUID), "nodev": Int(MS_NODEV), "noexec": Int(MS_NOEXEC), "sync": Int(MS_SYNCHRONOUS),
            "dirsync": Int(MS_DIRSYNC), "noatime": Int(MS_NOATIME),
        ]
        for flag in options.kernelFlags { flags |= UInt(named[flag] ?? 0) }
        if !options.folderAccessTimes { flags |= UInt(MS_NODIRATIME) }
        guard mount(nil, mountPoint, nil, flags, nil) == 0 else {
            throw ExitMessage("cannot remount \(mountPoint): \(String(cString: strerror(errno)))")
        }
    }
}
