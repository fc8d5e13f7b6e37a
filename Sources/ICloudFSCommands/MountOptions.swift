import Foundation
import FuseAdapter
import Replica

/// Every `-o` option of mount.icloudfs(8) (docs/man), parsed once; `mount.icloudfs`, `icloudfs mount` and
/// fstab all arrive here.
public struct MountOptions: Sendable, Equatable {
    public var store: String?
    public var cache: String?
    public var device: String?
    public var poll: Duration = .seconds(2)
    public var readOnly = false
    public var allowOther = false
    public var defaultPermissions = false
    public var acl = false
    public var uid: UInt32?
    public var gid: UInt32?
    public var umask: UInt32?
    public var foreground = false
    public var debug = false
    /// Every container of the store, one folder each (`mount --all`).
    public var all = false
    /// Desktop notifications (`DesktopNotifier`), and how long uploads must stay stopped
    /// before one says so.
    public var notify = true
    public var notifyWait: Duration = .seconds(600)
    /// Programs that may not download by reading (`nohydrate=`; FuseMountOptions).
    public var noHydrate = FuseMountOptions.defaultNoHydrate
    public var greedy = false
    /// Reads of downloaded files served by the kernel itself (FUSE passthrough; as root).
    public var passthrough = true
    /// Collect the container in the background (daily at most); `nogc` leaves it to others.
    public var autoCollect = true
    public var offline = false
    public var cacheSize: UInt64 = 10 << 30
    /// Upload bandwidth limit in bytes per second; nil is unlimited.
    public var uploadLimit: UInt64?
    /// How long a read waits for content another device is still uploading.
    public var uploadWait: Duration = .seconds(60)
    /// How long a read waits for a store out of reach before it fails.
    public var offlineWait: Duration = .seconds(15)
    /// When reads move access times (`relatime` by default, `strictatime`, `noatime`), and
    /// whether listing a folder does (`nodiratime` says no).
    public var accessTimes = AccessTimeRule.relative
    public var folderAccessTimes = true
    /// `remount`: change the flags of a mount that exists (`mount -o remount,ro`).
    public var remount = false
    /// `noexec`, `nosuid`, `nodev` and the like, in the order given.
    public var kernelFlags: [String] = []

    public init() {}

    /// Options mount(8) passes through that mean nothing to a FUSE filesystem.
    static let ignored: Set<String> = [
        "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "nofail", "_netdev", "async",
        // What /proc/mounts shows of a FUSE mount, which mount(8) passes back on a remount.
        "user_id", "group_id", "max_read", "blksize",
    ]

    /// Options that are the kernel's own mount flags, handed to it as they are (`noexec`
    /// must not be dropped: mount(8) adds it for `user` mounts).
    static let kernelFlagNames: Set<String> = [
        "exec", "noexec", "suid", "nosuid", "dev", "nodev", "sync", "dirsync",
    ]

    /// Parses comma-separated `-o` lists; throws with the option named on anything unknown.
    public mutating func parse(_ list: String) throws(MountOptionError) {
        for option in list.split(separator: ",").map(String.init) where !option.isEmpty {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            let value = parts.count > 1 ? parts[1] : nil
            if let handler = MountOptions.handlers[name] {
                try handler(&self, Given(option: option, name: name, value: value))
            } else if MountOptions.kernelFlagNames.contains(name) && value == nil {
                kernelFlags.append(name)
            } else if !(MountOptions.ignored.contains(name) || name.hasPrefix("x-") || name == "comment") {
                throw .unknown(name)
            }
        }
    }

    /// One option as given: `name` or `name=value`.
    struct Given {
        let option: String
        let name: String
        let value: String?

        func required() throws(MountOptionError) -> String {
            guard let value, !value.isEmpty else { throw .missingValue(name) }
            return value
        }

        func duration(_ example: String) throws(MountOptionError) -> Duration {
            guard let duration = MountOptions.duration(try required()) else { throw .badValue(option, example) }
            return duration
        }
    }

