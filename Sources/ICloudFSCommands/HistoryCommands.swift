import ArgumentParser
import ContainerFormat
import Foundation
import SyncAttributes
import Replica

#if canImport(Glibc)
import Glibc
#endif

/// `icloudfs versions FILE [--json]`
struct VersionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "versions",
        abstract: "List a file's versions, newest first: when, by which device, size, and the SEQ to restore.",
        discussion: "Earlier versions are kept for the container's retention period after they were replaced.")

    @Flag(help: "One JSON array: seq, time (seconds and nanoseconds since 1970, UTC), device, size, current.")
    var json = false

    @Argument(help: "A file on an icloudfs mount.")
    var file: String

    func run() async throws {
        let versions = try HistoryAttributes.versions(of: file)
        if json {
            print(String(decoding: FormatCoding.encode(versions), as: UTF8.self))
            return
        }
        print("SEQ".padding(8), "TIME".padding(20), "DEVICE".padding(16), "SIZE")
        for version in versions {
            let time = Date(timeIntervalSince1970: TimeInterval(version.time.seconds))
            print(
                // A version still queued here has a provisional number until it lands.
                (version.seq >= DeviceView.provisionalBase ? "queued" : String(version.seq)).padding(8),
                HistoryAttributes.localTime(time).padding(20),
                version.device.padding(16), "\(version.size)\(version.current ? "  (current)" : "")")
        }
    }
}

/// `icloudfs restore FILE --version SEQ [--as NAME]`
struct RestoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Make an earlier version of a file current again, or write it beside the file.",
        discussion: """
            Restoring is a change like an edit: it syncs to the other devices, and meets a \
            concurrent edit as any edit does (a conflict copy).
            """)

    @Option(help: "The version's SEQ (icloudfs versions lists them).")
    var version: UInt64

    @Option(name: .customLong("as"), help: "A new name, in the file's folder, for a copy of that version.")
    var name: String?

    @Argument(help: "A file on an icloudfs mount.")
    var file: String

    func run() async throws {
        guard ExtendedAttributes.isOnMount(file) else { throw ExitMessage("\(file): \(ExtendedAttributes.notOnMount(file))") }
        if let name, name.contains("/") { throw ExitMessage("--as takes a name, not a path: \(name)") }
        do {
            try ExtendedAttributes.set(.restore, name.map { "\(version)\n\($0)" } ?? "\(version)", of: file)
        } catch let error as ExtendedAttributes.Failure {
            switch error.code {
            case EINVAL: throw ExitMessage("\(file): no version \(version) is kept (icloudfs versions \(file) lists them)")
            case EBUSY: throw ExitMessage("\(file): open or being written here; close it and try again")
            case EEXIST: throw ExitMessage("\(file): \(name ?? "") exists in its folder; choose another name")
            default: throw ExitMessage("\(file): \(error)")
            }
        }
    }
}

enum HistoryAttributes {
    static func versions(of file: String) throws -> [FileVersion] {
        guard ExtendedAttributes.isOnMount(file) else { throw ExitMessage("\(file): \(ExtendedAttributes.notOnMount(file))") }
        guard let json = ExtendedAttributes.get(.versions, of: file) else {
            throw ExitMessage("\(file): not a file (only files have versions)")
        }
        return try FormatCoding.decode([FileVersion].self, from: Data(json.utf8))
    }

    /// `YYYY-MM-DD HH:MM:SS` in the local time zone.
    static func localTime(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02d %02d:%02d:%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

extension String {
    /// Left-aligned in `width` columns (at least one space after).
    fileprivate func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}

/// `icloudfs deleted MOUNTPOINT [PATH] [--json]`
struct DeletedCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deleted",
        abstract: "List recently deleted files and folders, newest first: when, by which device, where they were.",
        discussion: "icloudfs undelete brings one back (a folder with what was deleted with it).")

    @Flag(help: "One JSON array: id, path, folder, size, time, device.")
    var json = false

    @Argument(help: "The mount point.")
    var mountPoint: String

    @Argument(help: "Only what was at or below this path (from the mount point).")
    var path: String?

    func run() async throws {
        let items = try DeletedListing.items(mountRoot: mountPoint, under: path)
        if json {
            print(String(decoding: FormatCoding.encode(items), as: UTF8.self))
            return
        }
        if items.isEmpty {
            print("nothing deleted is kept\(path.map { " at or below \($0)" } ?? "")")
            return
        }
        print("DELETED".padding(20), "DEVICE".padding(12), "SIZE".padding(10), "PATH")
        for item in items {
            let time = Date(timeIntervalSince1970: TimeInterval(item.time.seconds))
            let size = item.folder ? "-" : String(item.size)
            let shown = String(decoding: NameBytes.bytes(item.path), as: UTF8.self) + (item.folder ? "/" : "")
            print(HistoryAttributes.localTime(time).padding(20), item.device.padding(12), size.padding(10), "\(shown)  [\(item.id)]")
        }
    }
}

