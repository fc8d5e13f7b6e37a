import ContainerFormat
import Foundation
@testable import Replica
import Testing

/// The staging log through a replica: when most files of a segment are deleted, the sync
/// loop's cache pass moves the rest to the log's end and removes the segment once no record
/// names it; every file still reads back whole, after a restart and on another device.
struct StagingLogCompactionTests {
    private func segments(_ folder: String) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
    }

    @Test("a segment mostly deleted is emptied into the log's end and removed; nothing is lost")
    func mostlyDeletedSegmentGoes() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.stagingSegmentSize = 64 << 10 }
        a.start()  // the sync loop: its cache pass is what tidies the log
        var written: [String: Data] = [:]
        // 3,000 bytes each: f0 to f20 fill the first 64 KiB segment, f21 on go to the next.
        for index in 0..<40 {
            let data = Data((0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* (index + 7) &+ index) })
            let (_, file) = try a.makeFileInMemory("f\(index)", in: .root, mode: 0o644)
            #expect(data.withUnsafeBytes { a.writeInMemory(file.id, offset: 0, bytes: $0) })
            #expect(a.closeInMemory(file))
            written["f\(index)"] = data
        }
        let staging = devices.folder.sub("cache-a/staging")
        let first = segments(staging)
        #expect(first.count == 2)
        #expect(await a.waitUntilUploaded(timeout: .seconds(30)))
        for index in 3..<21 {
            try a.remove("f\(index)", in: .root)
            written["f\(index)"] = nil
        }
        #expect(await a.waitUntilUploaded(timeout: .seconds(30)))
        let oldest = try #require(first.min())
        let deadline = ContinuousClock.now + .seconds(20)
        while segments(staging).contains(oldest), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!segments(staging).contains(oldest), "the mostly deleted segment stayed")
        await a.stop()
        let again = try await devices.open("a") { $0.stagingSegmentSize = 64 << 10 }
        for (name, data) in written { #expect(try await again.readFile(name) == data, "\(name) after a restart") }
        await again.stop()
        try await devices.expectNewDevice("b", reads: written)
    }
}
