import ContainerFormat
import Foundation
import Replica
import Testing

/// Where content files live in the cache folder: a new cache has a folder per first letter
/// of an id, made with it; a cache made before keeps its folders of two letters.
struct CacheLayoutTests {
    private func folders(_ devices: Devices, _ device: String) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: devices.folder.sub("cache-\(device)/content"))) ?? [])
    }

    @Test("a new cache makes its 62 content folders at once and keeps each file in the folder of its id's first letter")
    func newCache() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let made = folders(devices, "a")
        #expect(made.filter { $0.count == 1 } == Set(RandomID.itemIDAlphabet.map(String.init)))
        let data = Data("one letter".utf8)
        let id = try await a.writeFile("f.txt", data)
        let path = devices.folder.sub("cache-a/content/\(id.rawValue.prefix(1))/\(id.rawValue)")
        #expect(FileManager.default.contents(atPath: path) == data)
        #expect(folders(devices, "a") == made)  // no folder made per file
    }

    @Test("a cache made with two-letter content folders keeps them, and its files stay readable after a restart")
    func earlierCache() async throws {
        let devices = Devices()
        defer { devices.remove() }
        try FileManager.default.createDirectory(
            atPath: devices.folder.sub("cache-b/content"), withIntermediateDirectories: true)
        let data = Data("two letters".utf8)
        let id: ItemID
        do {
            let b = try await devices.open("b")
            id = try await b.writeFile("f.txt", data)
            await b.stop()
        }
        let path = devices.folder.sub("cache-b/content/\(id.rawValue.prefix(2))/\(id.rawValue)")
        #expect(FileManager.default.contents(atPath: path) == data)
        #expect(folders(devices, "b") == [String(id.rawValue.prefix(2))])
        let again = try await devices.open("b")
        #expect(try await again.readFile("f.txt") == data)
        await again.stop()
    }
}
