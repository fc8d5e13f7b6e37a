import ContainerFormat
import Foundation
import Testing
import TestSupport

@testable import Replica

/// Records of the state database in their packed form; earlier versions' JSON still reads.
struct StateDatabaseTests {
    private let ranges = ByteRanges([0..<4096, 10_000..<20_000, UInt64.max - 5..<UInt64.max])

    @Test("present byte ranges survive their packed form; JSON records of earlier versions still read")
    func byteRanges() throws {
        let packed = StateDatabase.encode(ranges)
        #expect(packed.count == 3 * 16)
        #expect(try StateDatabase.decodeRanges(packed) == ranges)
        #expect(try StateDatabase.decodeRanges(StateDatabase.encode(ByteRanges())) == ByteRanges())
        #expect(try StateDatabase.decodeRanges(FormatCoding.encode(ranges)) == ranges)
        #expect(throws: StateDatabaseError.self) { try StateDatabase.decodeRanges(packed.dropLast()) }
    }

    @Test("writes asked for with writeSoon commit before any later write, and by themselves shortly after")
    func writeSoonKeepsOrder() throws {
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        database.writeSoon { db in try database.setMeta("k", "soon", db) }
        try database.write { db in try database.setMeta("k", "now", db) }
        #expect(try database.pool.read { db in try database.meta("k", db) } == "now")

        database.writeSoon { db in try database.setMeta("alone", "yes", db) }
        let deadline = Date().addingTimeInterval(5)
        while try database.pool.read({ db in try database.meta("alone", db) }) == nil, Date() < deadline {
            usleep(1000)
        }
        #expect(try database.pool.read { db in try database.meta("alone", db) } == "yes")
    }

    @Test("a failed write leaves the writes waiting before it to the next one")
    func failedWriteKeepsWaiting() throws {
        struct Refused: Error {}
        let folder = TemporaryDirectory()
        defer { folder.remove() }
        let database = try StateDatabase(path: folder.path + "/state.db", logger: quietLogger)
        database.writeSoon { db in try database.setMeta("queued", "1", db) }
        #expect(throws: Refused.self) { try database.write { _ in throw Refused() } }
        try database.flush()
        #expect(try database.pool.read { db in try database.meta("queued", db) } == "1")
    }
}
