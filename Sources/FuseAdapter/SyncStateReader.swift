import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The programs `listxattr` shows the computed `user.icloud.*` sync state to, so that
/// `getfattr -d FILE` keeps showing it. Every other program (`cp -a`, `rsync -X`, `tar
/// --xattrs`, backups) lists only the attributes stored with the file: the sync state is
/// this mount's, and copied elsewhere it was stale and misleading. Any program still reads
/// it by name (`getfattr -n user.icloud.isDownloaded`), as CephFS answers its own.
enum SyncStateReader {
    /// Programs whose job is to show attributes: attr's `getfattr` and `attr -l`, and the
    /// Python `xattr` tool.
    static let programs: Set<String> = ["getfattr", "attr", "xattr"]

    /// Whether process `pid` runs one of `programs` (its `comm`, as `ps` shows it).
    static func isRunning(_ pid: pid_t) -> Bool {
        guard pid > 0 else { return false }
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = read(fd, &buffer, buffer.count)
        guard count > 0 else { return false }
        let name = String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .newlines)
        return programs.contains(name)
    }
}
