import Foundation
import Testing

@testable import ContainerFormat

/// What the store holds is untrusted: no value in it may trap a device or bend a name.
struct HostileInputTests {
    @Test("names differing only in Unicode normalization are two items (names are bytes)")
    func namesAreBytes() {
        var journal = Journal()
        let nfc = "caf\u{E9}"
        let nfd = "cafe\u{301}"
        #expect(nfc == nfd)  // what Swift's String equality says, and the reason for NameKey
        journal.commit("a", [file("1", nfc, "one")])
        journal.commit("a", [file("2", nfd, "two")])
        let names = journal.names()
        #expect(names.count == 2)
        #expect(journal.tree.child(named: nfc, in: .root)?.id == ItemID("1"))
        #expect(journal.tree.child(named: nfd, in: .root)?.id == ItemID("2"))
        #expect(Set(names.map { Array($0.utf8) }) == [Array(nfc.utf8), Array(nfd.utf8)])
    }

    @Test("a rename from one normalization of a name to the other moves the item in the name index")
    func renameBetweenNormalizations() {
        var journal = Journal()
        let nfc = "caf\u{E9}"
        let nfd = "cafe\u{301}"
        journal.commit("a", [file("1", nfc, "one")])
        journal.commit("a", [.move(.init(id: ItemID("1"), base: 1, parent: .root, name: nfd))])
        #expect(journal.tree.child(named: nfd, in: .root)?.id == ItemID("1"))
        #expect(journal.tree.child(named: nfc, in: .root) == nil)
        #expect(journal.names().map { Array($0.utf8) } == [Array(nfd.utf8)])
    }

    @Test("conflict copies at any time, even the limits of Int64, get a name and never trap")
    func conflictTimesAtTheLimits() {
        for seconds in [Int64.min, Int64.min + 86_399, -1, Int64.max] {
            let name = ItemName.conflictCopy(of: "a.txt", device: "d", time: Timestamp(seconds: seconds))
            #expect(ItemName.problem(with: name) == nil)
        }
    }

    @Test("a time outside the valid range fails to decode")
    func timesOutOfRange() throws {
        let bad = [#"{"s":-9223372036854775808,"ns":0}"#, #"{"s":0,"ns":1000000000}"#, #"{"s":1099511627777,"ns":0}"#]
        for json in bad {
            #expect(throws: (any Error).self) { try FormatCoding.decode(Timestamp.self, from: Data(json.utf8)) }
        }
        #expect(try FormatCoding.decode(Timestamp.self, from: Data(#"{"s":-5,"ns":999999999}"#.utf8)) == Timestamp(seconds: -5, nanoseconds: 999_999_999))
    }

    @Test("a device name with a combining mark after / puts no / into a conflict copy's name")
    func deviceNamesCannotSplitNames() {
        for device in ["/\u{301}", "a/b", "\u{0}\u{301}", String(repeating: "/\u{301}", count: 100)] {
            let name = ItemName.conflictCopy(of: "notes.txt", device: device, time: .zero)
            #expect(ItemName.problem(with: name) == nil, "\(device.debugDescription) gave \(name.debugDescription)")
        }
    }

    @Test("a snapshot whose root is a file or deleted, or whose versions are after its seq, is refused")
    func snapshotsAreValidated() {
        let file = Item(id: ItemID("f"), parent: .root, name: "f", kind: .file, mode: 0o644, mtime: .zero, version: 3, contentVersion: 3)
        #expect(Snapshot.problem(in: [Item.rootFolder(), file], seq: 3) == nil)
        #expect(Snapshot.problem(in: [Item.rootFolder(), file], seq: 2) != nil)
        var rootFile = Item.rootFolder()
        rootFile.kind = .file
        #expect(Snapshot.problem(in: [rootFile, file], seq: 3) != nil)
        var deletedRoot = Item.rootFolder()
        deletedRoot.deleted = true
        #expect(Snapshot.problem(in: [deletedRoot, file], seq: 3) != nil)
        #expect(Snapshot.problem(in: [Item.rootFolder()], seq: UInt64.max) != nil)
    }
}
