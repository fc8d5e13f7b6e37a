import ContainerFormat
import Foundation

/// One remote change as `icloudfs monitor` shows it: a line of `CACHE/events.jsonl`.
public struct ChangeEvent: Codable, Sendable {
    public var time: String
    /// created, modified, attributes, moved, deleted, conflict
    public var kind: String
    public var path: String
    public var device: String
    public var item: String
}

/// Remote changes as they arrive, one JSON object per line in `CACHE/events.jsonl`, which
/// `icloudfs monitor` follows (like NSMetadataQuery / `brctl monitor`).
struct EventLog: Sendable {
    let path: String

    typealias Event = ChangeEvent

    /// Starts a new log for this mount (the previous one is kept as `.1`).
    init(folder: String) {
        path = "\(folder)/events.jsonl"
        try? FileManager.default.removeItem(atPath: path + ".1")
        try? FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        _ = FileManager.default.createFile(atPath: path, contents: nil)
    }

    /// The events one applied journal entry stands for.
    static func events(for commit: Commit, seq: UInt64, in tree: Tree, outcome: FoldOutcome) -> [Event] {
        let time = ISO8601DateFormatter().string(from: Date())
        var events: [Event] = []
        for op in commit.ops {
            let kind: String
            switch op {
            case .create: kind = "created"
            case .update(let update): kind = update.content == nil ? "attributes" : "modified"
            case .move: kind = "moved"
            case .delete: kind = "deleted"
            }
            let id = op.itemID
            events.append(Event(time: time, kind: kind, path: tree.path(of: id) ?? id.rawValue, device: commit.device, item: id.rawValue))
        }
        for id in outcome.changed.sorted() {
            guard let item = tree.item(id), item.conflictOf != nil, item.version == seq else { continue }
            events.append(Event(time: time, kind: "conflict", path: tree.path(of: id) ?? id.rawValue, device: commit.device, item: id.rawValue))
        }
        return events
    }

    func append(_ events: [Event]) {
        guard !events.isEmpty, let handle = FileHandle(forWritingAtPath: path) else { return }
        defer { try? handle.close() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var data = Data()
        for event in events {
            guard let line = try? encoder.encode(event) else { continue }
            data.append(line)
            data.append(UInt8(ascii: "\n"))
        }
        _ = try? handle.seekToEnd()
        try? handle.write(contentsOf: data)
    }
}
