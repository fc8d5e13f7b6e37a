import Foundation
import Testing

@testable import ContainerFormat

/// Large snapshots are decoded in parallel parts; the result must be exactly one decode's.
struct SnapshotDecoderTests {
    /// Names with every character that matters to the splitter: quotes, backslashes,
    /// brackets, braces, commas, and text that looks like the `items` key.
    private func snapshot(items count: Int) -> Snapshot {
        var tree = Tree()
        let folder = ItemID("folder")
        var items = [Item(id: folder, parent: .root, name: "d\"[{,}]\\", kind: .folder, mode: 0o755, mtime: .zero)]
        for index in 0..<count {
            let name = index % 3 == 0 ? "\"items\":[\(index)],\\\"" : "f,\(index)]}{[\u{e9}"
            items.append(Item(
                id: ItemID("item-\(index)"), parent: folder, name: name, kind: .file, mode: 0o644,
                mtime: Timestamp(seconds: Int64(index)), size: 4096, xattrs: ["user.x": Data("a]\"[,".utf8)],
                version: UInt64(index), contentVersion: UInt64(index)))
        }
        tree = Tree(items: [.rootFolder()] + items, head: 7)
        return Snapshot(of: tree)
    }

    @Test("a large snapshot decodes in parts to what one decode gives")
    func partsEqualWhole() throws {
        let data = FormatCoding.encode(snapshot(items: 6_000))
        #expect(data.count >= 1 << 20)
        let split = try #require(SnapshotDecoder.split(data, parts: 3))
        #expect(split.items.count == 3)
        let whole = try FormatCoding.decode(Snapshot.self, from: data)
        let parts = try SnapshotDecoder.decode(data)
        #expect(parts.seq == whole.seq && parts.format == whole.format)
        #expect(parts.items == whole.items)
    }

    @Test("a malformed large snapshot is an error, not a partial tree")
    func malformed() throws {
        var data = FormatCoding.encode(snapshot(items: 6_000))
        data.removeLast(2)
        #expect(throws: (any Error).self) { try SnapshotDecoder.decode(data) }
    }
}
