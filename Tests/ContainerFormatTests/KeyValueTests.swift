import Foundation
import Testing

@testable import ContainerFormat

struct KeyValueTests {
    func record(_ device: String, at seconds: Int64, set: [String: KeyValue] = [:], removed: [String] = []) -> KeyValueRecord {
        KeyValueRecord(device: device, deviceID: device, time: Timestamp(seconds: seconds), set: set, removed: removed)
    }

    @Test("devices applying the same records in any order hold the same values: the latest write wins")
    func latestWriteWinsInAnyOrder() {
        let records = [
            record("a", at: 10, set: ["level": .integer(1), "name": .string("Ada")]),
            record("b", at: 30, set: ["level": .integer(3)]),
            record("c", at: 20, set: ["level": .integer(2)], removed: ["name"]),
            record("a", at: 40, removed: ["level"]),
            record("b", at: 40, set: ["level": .integer(4)]),  // same time: the larger device id wins
        ]
        // Every order (120).
        func orders(_ items: [KeyValueRecord]) -> [[KeyValueRecord]] {
            guard items.count > 1 else { return [items] }
            return items.indices.flatMap { index in
                var rest = items
                let first = rest.remove(at: index)
                return orders(rest).map { [first] + $0 }
            }
        }
        let tables = orders(records).map { order in
            var table = KeyValueTable()
            for record in order { table.apply(record) }
            return table
        }
        #expect(tables.count == 120)
        for table in tables { #expect(table == tables[0]) }
        #expect(tables[0].values == ["level": .integer(4)])
    }

    @Test("an older write changes nothing and reports no key")
    func olderWriteIsIgnored() {
        var table = KeyValueTable()
        #expect(table.apply(record("a", at: 20, set: ["k": .string("new")])) == ["k"])
        #expect(table.apply(record("b", at: 10, set: ["k": .string("old")])).isEmpty)
        #expect(table.value(of: "k") == .string("new"))
        #expect(table.apply(record("b", at: 30, set: ["k": .string("new")])).isEmpty, "same value: no change")
    }

    @Test("values are JSON other than null, and keep integers apart from reals")
    func jsonValues() {
        #expect(KeyValue(json: "3") == .integer(3))
        #expect(KeyValue(json: "3.5") == .real(3.5))
        #expect(KeyValue(json: "true") == .bool(true))
        #expect(KeyValue(json: #"{"b":[1,"x"],"a":false}"#) == .dictionary(["a": .bool(false), "b": .array([.integer(1), .string("x")])]))
        #expect(KeyValue(json: #"{"b":[1,"x"],"a":false}"#)?.json == #"{"a":false,"b":[1,"x"]}"#)
        #expect(KeyValue(json: "null") == nil)
        #expect(KeyValue(json: "[null]") == nil)
        #expect(KeyValue(json: "nope") == nil)
    }

    @Test("limits: 1,024 keys, 64-byte keys, 1 MiB in all")
    func limits() {
        #expect(KeyValueLimits.problem(withKey: String(repeating: "é", count: 32)) == nil)
        #expect(KeyValueLimits.problem(withKey: String(repeating: "é", count: 33)) != nil)
        #expect(KeyValueLimits.problem(withKey: "") != nil)
        let many = Dictionary(uniqueKeysWithValues: (1...1024).map { ("k\($0)", KeyValue.integer(1)) })
        #expect(KeyValueLimits.problem(withStore: many) == nil)
        #expect(KeyValueLimits.problem(withStore: many.merging(["one more": .integer(1)]) { $1 }) != nil)
        let big = KeyValue.string(String(repeating: "x", count: (1 << 20) - 3 - 2))  // key "big", quotes
        #expect(KeyValueLimits.problem(withStore: ["big": big]) == nil)
        #expect(KeyValueLimits.problem(withStore: ["bigg": big]) != nil)
    }

    @Test("a record of a later format is refused, not misread")
    func laterFormatRefused() throws {
        var later = record("a", at: 1, set: ["k": .integer(1)])
        later.format = 2
        #expect(throws: FormatError.self) { try KeyValueRecord.decode(FormatCoding.encode(later)) }
        #expect(try KeyValueRecord.decode(FormatCoding.encode(record("a", at: 1))) == record("a", at: 1))
    }
}
