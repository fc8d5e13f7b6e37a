import BlobStore
import ContainerFormat
import Foundation
import Replica
import Testing

/// Journal entries are protobuf once the journal holds an entry of format 5 (FORMAT.md): the
/// first entry a device writes into an older journal is JSON, which readers of format 4 refuse
/// instead of skipping the protobuf entries after it.
struct JournalEncodingTests {
    @Test("a device writes JSON until the journal holds a format-5 entry, then protobuf; a restart and a new device remember")
    func firstJSONThenBinary() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let journal = "\(devices.container)/journal/"
        func entry(_ seq: UInt64) async throws -> Data {
            try await devices.store.get(try BlobKey(journal + String(format: "%020d", seq)), maximumSize: 1 << 20)
        }
        func isJSON(_ data: Data) -> Bool { data.first == UInt8(ascii: "{") }

        // An older journal: one entry of format 4, as a device before format 5 wrote it.
        var old = Commit(
            commitID: "old", device: "old", deviceID: "old", time: .zero,
            ops: [.create(.init(id: ItemID("old1"), parent: .root, name: "from-old", kind: .folder, mode: 0o755, mtime: .zero))])
        old.format = 4
        try await devices.store.putIfAbsent(try BlobKey(journal + String(format: "%020d", 1)), data: FormatCoding.encode(old))

        var a = try await devices.open("a")
        try await a.writeFile("one", Data("1".utf8))
        try await a.push()
        let first = try await entry(2)
        #expect(isJSON(first))
        #expect(try JournalCoding.decode(first).format == Commit.formatVersion)
        try await a.writeFile("two", Data("2".utf8))
        try await a.push()
        #expect(!isJSON(try await entry(3)))

        await a.stop()
        a = try await devices.open("a")
        try await a.writeFile("three", Data("3".utf8))
        try await a.push()
        #expect(!isJSON(try await entry(4)))

        let b = try await devices.open("b")
        #expect(try b.names() == ["from-old", "one", "three", "two"])
        try await b.writeFile("four", Data("4".utf8))
        try await b.push()
        #expect(!isJSON(try await entry(5)))
        try await a.pull()
        #expect(try await a.readFile("four") == Data("4".utf8))
        await a.stop()
        await b.stop()
    }
}
