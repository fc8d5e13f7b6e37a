import ArgumentParser
import ContainerFormat
import Foundation
import Replica

/// `icloudfs containers MOUNT [--json]`: the containers a mount shows (every one under
/// `mount --all`, else the one), each with its items, size and sync state.
struct ContainersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "containers",
        abstract: "List the containers of a mount with their items, size and sync state.",
        discussion: """
            MOUNT is a mount of all containers (mount --all) or of one. STATE is synced, \
            uploading N, downloading N, N conflicts, or the error that stops uploads. --json \
            prints one JSON object per container.
            """)

    @Argument(help: "The mount point.") var mountPoint: String
    @Flag(help: "One JSON object per line instead of a table.") var json = false

    func run() async throws {
        let roots: [String]
        if let names = ExtendedAttributes.get(.containers, of: mountPoint) {
            roots = names.split(separator: "\n").map { "\(mountPoint)/\(ContainerFolder.name(of: String($0)))" }
        } else {
            roots = [mountPoint]
        }
        var rows: [(path: String, summary: ContainerSummary)] = []
        for root in roots {
            let client = try ControlClient(mountRoot: root)
            try client.send(.summary)
            switch client.next() {
            case .result(let data):
                rows.append((root, try FormatCoding.decode(ContainerSummary.self, from: data)))
            case .failed(let message):
                throw ExitMessage("\(root): \(message)")
            default:
                throw ExitMessage("\(root): the mount did not answer (is icloudfs the same version?)")
            }
        }
        if json {
            for (path, summary) in rows {
                var object = try JSONSerialization.jsonObject(with: FormatCoding.encode(summary)) as? [String: Any] ?? [:]
                object["path"] = path
                object["state"] = summary.state
                let line = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                FileHandle.standardOutput.write(line + Data("\n".utf8))
            }
            return
        }
        let width = max(9, rows.map(\.summary.container.count).max() ?? 0) + 2
        print(StatusTable.pad("CONTAINER", width) + StatusTable.pad("ITEMS", 8) + StatusTable.pad("SIZE", 11)
            + StatusTable.pad("LOCAL", 12) + "STATE")
        for (_, summary) in rows {
            print(StatusTable.pad(summary.container, width) + StatusTable.pad("\(summary.items)", 8)
                + StatusTable.pad(ProgressLine.bytes(summary.bytes), 11)
                + StatusTable.pad("\(summary.downloaded)/\(summary.files)", 12) + summary.state)
        }
    }
}