    /// Every option with a meaning of its own (the man page lists each: a test checks).
    static let handlers: [String: @Sendable (inout MountOptions, Given) throws(MountOptionError) -> Void] = [
        "store": { options, given throws(MountOptionError) in options.store = try given.required() },
        "cache": { options, given throws(MountOptionError) in options.cache = try given.required() },
        "device": { options, given throws(MountOptionError) in options.device = try given.required() },
        "poll": { options, given throws(MountOptionError) in options.poll = try given.duration("a duration like 2s or 500ms") },
        "ro": { options, _ throws(MountOptionError) in options.readOnly = true },
        "rw": { options, _ throws(MountOptionError) in options.readOnly = false },
        "remount": { options, _ throws(MountOptionError) in options.remount = true },
        // Access times are icloudfs's to move (the kernel leaves a FUSE file's alone);
        // `noatime` also goes to the kernel as a flag, which shows it in /proc/mounts.
        "relatime": { options, _ throws(MountOptionError) in options.accessTimes = .relative },
        "atime": { options, _ throws(MountOptionError) in options.accessTimes = .relative },
        "strictatime": { options, _ throws(MountOptionError) in options.accessTimes = .strict },
        "noatime": { options, _ throws(MountOptionError) in
            options.accessTimes = .never
            options.kernelFlags.append("noatime")
        },
        "diratime": { options, _ throws(MountOptionError) in options.folderAccessTimes = true },
        "nodiratime": { options, _ throws(MountOptionError) in options.folderAccessTimes = false },
        "allow_other": { options, _ throws(MountOptionError) in options.allowOther = true },
        "default_permissions": { options, _ throws(MountOptionError) in options.defaultPermissions = true },
        "acl": { options, _ throws(MountOptionError) in options.acl = true },
        "noacl": { options, _ throws(MountOptionError) in options.acl = false },
        "uid": { options, given throws(MountOptionError) in options.uid = try MountOptions.number(given.option, try given.required(), radix: 10) },
        "gid": { options, given throws(MountOptionError) in options.gid = try MountOptions.number(given.option, try given.required(), radix: 10) },
        "umask": { options, given throws(MountOptionError) in options.umask = try MountOptions.number(given.option, try given.required(), radix: 8) },
        "foreground": { options, _ throws(MountOptionError) in options.foreground = true },
        "all": { options, _ throws(MountOptionError) in options.all = true },
        "notify": { options, _ throws(MountOptionError) in options.notify = true },
        "nonotify": { options, _ throws(MountOptionError) in options.notify = false },
        "notify_wait": { options, given throws(MountOptionError) in
            options.notifyWait = try given.duration("a duration like 10m or 30s")
        },
        // `nohydrate=a:b` replaces the list, `nohydrate=+a:b` adds to it, `nohydrate=`
        // empties it (commas separate mount options).
        "nohydrate": { options, given throws(MountOptionError) in
            let value = given.value ?? ""
            let names = Set(value.drop { $0 == "+" }.split(separator: ":").map(String.init))
            options.noHydrate = value.hasPrefix("+") ? FuseMountOptions.defaultNoHydrate.union(names) : names
        },
        "debug": { options, _ throws(MountOptionError) in options.debug = true },
        "greedy": { options, _ throws(MountOptionError) in options.greedy = true },
        "nopassthrough": { options, _ throws(MountOptionError) in options.passthrough = false },
        "nogc": { options, _ throws(MountOptionError) in options.autoCollect = false },
        "offline": { options, _ throws(MountOptionError) in options.offline = true },
        "cache_size": { options, given throws(MountOptionError) in
            guard let size = MountOptions.size(try given.required()) else { throw .badValue(given.option, "a size like 10G or 500M") }
            options.cacheSize = size
        },
        "upload_limit": { options, given throws(MountOptionError) in
            guard let rate = MountOptions.size(try given.required()), rate > 0 else {
                throw .badValue(given.option, "bytes per second like 1M or 500K")
            }
            options.uploadLimit = rate
        },
        "upload_wait": { options, given throws(MountOptionError) in options.uploadWait = try given.duration("a duration like 60s") },
        "offline_wait": { options, given throws(MountOptionError) in options.offlineWait = try given.duration("a duration like 15s") },
    ]

    static func number(_ option: String, _ text: String, radix: Int) throws(MountOptionError) -> UInt32 {
        guard let value = UInt32(text, radix: radix) else { throw .badValue(option, "a number") }
        return value
    }

    /// `10G`, `500M`, `64K`, `1T` (powers of 1024), or plain bytes.
    public static func size(_ text: String) -> UInt64? {
        let units: [Character: UInt64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40]
        var digits = text.uppercased()
        if digits.hasSuffix("B") { digits.removeLast() }
        if let last = digits.last, let scale = units[last] {
            digits.removeLast()
            return Double(digits).flatMap { $0 >= 0 ? UInt64(exactly: ($0 * Double(scale)).rounded(.down)) : nil }
        }
        return UInt64(digits)
    }

    /// `2s`, `500ms`, `1m`, `12h`, `30d`, `2w`, or plain seconds.
    public static func duration(_ text: String) -> Duration? {
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86_400), ("w", 604_800)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).flatMap { milliseconds($0 * scale * 1000) }
        }
        return Double(text).flatMap { milliseconds($0 * 1000) }
    }

    /// Nil for negative, infinite or NaN values and for any beyond ten years (`1e300s`
    /// would not fit in the clock's integers).
    private static func milliseconds(_ value: Double) -> Duration? {
        guard value >= 0, let milliseconds = Int64(exactly: value.rounded()), milliseconds <= 10 * 365 * 86_400_000 else {
            return nil
        }
        return .milliseconds(milliseconds)
    }
}

public enum MountOptionError: Error, CustomStringConvertible {
    case unknown(String)
    case missingValue(String)
    case badValue(String, String)

    public var description: String {
        switch self {
        case .unknown(let name):
            "unknown mount option '\(name)' (see icloudfs mount --help for the options)"
        case .missingValue(let name): "mount option '\(name)' needs a value, like \(name)=..."
        case .badValue(let option, let expected): "mount option '\(option)': expected \(expected)"
        }
    }
}
