import Foundation

/// The kernel's read-ahead for a FUSE mount starts at 128 KiB (the default of every new
/// backing device), so a sequential read reaches the daemon as 128 KiB requests, a few in
/// flight: cold reads of a local copy ran at 312 MB/s here, 537 MB/s with 4 MiB (ext4 on
/// this disk reads ahead 8 MiB). Only root may raise it (sysfs); others keep the default.
enum KernelReadAhead {
    static let kibibytes = 4096

    /// Raises the read-ahead of the mount at `mountPoint` (an absolute path without symlinks,
    /// as /proc/self/mountinfo shows it). Found through mountinfo, never by a `stat` of the
    /// mount point, which would wait for the filesystem's own loop.
    static func raise(forMountAt mountPoint: String) -> String? {
        guard let mounts = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8),
            let device = mounts.split(separator: "\n").reversed().lazy.compactMap({ line -> Substring? in
                // ID PARENT MAJOR:MINOR ROOT MOUNTPOINT ...
                let fields = line.split(separator: " ", maxSplits: 5)
                guard fields.count > 4, MountTable.unescaped(fields[4]) == mountPoint else { return nil }
                return fields[2]
            }).first
        else { return "the mount is not in /proc/self/mountinfo" }
        let path = "/sys/class/bdi/\(device)/read_ahead_kb"
        do {
            try "\(kibibytes)\n".write(toFile: path, atomically: false, encoding: .utf8)
            return nil
        } catch {
            return "cannot write \(path): \(error.localizedDescription)"
        }
    }
}
