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

    @Argument(help: "The mount point.") var mountPoint: String
    @Option(help: "documents (the Documents folder), data (everything else) or all.")
    var scope: MetadataQuery.Scope = .all
    @Option(help: "A shell pattern the item's name must match, e.g. '*.txt'.") var name: String?
    @Flag(help: "Files whose content is all on this device.") var downloaded = false
    @Flag(help: "Files whose content is not all on this device.") var notDownloaded = false
    @Flag(help: "Items with changes not yet all in the store.") var uploading = false
    @Flag(help: "Items with conflict copies.") var conflicts = false
    @Flag(help: "JSON lines instead of paths.") var json = false
    @Flag(help: "Keep printing changes after the first result.") var live = false

    func validate() throws {
        if downloaded && notDownloaded { throw ValidationError("--downloaded and --not-downloaded exclude each other") }
    }

    func run() async throws {
        let query = MetadataQuery(
            scope: scope, name: name, downloaded: downloaded ? true : notDownloaded ? false : nil,
            uploading: uploading ? true : nil, conflicts: conflicts ? true : nil)
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
