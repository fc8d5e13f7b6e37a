import BlobStoreS3
import ContainerFormat
import Foundation
import Replica

/// Every decoder of bytes icloudfs does not control, as a fuzz target: whatever the input,
/// each must return or throw, never trap, hang or exhaust memory.
/// `Scripts/fuzz` runs them under libFuzzer; the test run replays `Tests/Fuzz/Corpus`.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// A journal entry from the store, then the fold of it into a tree (twice: the second
    /// time its operations meet the items the first made, so conflicts are exercised).
    case journal
    /// A snapshot from the store, validated and, if valid, made into a tree.
    case snapshot
    /// A queued local change from the state database.
    case localChange = "local-change"
    /// Packed byte ranges and chunk lists from the state database.
    case localRecords = "local-records"
    /// An S3 answer: a list page or an error body.
    case s3XML = "s3-xml"
    /// A key-value store record from the store, applied to a table (twice: the second time
    /// it meets its own writes).
    case keyValueRecord = "kv-record"

    public func run(_ data: Data) {
        switch self {
        case .journal:
            guard let commit = try? JournalCoding.decode(data) else { return }
            var tree = FuzzTarget.seedTree
            _ = tree.apply(commit, seq: tree.head + 1)
            _ = tree.apply(commit, seq: tree.head + 1)
            for id in tree.allIDs { _ = tree.path(of: id) }
        case .snapshot:
            guard let snapshot = try? SnapshotCoding.decode(data),
                Snapshot.problem(in: snapshot.items, seq: snapshot.seq) == nil
            else { return }
            let tree = Tree(items: snapshot.items, head: snapshot.seq)
            for id in tree.allIDs { _ = tree.path(of: id) }
        case .localChange:
            _ = try? LocalChangeCoding.decode(data)
        case .localRecords:
            _ = try? StateDatabase.decodeRanges(data)
            _ = StateDatabase.decodeChunks(data)
        case .s3XML:
            _ = try? S3XML.listPage(data)
            _ = S3XML.errorBody(data)
        case .keyValueRecord:
            guard let record = try? KeyValueRecord.decode(data) else { return }
            var table = KeyValueTable()
            table.apply(record)
            table.apply(record)
            _ = KeyValueLimits.problem(withStore: table.values)
        }
    }

    /// A folder and a file at seq 1, for fuzzed journal entries to meet.
    static let seedTree: Tree = {
        var tree = Tree()
        let folder = ItemID("folder")
        let commit = Commit(
            commitID: "seed", device: "seed", deviceID: "seed", time: .zero,
            ops: [
                .create(.init(id: folder, parent: .root, name: "Documents", kind: .folder, mode: 0o755, mtime: .zero)),
                .create(.init(id: ItemID("file"), parent: folder, name: "notes.txt", kind: .file, mode: 0o644, mtime: .zero)),
            ])
        _ = tree.apply(commit, seq: 1)
        return tree
    }()

    /// Runs every file in `corpus/<target>/` through its target; the count of inputs run.
    public static func replay(corpus: String) -> Int {
        var count = 0
        for target in allCases {
            let folder = "\(corpus)/\(target.rawValue)"
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for name in names.sorted() {
                guard let data = FileManager.default.contents(atPath: "\(folder)/\(name)") else { continue }
                target.run(data)
                count += 1
            }
        }
        return count
    }
}
