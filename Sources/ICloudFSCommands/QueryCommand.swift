import ArgumentParser
import ContainerFormat
import Foundation
import Replica

/// `icloudfs query MOUNT [conditions] [--json] [--live]`: the items of the container that
/// meet the conditions, answered by the mount's daemon from its tree (docs/SEMANTICS.md
/// "Metadata queries").
struct QueryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "query",
        abstract: "List the items that meet conditions on name and sync state, answered by the mount (no walk).",
        discussion: """
            Prints one path per line (--json: one JSON object per item, with its kind, size, \
            time and sync state). With --live, the first complete result, then a marker line, \
            then each item added, changed or removed as it happens (Ctrl-C ends): `+ PATH`, \
            `~ PATH`, `- PATH`, or JSON lines {"change":...,"item":...}.
            """)

    @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String
    @Option(help: "documents (the Documents folder), data (everything else) or all.")
    var scope: MetadataQuery.Scope = .all
    @Option(help: "A shell pattern the item's name must match, e.g. '*.txt'.") var name: String?
    @Flag(help: "Files whose content is all on this device.") var downloaded = false
    @Flag(help: "Files whose content is not all on this device.") var notDownloaded = false
    @Flag(help: "Items with changes not yet all in the store.") var uploading = false
    @Flag(help: "Items with conflict copies.") var conflicts = false
    @Option(help: "Items of this kind: file, folder, symlink, fifo, socket, char, block (repeat for several).")
    var kind: [String] = []
    @Option(help: "Files of at least this size, e.g. 10K, 5M.") var minSize: String?
    @Option(help: "Files of at most this size.") var maxSize: String?
    @Option(help: "Items modified at or after TIME: 2026-11-01, 2026-11-01T10:00:00Z, or an age like 2h, 7d.")
    var modifiedAfter: String?
    @Option(help: "Items modified before TIME (as --modified-after).") var modifiedBefore: String?
    @Option(help: "Files with at least this percent of their content on this device.") var minPercentDownloaded: Double?
    @Option(help: "Files with at most this percent of their content on this device.") var maxPercentDownloaded: Double?
    @Flag(help: "JSON lines instead of paths.") var json = false
    @Flag(help: "Keep printing changes after the first result.") var live = false

    func validate() throws {
        if downloaded && notDownloaded { throw ValidationError("--downloaded and --not-downloaded exclude each other") }
        _ = try makeQuery()
    }

    /// The query the options ask for; a value that cannot be read fails with what was expected.
    private func makeQuery() throws -> MetadataQuery {
        var query = MetadataQuery(
            scope: scope, name: name, downloaded: downloaded ? true : notDownloaded ? false : nil,
            uploading: uploading ? true : nil, conflicts: conflicts ? true : nil)
        if !kind.isEmpty {
            let known = ["file", "folder", "symlink", "fifo", "socket", "char", "block"]
            for given in kind where !known.contains(given) {
                throw ValidationError("--kind \(given): not a kind (\(known.joined(separator: ", ")))")
            }
            query.kinds = Set(kind)
        }
        func size(_ option: String, _ text: String?) throws -> UInt64? {
            guard let text else { return nil }
            guard let size = MountOptions.size(text) else { throw ValidationError("\(option) \(text): not a size (like 10K or 5M)") }
            return size
        }
        query.minimumSize = try size("--min-size", minSize)
        query.maximumSize = try size("--max-size", maxSize)
        query.modifiedAfter = try modifiedAfter.map { try Self.time("--modified-after", $0) }
        query.modifiedBefore = try modifiedBefore.map { try Self.time("--modified-before", $0) }
        for (option, percent) in [("--min-percent-downloaded", minPercentDownloaded), ("--max-percent-downloaded", maxPercentDownloaded)] {
            if let percent, !(0...100).contains(percent) { throw ValidationError("\(option) \(percent): not a percent (0 to 100)") }
        }
        query.minimumPercentDownloaded = minPercentDownloaded
        query.maximumPercentDownloaded = maxPercentDownloaded
        return query
    }

    /// An ISO 8601 date (midnight UTC) or time, or an age (`2h`: that long ago).
    static func time(_ option: String, _ text: String) throws -> Timestamp {
        if let age = MountOptions.duration(text), text.last?.isLetter == true {
            let seconds = Date().timeIntervalSince1970 - Double(age.components.seconds)
            return Timestamp(seconds: Int64(seconds.rounded(.down)))
        }
        let full = ISO8601DateFormatter()
        let fraction = ISO8601DateFormatter()
        fraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        guard let date = full.date(from: text) ?? fraction.date(from: text) ?? day.date(from: text) else {
            throw ValidationError("\(option) \(text): not a time (2026-11-01, 2026-11-01T10:00:00Z, or an age like 2h, 7d)")
        }
        let seconds = date.timeIntervalSince1970
        let whole = seconds.rounded(.down)
        return Timestamp(seconds: Int64(whole), nanoseconds: UInt32(((seconds - whole) * 1e9).rounded(.down)))
    }

    func run() async throws {
        let query = try makeQuery()
        let client = try ControlClient(mountRoot: mountPoint)
        try client.send(.query(QueryRequest(query: query, live: live, details: json)))
        var text = ""
        loop: while let answer = client.next() {
            switch answer {
            case .item(let item):
                // --json: the item's line as it came; else its path.
                text += json ? item + "\n" : (QueryCommand.unquoted(item) ?? item) + "\n"
                if text.utf8.count > 1 << 20 {
                    write(text)
                    text = ""
                }
            case .result(let data):
                let count = (try? FormatCoding.decode([String: Int].self, from: data))?["count"] ?? 0
                write(text)
                guard live else { return }
                write(json ? "{\"gathered\":\(count)}\n" : "-- \(count) item(s); changes follow (Ctrl-C ends)\n")
                break loop
            case .failed(let message): throw ExitMessage(message)
            default: continue
            }
        }
        while let answer = client.next() {
            guard case .change(let data) = answer, let change = try? FormatCoding.decode(QueryChange.self, from: data) else { continue }
            if json {
                write(String(decoding: data, as: UTF8.self) + "\n")
            } else {
                let mark = switch change.change {
                case .added: "+"
                case .changed: "~"
                case .removed: "-"
                }
                write("\(mark) \(change.item.path)\n")
            }
        }
    }

    /// The text of a JSON string (a path as the daemon quoted it), or nil if it is not one.
    static func unquoted(_ json: String) -> String? {
        guard json.hasPrefix("\""), json.hasSuffix("\""), json.count >= 2 else { return nil }
        guard json.contains("\\") else { return String(json.dropFirst().dropLast()) }
        return try? FormatCoding.decode(String.self, from: Data(json.utf8))
    }

    /// Straight to the descriptor: a pipe sees each line as it comes.
    private func write(_ text: String) { FileHandle.standardOutput.write(Data(text.utf8)) }
}

extension MetadataQuery.Scope: ExpressibleByArgument {}