/// `icloudfs undelete PATH|ID [--as NAME]`
struct UndeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "undelete",
        abstract: "Bring back a deleted file or folder where it was (a folder with what was deleted with it).",
        discussion: """
            PATH is where the item was, on a mount (its newest deletion there); ID is one \
            icloudfs deleted lists (then --mount names the mount, if the current folder is \
            not on it). Undeleting is a change like a rename: it syncs to the other devices.
            """)

    @Argument(help: "Where the deleted item was, or its id.")
    var target: String

    @Option(name: .customLong("as"), help: "A new name for it, in the folder it was in.")
    var name: String?

    @Option(help: "The mount, for an ID (default: the one the current folder is on).")
    var mount: String?

    func run() async throws {
        if let name, name.contains("/") { throw ExitMessage("--as takes a name, not a path: \(name)") }
        let absolute = URL(fileURLWithPath: target).standardizedFileURL.path
        let root = try DeletedListing.mountRoot(of: mount ?? absolute)
        let relative = absolute.hasPrefix(root + "/") ? String(absolute.dropFirst(root.count + 1)) : nil
        let items = try DeletedListing.items(mountRoot: root, under: nil)
        let escaped = relative.map { NameBytes.string(Array($0.utf8)) }
        guard let item = items.first(where: { $0.path == escaped }) ?? items.first(where: { $0.id == target }) else {
            throw ExitMessage("\(target): nothing deleted is kept there (icloudfs deleted \(root) lists what is)")
        }
        do {
            try ExtendedAttributes.set(.undelete, name.map { "\(item.id)\n\($0)" } ?? item.id, of: root)
        } catch let error as ExtendedAttributes.Failure {
            throw ExitMessage("\(target): \(error)")
        }
        print("\(root)/\(String(decoding: NameBytes.bytes(item.path), as: UTF8.self))\(item.folder ? "/" : "") is back"
            + (name.map { " as \($0)" } ?? ""))
    }
}

enum DeletedListing {
    /// The deleted items the mount at `mountRoot` keeps (at or below `path`).
    static func items(mountRoot: String, under path: String?) throws -> [DeletedItem] {
        let root = try self.mountRoot(of: mountRoot)
        let client = try ControlClient(mountRoot: root)
        try client.send(.deleted(under: path.map { $0.split(separator: "/").joined(separator: "/") }))
        switch client.next() {
        case .result(let json)?: return try FormatCoding.decode([DeletedItem].self, from: json)
        case .failed(let message)?: throw ExitMessage("\(mountRoot): \(message)")
        default: throw ExitMessage("\(mountRoot): the mount gave no listing")
        }
    }

    /// The mount point holding `path` (or the nearest existing folder above it).
    static func mountRoot(of path: String) throws -> String {
        var current = URL(fileURLWithPath: path).standardizedFileURL
        while !ExtendedAttributes.isOnMount(current.path) {
            guard current.path != "/" else { throw ExitMessage("\(path): \(ExtendedAttributes.notOnMount(path))") }
            current.deleteLastPathComponent()
        }
        while current.path != "/" {
            let parent = current.deletingLastPathComponent()
            var here = stat()
            var above = stat()
            guard stat(current.path, &here) == 0, stat(parent.path, &above) == 0, here.st_dev == above.st_dev else { break }
            current = parent
        }
        return current.path
    }
}

/// `icloudfs policy MOUNTPOINT [--versions D] [--deleted D]`
struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Show or set how long the container keeps earlier versions and deleted items.",
        discussion: """
            Durations like 30d, 12h, 2w (default 30d each). The policy is the container's: \
            set on one device, it holds on all (an entry of the journal; needs the store).
            """)

    @Argument(help: "The mount point.")
    var mountPoint: String

    @Option(help: "How long an earlier version is kept after it was replaced.")
    var versions: String?

    @Option(help: "How long a deleted item is kept after it was deleted.")
    var deleted: String?

    @Option(help: ArgumentHelp(
        "How long collection waits between choosing what to delete and deleting it (default 1h).",
        discussion: "Every device must be able to write a commit within a quarter of it after checking the store."))
    var grace: String?

    func run() async throws {
        let root = try DeletedListing.mountRoot(of: mountPoint)
        var fields: [String] = []
        for (name, text) in [("versions", versions), ("deleted", deleted), ("grace", grace)] {
            guard let text else { continue }
            guard let duration = MountOptions.duration(text) else {
                throw ExitMessage("--\(name) \(text): expected a duration like 30d, 12h or 90s")
            }
            fields.append("\(name)=\(duration.components.seconds)")
        }
        if !fields.isEmpty {
            do {
                try ExtendedAttributes.set(.policy, fields.joined(separator: " "), of: root)
            } catch let error as ExtendedAttributes.Failure {
                throw ExitMessage("\(mountPoint): the policy was not set: \(error) (it needs the store)")
            }
        }
        guard let shown = ExtendedAttributes.get(.policy, of: root) else {
            throw ExitMessage("\(mountPoint): not an icloudfs mount point")
        }
        let values = Dictionary(uniqueKeysWithValues: shown.split(separator: " ").compactMap { field -> (String, Int64)? in
            let parts = field.split(separator: "=")
            return parts.count == 2 ? (String(parts[0]), Int64(parts[1]) ?? 0) : nil
        })
        print("versions kept \(Self.days(values["versions"] ?? 0)) after they are replaced")
        print("deleted items kept \(Self.days(values["deleted"] ?? 0)) after they are deleted")
        print("collection waits \(Self.days(values["grace"] ?? 0)) before it deletes")
    }

    /// `30 days`, `12 hours`, `90 seconds`.
    static func days(_ seconds: Int64) -> String {
        if seconds % 86_400 == 0 { return "\(seconds / 86_400) day\(seconds == 86_400 ? "" : "s")" }
        if seconds % 3600 == 0 { return "\(seconds / 3600) hour\(seconds == 3600 ? "" : "s")" }
        return "\(seconds) second\(seconds == 1 ? "" : "s")"
    }
}
