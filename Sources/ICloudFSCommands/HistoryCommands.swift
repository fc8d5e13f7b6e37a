import ArgumentParser
import ContainerFormat
import Foundation
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
                String(version.seq).padding(8), HistoryAttributes.localTime(time).padding(20),
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
        guard ExtendedAttributes.isOnMount(file) else { throw ExitMessage("\(file): not on an icloudfs mount") }
        if let name, name.contains("/") { throw ExitMessage("--as takes a name, not a path: \(name)") }
        do {
            try ExtendedAttributes.set("user.icloud.restore", name.map { "\(version)\n\($0)" } ?? "\(version)", of: file)
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
        guard ExtendedAttributes.isOnMount(file) else { throw ExitMessage("\(file): not on an icloudfs mount") }
        guard let json = ExtendedAttributes.get("user.icloud.versions", of: file) else {
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
