import Foundation
import Testing

@testable import ContainerFormat

/// Snapshots are written in the protobuf form (format 5: owners, hard links, history); format 1 (JSON) is
/// still read.
struct SnapshotCodingTests {
    /// Items with every field set, and names and attributes with characters that need care.
    private func snapshot(items count: Int) -> Snapshot {
        let folder = ItemID("folder")
        var items = [
            Item.rootFolder(),
            Item(id: folder, parent: .root, name: "d\"[{,}]\\ \u{e9}", kind: .folder, mode: 0o755, mtime: .zero),
            Item(id: ItemID("link"), parent: folder, name: "l", kind: .symlink, mode: 0o777,
                 mtime: Timestamp(seconds: -5, nanoseconds: 999_999_999), target: "../a b", version: 3, contentVersion: 3),
            Item(id: ItemID("fifo"), parent: folder, name: "p", kind: .fifo, mode: 0o640, mtime: .zero),
            Item(id: ItemID("sock"), parent: folder, name: "s", kind: .socket, mode: 0o755, mtime: .zero),
            Item(id: ItemID("tty"), parent: folder, name: "c", kind: .characterDevice, mode: 0o620, mtime: .zero,
                 owner: Owner(uid: 0, gid: 5), device: 0x8801),
            Item(id: ItemID("disk"), parent: folder, name: "b", kind: .blockDevice, mode: 0o660, mtime: .zero, device: 0),
            Item(id: ItemID("hard"), parent: .root, name: "second name", kind: .hardLink, mode: 0, mtime: .zero,
                 ctime: Timestamp(seconds: 9), linkedItem: ItemID("fifo")),
        ]
        for index in 0..<count {
            let chunks = (0..<index % 4).map { n in
                ChunkRef(hash: ChunkHash(of: Data("\(index)-\(n)".utf8)), size: UInt32(1000 + n))
            }
            items.append(Item(
                id: ItemID("item-\(index)"), parent: folder, name: "f\(index) \u{1F600}",
                kind: .file, mode: 0o644, mtime: Timestamp(seconds: Int64(index), nanoseconds: UInt32(index)),
                size: chunks.reduce(0) { $0 + UInt64($1.size) }, chunks: chunks,
                xattrs: index % 2 == 0 ? ["user.x": Data("a]\"[,".utf8), "user.b": Data([0, 255])] : [:],
                version: UInt64(index + 1), contentVersion: UInt64(index), deleted: index % 5 == 0,
                conflictOf: index % 7 == 0 ? folder : nil, contentFrom: index % 11 == 0 ? ItemID("item-0") : nil,
                isContentPending: index % 3 == 0,
                owner: index % 4 == 0 ? nil : Owner(uid: UInt32(index % 3) * 1000 + 1, gid: UInt32(index % 5)),
                contentTime: index % 2 == 0 ? Timestamp(seconds: Int64(index) * 7, nanoseconds: 3) : nil,
                contentDevice: index % 2 == 0 ? "device \(index % 3)" : nil,
                history: index % 6 == 0
                    ? [PastVersion(seq: 1, time: Timestamp(seconds: -3), device: "d", size: 1000, chunks: Array(chunks.prefix(1)),
                                   replaced: Timestamp(seconds: 9, nanoseconds: 8))] : nil,
                deletion: index % 5 == 0 ? Deletion(time: Timestamp(seconds: 77, nanoseconds: 1), device: "phone") : nil))
        }
        return Snapshot(of: Tree(items: items, head: 77, journalFormat: 5))
    }

    @Test("a snapshot's protobuf form restores every field, and the same tree gives the same bytes")
    func roundTrip() throws {
        let original = snapshot(items: 500)
        let data = SnapshotCoding.encode(original)
        #expect(data.first != UInt8(ascii: "{"))
        let decoded = try SnapshotCoding.decode(data)
        #expect(decoded.format == Snapshot.formatVersion && decoded.seq == 77 && decoded.journalFormat == 5)
        #expect(decoded.items == original.items)
        #expect(decoded.tree.nextEntryEncoding == .binary)
        #expect(SnapshotCoding.encode(Snapshot(of: decoded.tree)) == data)
    }

    @Test("a large snapshot is decoded in parts on several cores: the same items, in order; a bad item in a later part fails it")
    func decodesInParts() throws {
        let original = snapshot(items: 30_000)  // above the size decoded on one core
        let decoded = try SnapshotCoding.decode(SnapshotCoding.encode(original))
        #expect(decoded.items == original.items)

        var message = SnapshotMessage()
        message.items = original.items.map(ItemMessage.init)
        message.items[original.items.count - 10].kind = .UNRECOGNIZED(9)
        #expect(throws: (any Error).self) { try SnapshotCoding.decode(try message.serializedBytes()) }
    }

    @Test("a format-1 snapshot (JSON) still reads")
    func readsFormatOne() throws {
        var original = snapshot(items: 200)
        original.format = 1
        let decoded = try SnapshotCoding.decode(FormatCoding.encode(original))
        #expect(decoded.format == 1 && decoded.seq == 77)
        #expect(decoded.items == original.items)
    }

    @Test("a malformed snapshot is an error, not a partial tree")
    func malformed() throws {
        let whole = SnapshotCoding.encode(snapshot(items: 300))
        // Cut inside an item (the last two bytes alone may be a whole field: journal_format).
        #expect(throws: (any Error).self) { try SnapshotCoding.decode(whole.prefix(whole.count / 2)) }

        var message = SnapshotMessage()
        var item = ItemMessage(Item.rootFolder())
        item.chunkHashes = Data(count: 31)  // one size, but not a whole digest
        item.chunkSizes = [10]
        message.items = [item]
        #expect(throws: (any Error).self) { try SnapshotCoding.decode(try message.serializedBytes()) }
        item.chunkHashes = Data(count: 32)
        item.kind = .UNRECOGNIZED(9)
        message.items = [item]
        #expect(throws: (any Error).self) { try SnapshotCoding.decode(try message.serializedBytes()) }
    }
}
