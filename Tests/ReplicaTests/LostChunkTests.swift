import ContainerFormat
import Foundation
@testable import Replica
import Testing
import TestSupport

struct LostChunkTests {
    @Test("a chunk only the synced tree names, the file written over since, is superseded, not lost")
    func supersededVersionIsNotCurrent() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let first = Data("the version pushed before a crash".utf8)
        let second = Data("the version written over it, still queued".utf8)
        try await a.writeFile("doc.txt", first)
        try await a.push()
        try await a.writeFile("doc.txt", second)
        // Small files are one chunk each: the synced tree names the first, the view the second.
        #expect(!a.isCurrentContent(ChunkHash(of: first)))
        #expect(a.isCurrentContent(ChunkHash(of: second)))
        await a.stop()
    }
}
