import Foundation
import FuseKernel

#if canImport(Glibc)
import Glibc
#endif

/// `mount -o remount,ro` (or `,rw`, and the kernel's flags) of a mounted container: the
/// kernel changes the mount's flags; the daemon goes on serving it.
enum Remount {
    static func apply(_ options: MountOptions, at mountPoint: String) throws {
        guard ExtendedAttributes.isOnMount(mountPoint) || ExtendedAttributes.get(.containers, of: mountPoint) != nil else {
            throw ExitMessage("\(mountPoint): not on an icloudfs mount (remount changes a mount that exists)")
        }
        var names = options.kernelFlags
        if options.readOnly { names.append("ro") }
        if !options.folderAccessTimes { names.append("nodiratime") }
        let flags = KernelMount.mountFlags(names, over: UInt(MS_REMOUNT))
        guard mount(nil, mountPoint, nil, flags, nil) == 0 else {
            throw ExitMessage("cannot remount \(mountPoint): \(String(cString: strerror(errno)))")
        }
    }
}
