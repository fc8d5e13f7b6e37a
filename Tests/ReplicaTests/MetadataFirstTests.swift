import ContainerFormat
import Foundation
import Replica
import TestSupport
import Testing

/// Large files are published metadata first: other devices see them at once, and reads
/// there wait for the content.
struct MetadataFirstTests {
    /// Pulls on `device` until `path` exists.
    private func waitForName(_ path: String, on device: Replica) async throws -> ItemID {
        for _ in 0..<200 {
            try await device.pull()
            if let id = try? device.id(path) { return id }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ReplicaError.notFound
    }

    @Test("a large file shows on another device before its chunks are uploaded; a read there waits for them")
    func appearsBeforeContent() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.uploadLimit = 4 << 20 }
        let b = try await devices.open("b")
        // b learns where the chunks went (packs, for those under 1 MiB) from the entry that
        // says they are stored: its background loop pulls it, as a mount's does.
        b.start()
        var random = SeededRandom(seed: 7)
        let data = random.data(count: 8 << 20)
        try await a.writeFile("video.bin", data)
        let upload = Task { try await a.push() }

        let id = try await waitForName("video.bin", on: b)
        #expect(try b.attributes(of: id).size == UInt64(data.count))
        let early = try b.syncState(of: id)
        #expect(!early.isUploaded)
        #expect(!early.isUploading)  // b is not the one uploading
        #expect(try !b.isUploaded(.root))  // another device still owes the content
        #expect(try a.syncState(of: a.id("video.bin")).isUploading)
        #expect(try await b.readFile("video.bin") == data)
        try await upload.value
        try await b.pull()
        #expect(try b.syncState(of: id).isUploaded)
        #expect(try a.syncState(of: .root).isUploaded)
        await b.stop()
    }

    @Test("a read gives up after the bounded wait with a clear downloadingError")
    func boundedWait() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.uploadLimit = 256 << 10 }
        let b = try await devices.open("b") { $0.pendingContentWait = .milliseconds(500) }
        var random = SeededRandom(seed: 8)
        try await a.writeFile("slow.bin", random.data(count: 6 << 20))
        let upload = Task { try await a.push() }
        defer { upload.cancel() }
        let id = try await waitForName("slow.bin", on: b)
        await #expect(throws: ReplicaError.self) { try await b.readFile("slow.bin") }
        #expect(try b.syncState(of: id).downloadingError?.hasPrefix("contentNotUploaded") == true)
    }

    @Test("chunks owed when the device stopped are uploaded after it reopens")
    func owedSurvivesRestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        var random = SeededRandom(seed: 9)
        let data = random.data(count: 6 << 20)
        do {
            let a = try await devices.open("a") { $0.uploadLimit = 256 << 10 }
            try await a.writeFile("owed.bin", data)
            let upload = Task { try await a.push() }
            let b = try await devices.open("b")
            _ = try await waitForName("owed.bin", on: b)
            upload.cancel()
            _ = await upload.result
            #expect(try !a.syncState(of: a.id("owed.bin")).isUploaded)
        }
        let a = try await devices.open("a")
        try await a.push()
        #expect(try a.syncState(of: a.id("owed.bin")).isUploaded)
        let c = try await devices.open("c")
        #expect(try await c.readFile("owed.bin") == data)
        #expect(try c.syncState(of: c.id("owed.bin")).isUploaded)
    }
}
