import ContainerFormat
import Foundation
import Testing

@testable import Replica

/// The periodic work (cache bound, reclaiming deleted files' space) looks at what changed,
/// not at every local copy.
struct ContentRecordsTests {
    @Test("the running totals follow every kind of change to the records")
    func totals() {
        var records = ContentRecords([ItemID("a"): ContentRecord(chunks: [], size: 100, present: ByteRanges([0..<60]), dirty: true, pinned: false, lastAccess: 0)])
        #expect(records.presentBytes == 60 && records.dirtyCount == 1 && records.pinnedCount == 0)
        records[ItemID("a")]?.present.insert(60..<200)  // beyond the size: not counted
        #expect(records.presentBytes == 100)
        records[ItemID("b")] = ContentRecord.empty.with(dirty: false)
        records[ItemID("b")]?.size = 10
        records[ItemID("b")]?.present = ByteRanges([0..<10])
        records[ItemID("b")]?.pinned = true
        #expect(records.presentBytes == 110 && records.dirtyCount == 1 && records.pinnedCount == 1)
        records[ItemID("a")]?.dirty = false
        records[ItemID("a")]?.size = 50
        #expect(records.presentBytes == 60 && records.dirtyCount == 0)
        records.removeValue(forKey: ItemID("b"))
        records[ItemID("a")] = nil
        records[ItemID("missing")] = nil
        #expect(records.presentBytes == 0 && records.dirtyCount == 0 && records.pinnedCount == 0)
    }

    @Test("a local copy of a file another device deleted leaves the cache at the next pass; live copies stay")
    func remoteDeleteIsReclaimed() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let gone = try await a.writeFile("gone", Data(repeating: 1, count: 5000))
        let kept = try await a.writeFile("kept", Data(repeating: 2, count: 5000))
        try await a.push()
        let b = try await devices.open("b")
        _ = try await b.readFile("gone")
        _ = try await b.readFile("kept")
        let files = b.files
        #expect(FileManager.default.fileExists(atPath: files.contentPath(gone)))

        try a.remove("gone", in: .root)
        try await a.push()
        try await b.pull()
        // (The background loop may have looked at the candidates already.)
        b.reclaimDeletedContent()
        #expect(!FileManager.default.fileExists(atPath: files.contentPath(gone)))
        #expect(FileManager.default.fileExists(atPath: files.contentPath(kept)))
        #expect(b.state.withLock { $0.reclaimCandidates.isEmpty && $0.content[gone] == nil && $0.content.presentBytes == 5000 })
        await a.stop()
        await b.stop()
    }
}
