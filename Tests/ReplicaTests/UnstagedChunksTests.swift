import ContainerFormat
import Foundation
import Replica
import TestSupport
import Testing

/// A saved file's chunks stay in its content file until uploaded; bytes a queued version
/// still needs are copied aside before anything changes them.
struct UnstagedChunksTests {
    private func stagedCount(_ devices: Devices, _ device: String) -> Int {
        let root = devices.folder.sub("cache-\(device)/staged")
        return ((try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []).filter { $0.count > 3 }.count
    }

    @Test("saving a file copies nothing aside; the upload reads its chunks from the content file")
    func savingCopiesNothing() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 21)
        let data = random.data(count: 2 << 20)
        try await a.writeFile("f.bin", data)
        #expect(stagedCount(devices, "a") == 0)
        try await a.push()
        let b = try await devices.open("b")
        #expect(try await b.readFile("f.bin") == data)
    }

    @Test("overwriting or truncating a file whose version is still queued keeps that version's bytes for its upload")
    func overwriteBeforeUpload() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 22)
        var data = random.data(count: 2 << 20)
        try await a.writeFile("f.bin", data)
        try await a.writeFile("g.bin", random.data(count: 1 << 20))

        let file = try await a.open(try a.id("f.bin"), write: true, truncate: false)
        let patch = random.data(count: 4096)
        try a.write(file, offset: 1 << 20, data: patch)
        data.replaceSubrange((1 << 20)..<(1 << 20) + 4096, with: patch)
        try a.close(file)
        #expect(stagedCount(devices, "a") >= 1, "the overwritten chunk of the first version is kept aside")
        try await a.writeFile("g.bin", Data("short".utf8))  // truncates the queued 1 MB version

        try await a.push()  // throws if a named chunk were neither local nor in the store
        #expect(stagedCount(devices, "a") == 0, "copies are dropped once uploaded")
        let b = try await devices.open("b")
        #expect(try await b.readFile("f.bin") == data)
        #expect(try await b.readFile("g.bin") == Data("short".utf8))
    }

    @Test("after a restart, queued chunks still in content files are found and uploaded")
    func restartBeforeUpload() async throws {
        let devices = Devices()
        defer { devices.remove() }
        var random = SeededRandom(seed: 23)
        let first = random.data(count: 1 << 20)
        var second = random.data(count: 3 << 20)
        do {
            let a = try await devices.open("a")
            try await a.writeFile("one.bin", first)
            try await a.writeFile("two.bin", second)
            let file = try await a.open(try a.id("two.bin"), write: true, truncate: false)
            let patch = random.data(count: 100)
            try a.write(file, offset: 5, data: patch)
            second.replaceSubrange(5..<105, with: patch)
            try a.close(file)
        }
        let reopened = try await devices.open("a")
        try await reopened.push()
        let b = try await devices.open("b")
        #expect(try await b.readFile("one.bin") == first)
        #expect(try await b.readFile("two.bin") == second)
    }
}
