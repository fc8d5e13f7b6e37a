import ContainerFormat
import Foundation
import Replica

extension FuzzTarget {
    /// Valid and nearly valid inputs a fuzzer starts from (`icloudfs-fuzz --seed CORPUS`
    /// writes them): mutations of well-formed inputs reach deeper than random bytes.
    public var seeds: [Data] {
        switch self {
        case .journal:
            let folder = ItemID("folder")
            let valid = Commit(
                commitID: "c1", device: "phone", deviceID: "d1", time: Timestamp(seconds: 1_700_000_000),
                ops: [
                    .create(.init(id: ItemID("n1"), parent: folder, name: "caf\u{E9}.txt", kind: .file, mode: 0o644, mtime: .zero)),
                    .update(.init(id: ItemID("file"), base: 1, mode: 0o600)),
                    .delete(.init(id: ItemID("n1"), base: 0)),
                ])
            return [
                JournalCoding.encode(valid, as: .json),
                JournalCoding.encode(valid, as: .binary),
                Data(#"{"format":1,"commit":"x","device":"/\u0301","deviceID":"d","time":{"s":-9223372036854775808,"ns":0},"ops":[]}"#.utf8),
                Data(#"{"format":1,"commit":"g","device":"d","deviceID":"d","time":{"s":0,"ns":0},"ops":[{"op":"delete","id":"file","base":1}]}"#.utf8),
            ]
        case .snapshot:
            var tree = FuzzTarget.seedTree
            _ = tree.apply(
                Commit(
                    commitID: "c2", device: "d", deviceID: "d", time: .zero,
                    ops: [.delete(.init(id: ItemID("file"), base: 1))]), seq: 2)
            return [SnapshotCoding.encode(Snapshot(of: tree)), SnapshotCoding.encode(Snapshot(of: FuzzTarget.seedTree))]
        case .localChange:
            let change = LocalChange(
                localID: 3, time: Timestamp(seconds: 5, nanoseconds: 6),
                ops: [.create(.init(id: ItemID("n"), parent: .root, name: "new", kind: .file, mode: 0o644, mtime: .zero))],
                dependencies: [0: 2])
            return [LocalChangeCoding.encode(change)]
        case .localRecords:
            return [
                StateDatabase.encode(ByteRanges([123..<4096, 1 << 20..<2 << 20])),
                StateDatabase.encode([ChunkRef(hash: ChunkHash(of: Data("x".utf8)), size: 1)]),
            ]
        case .keyValueRecord:
            let record = KeyValueRecord(
                device: "laptop", deviceID: "3F2A", time: Timestamp(seconds: 1_732_320_000, nanoseconds: 5),
                set: ["level": .integer(3), "name": .string("Ada"), "ratio": .real(0.5), "on": .bool(true),
                      "cities": .array([.string("Oslo")]), "nested": .dictionary(["a": .array([])])],
                removed: ["old"])
            return [FormatCoding.encode(record), Data(#"{"format":1,"set":{},"removed":[]}"#.utf8)]
        case .s3XML:
            return [
                Data(
                    #"<?xml version="1.0"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Contents><Key>c/journal/00000000000000000001</Key></Contents><IsTruncated>true</IsTruncated><NextContinuationToken>t</NextContinuationToken></ListBucketResult>"#
                        .utf8),
                Data(#"<Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message><BucketName>b</BucketName></Error>"#.utf8),
            ]
        }
    }

    /// Writes every target's seeds into `corpus/<target>/seed-N`.
    public static func writeSeeds(corpus: String) throws {
        for target in allCases {
            let folder = "\(corpus)/\(target.rawValue)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            for (index, seed) in target.seeds.enumerated() {
                try seed.write(to: URL(fileURLWithPath: "\(folder)/seed-\(index)"))
            }
        }
    }
}
