import Foundation
@testable import Replica
import SystemPackage
import Testing

/// The staging log (`StagingLog`): small files' bytes back to back in segment files, read
/// back by location, a segment dropped with its last hold (removed when no record names it)
/// and never appended to after a start, and a mostly let-go segment's pieces moved.
struct StagingLogTests {
    private func withFolder(_ body: (String) throws -> Void) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("staging-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try body(folder)
    }

    private func segments(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
    }

    @Test("appends lie back to back in one segment and read back whole")
    func appendsReadBack() throws {
        try withFolder { folder in
            let log = try StagingLog(folder: folder)
            let pieces = (0..<50).map { Data((0..<($0 * 97 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31) }) }
            let locations = try pieces.map { try log.append($0) }
            var end: UInt64 = 0
            for (piece, location) in zip(pieces, locations) {
                #expect(location.segment == locations[0].segment)
                #expect(location.offset == end)
                end += UInt64(piece.count)
                #expect(try log.read(location) == piece)
            }
            #expect(try segments(in: folder).count == 1)
            let segment = try #require(try segments(in: folder).first)
            let size = try FileManager.default.attributesOfItem(atPath: "\(folder)/\(segment)")[.size] as? Int
            #expect(size == Int(end))
        }
    }

    @Test("a full segment is closed for appends, dropped with its last hold, and removed unless named")
    func segmentsRotateAndGo() throws {
        try withFolder { folder in
            let log = try StagingLog(folder: folder, segmentSize: 10_000)
            let piece = Data(repeating: 7, count: 4_000)
            let first = try (0..<2).map { _ in try log.append(piece) }
            let third = try log.append(piece)  // would pass 10,000: a new segment
            #expect(third.segment == first[0].segment + 1)
            #expect(third.offset == 0)
            #expect(try segments(in: folder).count == 2)
            log.letGo(first[0])
            #expect(try segments(in: folder).count == 2, "a segment went while a location in it was held")
            #expect(try log.read(first[1]) == piece)
            log.letGo(first[1])
            #expect(log.dropped == [first[0].segment])
            #expect(try log.read(first[1]) == piece, "a dropped segment could not be read before its removal")
            log.removeDropped(except: [first[0].segment])
            #expect(try segments(in: folder).count == 2, "a segment a record still names was removed")
            log.removeDropped(except: [])
            #expect(try segments(in: folder).count == 1, "a segment nobody holds or names stayed")
            #expect(log.dropped.isEmpty)
            log.letGo(third)
            #expect(try segments(in: folder).count == 1, "the segment appends go to was removed")
            #expect(try log.read(try log.append(piece)) == piece)
        }
    }

    @Test("after a start, held segments stay, others go, and appends start a new segment")
    func startKeepsOnlyHeldSegments() throws {
        try withFolder { folder in
            let piece = Data("bytes of a small file".utf8)
            let (kept, dropped): (StagingLog.Location, StagingLog.Location)
            do {
                let before = try StagingLog(folder: folder, segmentSize: 30)
                kept = try before.append(piece)
                dropped = try before.append(piece)  // a second segment: its record was never saved
            }
            #expect(kept.segment != dropped.segment)
            let log = try StagingLog(folder: folder, segmentSize: 30)
            log.hold(kept)
            try log.removeUnheld()
            #expect(try segments(in: folder).count == 1)
            #expect(try log.read(kept) == piece)
            #expect(throws: (any Error).self) { try log.read(dropped) }
            let next = try log.append(piece)
            #expect(next.segment > dropped.segment, "an append went to a segment written before the start")
            #expect(next.offset == 0)
        }
    }

    @Test("a segment mostly let go is sparse; its moved pieces read back and it is dropped")
    func sparseSegmentsMove() throws {
        try withFolder { folder in
            let log = try StagingLog(folder: folder, segmentSize: 16_000)
            let pieces = (0..<17).map { Data(repeating: UInt8($0), count: 1_000) }
            let locations = try pieces.map { try log.append($0) }
            let first = locations[0].segment
            #expect(locations[15].segment == first && locations[16].segment == first + 1)
            #expect(log.sparseSegments().isEmpty)
            for location in locations[0..<8] { log.letGo(location) }
            #expect(log.sparseSegments().isEmpty, "a segment with as much held as let go was sparse")
            for location in locations[8..<12] { log.letGo(location) }  // 4,000 held, 12,000 let go
            #expect(log.sparseSegments() == [first])
            for (piece, location) in zip(pieces[12..<16], locations[12..<16]) {
                let moved = try log.move(location)
                #expect(moved.segment == first + 1)
                log.letGo(location)
                #expect(try log.read(moved) == piece)
            }
            #expect(log.sparseSegments().isEmpty)
            #expect(log.dropped == [first])
            log.removeDropped(except: [])
            #expect(try segments(in: folder).count == 1)
        }
    }

    @Test("a segment takes its space when it is made, and the last gives back what it did not use at a start")
    func segmentsReserveTheirSpace() throws {
        try withFolder { folder in
            func allocated() throws -> [Int] {
                try segments(in: folder).map { name in
                    var info = stat()
                    guard stat("\(folder)/\(name)", &info) == 0 else { throw Errno(rawValue: errno) }
                    return Int(info.st_blocks) * 512
                }
            }
            let piece = Data(repeating: 3, count: 10_000)
            let location: StagingLog.Location
            do {
                let before = try StagingLog(folder: folder, segmentSize: 1 << 20)
                location = try before.append(piece)
                #expect(try allocated().first ?? 0 >= 1 << 20, "a new segment did not take its space")
            }
            let log = try StagingLog(folder: folder, segmentSize: 1 << 20)
            log.hold(location)
            try log.removeUnheld()
            #expect(try allocated().first ?? .max < 1 << 19, "the space past the last segment's end stayed taken")
            #expect(try log.read(location) == piece)
        }
    }

    @Test("appends from many threads at once get places of their own")
    func concurrentAppends() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("staging-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let log = try StagingLog(folder: folder, segmentSize: 64 << 10)
        let written = try await withThrowingTaskGroup(of: [(Data, StagingLog.Location)].self) { group in
            for task in 0..<8 {
                group.addTask {
                    try (0..<200).map { index in
                        let piece = Data(repeating: UInt8(task), count: 100 + index)
                        return (piece, try log.append(piece))
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(written.map(\.1)).count == written.count)
        for (piece, location) in written { #expect(try log.read(location) == piece) }
    }
}
