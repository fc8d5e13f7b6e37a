import ContainerFormat
import Foundation
import Testing

struct RandomIDTests {
    @Test("random ids are version-4 UUID strings, as UUID() writes them, and do not repeat")
    func shape() {
        var seen = Set<String>()
        for _ in 0..<100_000 {
            let id = RandomID.make()
            #expect(UUID(uuidString: id)?.uuidString == id)
            let characters = Array(id)
            #expect(characters[14] == "4")
            #expect("89AB".contains(characters[19]))
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
    }
}

struct ItemIDShapeTests {
    @Test("new item ids are 15 letters and digits, valid in the store, and do not repeat")
    func itemIDs() {
        var seen = Set<ItemID>()
        var symbols = Set<UInt8>()
        for _ in 0..<100_000 {
            let id = RandomID.makeItemID()
            #expect(id.rawValue.utf8.count == 15)
            #expect(id.rawValue.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
            #expect(id.isValid)
            symbols.formUnion(id.rawValue.utf8)
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
        #expect(symbols.count == 62)  // every symbol turns up: none is left out by the mapping
    }

    @Test("ids sort in the order they were made, and begin with the time they were made")
    func ordered() {
        let before = Date()
        let ids = (0..<50_000).map { _ in RandomID.makeItemID() }
        let after = Date()
        #expect(ids == ids.sorted())  // within a millisecond too: the serial counts up
        func made(_ id: ItemID) -> Date {
            let milliseconds = id.rawValue.utf8.prefix(7).reduce(0) { $0 * 62 + Int(RandomID.itemIDAlphabet.utf8.firstIndex(of: $1)!.utf16Offset(in: RandomID.itemIDAlphabet)) }
            return Date(timeIntervalSince1970: 1_767_225_600 + Double(milliseconds) / 1000)
        }
        #expect(abs(made(ids[0]).timeIntervalSince(before)) < 0.002)
        #expect(abs(made(ids[ids.count - 1]).timeIntervalSince(after)) < 0.002)
    }

    @Test("ids made on eight threads at once do not repeat (one buffer of random bytes serves them all)")
    func concurrent() async {
        let batches = await withTaskGroup(of: [ItemID].self) { group in
            for _ in 0..<8 { group.addTask { (0..<20_000).map { _ in RandomID.makeItemID() } } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(batches.joined()).count == 160_000)
    }
}

struct CompactItemTests {
    private func file() -> Item {
        Item(id: ItemID("f"), parent: .root, name: "a.txt", kind: .file, mode: 0o644, mtime: Timestamp(seconds: 1))
    }

    @Test("an item takes at most 192 bytes: the fields few items set share one box")
    func size() {
        #expect(MemoryLayout<Item>.stride <= 192)
    }

    @Test("rare fields set and cleared one by one read back, and compare by value")
    func rareFields() {
        var item = file()
        var copy = item
        item.linkedItem = ItemID("other")
        item.history = [PastVersion(seq: 3, time: Timestamp(seconds: 2), device: "d", size: 1, chunks: [], replaced: Timestamp(seconds: 4))]
        #expect(item.linkedItem == ItemID("other"))
        #expect(item.history?.first?.seq == 3)
        #expect(copy.linkedItem == nil)  // a copy made before does not see the change
        #expect(item != copy)
        copy.history = item.history
        copy.linkedItem = ItemID("other")
        #expect(item == copy)  // different boxes, equal fields
        let first = item.history![0]
        item.history?.append(first)
        #expect(item.history?.count == 2 && copy.history?.count == 1)
        item.linkedItem = nil
        item.history = nil
        #expect(item == file())
        #expect(Set([item, file()]).count == 1)
    }

    @Test("format 1 JSON keeps every field's key, and leaves out those not set")
    func json() throws {
        var item = file()
        item.target = "t"
        item.deletion = Deletion(time: Timestamp(seconds: 9), device: "d")
        item.owner = Owner(uid: 1, gid: 2)
        let data = try JSONEncoder().encode(item)
        let keys = Set((try JSONSerialization.jsonObject(with: data) as! [String: Any]).keys)
        #expect(keys == ["id", "parent", "name", "kind", "mode", "mtime", "size", "chunks", "target", "xattrs",
                         "version", "contentVersion", "deleted", "owner", "deletion"])
        #expect(try JSONDecoder().decode(Item.self, from: data) == item)
    }
}
