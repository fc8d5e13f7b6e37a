import ContainerFormat
import Foundation
import Testing
import TestSupport

/// Names are bytes: every byte string maps to one string and back.
struct NameBytesTests {
    @Test("any bytes round-trip, and different bytes give different strings (random names)")
    func roundTrip() {
        var random = SeededRandom(seed: 21)
        var seen: [String: [UInt8]] = [:]
        for _ in 0..<20_000 {
            let length = Int.random(in: 1...12, using: &random)
            // Bytes around the interesting ranges: ASCII, continuation bytes, 0xEF 0x9E/0x9F.
            let alphabet: [UInt8] = [0x61, 0x80, 0x9E, 0x9F, 0xBF, 0xC3, 0xA9, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xFF]
            let bytes = (0..<length).map { _ in alphabet.randomElement(using: &random)! }
            let name = NameBytes.string(bytes)
            #expect(NameBytes.bytes(name) == bytes)
            #expect(NameBytes.count(name) == bytes.count)
            if let earlier = seen[name] { #expect(earlier == bytes) }
            seen[name] = bytes
        }
    }

    @Test("UTF-8 names are their own strings; other bytes and the escape characters are escaped")
    func examples() {
        #expect(NameBytes.string(Array("café 😀".utf8)) == "café 😀")
        #expect(NameBytes.string([0x61, 0xE9]) == "a\u{F7E9}")
        // A real U+F780 (EF 9E 80) is three escapes, not one: else it would read as byte 0x80.
        #expect(NameBytes.string([0xEF, 0x9E, 0x80]) == "\u{F7EF}\u{F79E}\u{F780}")
        // Other private-use characters, surrogates' bytes and overlong forms.
        #expect(NameBytes.string(Array("\u{F700}\u{E000}".utf8)) == "\u{F700}\u{E000}")
        #expect(NameBytes.string([0xED, 0xA0, 0x80]) == "\u{F7ED}\u{F7A0}\u{F780}")
        #expect(NameBytes.string([0xC0, 0xAF]) == "\u{F7C0}\u{F7AF}")
    }

    @Test("utf8String takes UTF-8, U+FFFD and U+F7xx included, and refuses anything else (random bytes checked against the standard library)")
    func utf8String() {
        #expect(NameBytes.utf8String(Array("security.capability".utf8)) == "security.capability")
        #expect(NameBytes.utf8String(Array("a\u{FFFD}b\u{F7E9}".utf8)) == "a\u{FFFD}b\u{F7E9}")
        #expect(NameBytes.utf8String([0x61, 0xE9]) == nil)
        #expect(NameBytes.utf8String([0xEF, 0xBF]) == nil)
        var random = SeededRandom(seed: 38)
        for _ in 0..<5_000 {
            let alphabet: [UInt8] = [0x61, 0xC3, 0xA9, 0xEF, 0xBF, 0xBD, 0xE9, 0x80]
            let bytes: [UInt8] = (0..<Int(random.next() % 8)).map { _ in alphabet[Int(random.next() % 8)] }
            #expect(NameBytes.utf8String(bytes) == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
    }

    @Test("entries and snapshots written before byte names read their names literally")
    func olderFormats() throws {
        let literal = "x\u{F780}y"  // a name a format-2 device could write
        var commit = Commit(commitID: "c", device: "a", deviceID: "a", time: .zero, ops: [
            .create(.init(id: ItemID("f"), parent: .root, name: literal, kind: .file, mode: 0o644, mtime: .zero)),
        ])
        commit.format = 2
        let old = try FormatCoding.decode(Commit.self, from: FormatCoding.encode(commit))
        guard case .create(let create) = old.ops.first else { Issue.record("no create"); return }
        #expect(NameBytes.bytes(create.name) == Array(literal.utf8))
        commit.format = 3
        let new = try FormatCoding.decode(Commit.self, from: FormatCoding.encode(commit))
        guard case .create(let escaped) = new.ops.first else { Issue.record("no create"); return }
        #expect(NameBytes.bytes(escaped.name) == [0x78, 0x80, 0x79])

        let item = Item(id: ItemID("f"), parent: .root, name: literal, kind: .file, mode: 0o644, mtime: .zero)
        let snapshot = try SnapshotCoding.decode(SnapshotCoding.encode(Snapshot(format: 3, seq: 1, items: [item])))
        #expect(NameBytes.bytes(snapshot.items[0].name) == Array(literal.utf8))
    }
}
