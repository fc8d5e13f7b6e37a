import ContainerFormat
import Foundation
import Testing

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
}
