import ContainerFormat
import Foundation
import Replica
import Testing

/// Where content files live in the cache folder: a new cache has a folder per last letter
/// of an id (ids begin with the time they were made), made with it; a cache made before
/// keeps its folders of the first letter, or of two.
struct CacheLayoutTests {
    private func folders(_ devices: Devices, _ device: String) -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: devices.folder.sub("cache-\(device)/content"))) ?? [])
    }

    @Test("a new cache makes its 62 content folders at once and keeps each file in the folder of its id's last letter")
    func newCache() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let made = folders(devices, "a")
        #expect(made.filter { $0.count == 1 } == Set(RandomID.itemIDAlphabet.map(String.init)))
        let data = Data("one letter".utf8)
        let id = try await a.writeFile("f.txt", data)
        let path = devices.folder.sub("cache-a/content/\(id.rawValue.suffix(1))/\(id.rawValue)")
        #expect(FileManager.default.contents(atPath: path) == data)
        #expect(folders(devices, "a") == made)  // no folder made per file
    }

    @Test("a cache made with first-letter content folders keeps them, and its files stay readable after a restart")
    func firstLetterCache() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let content = devices.folder.sub("cache-c/content")
        try FileManager.default.createDirectory(atPath: content, withIntermediateDirectories: true)
        for letter in RandomID.itemIDAlphabet {
            try FileManager.default.createDirectory(atPath: "\(content)/\(letter)", withIntermediateDirectories: false)
        }
        #expect(FileManager.default.createFile(atPath: "\(content)/.one-letter-folders", contents: nil))
        let data = Data("first letter".utf8)
        let c = try await devices.open("c")
        let id = try await c.writeFile("f.txt", data)
        await c.stop()
        #expect(FileManager.default.contents(atPath: "\(content)/\(id.rawValue.prefix(1))/\(id.rawValue)") == data)
        let again = try await devices.open("c")
        #expect(try await again.readFile("f.txt") == data)
        await again.stop()
    }

    @Test(
        "a created file takes a cache file made ahead under the id it gets, listed before it was made",
        arguments: [0, 2])
    func newFileTakesASpare(folderLetters: Int) async throws {
        let devices = Devices()
        defer { devices.remove() }
        if folderLetters == 2 {  // a cache made before: its folders are made on first use
            try FileManager.default.createDirectory(
                atPath: devices.folder.sub("cache-a/content"), withIntermediateDirectories: true)
        }
        let a = try await devices.open("a")
        // The spares, made in the background: their ids listed, their files in place.
        let content = devices.folder.sub("cache-a/content")
        // 0: a new cache's folders, of the last letter.
        func path(_ id: String) -> String { "\(content)/\(folderLetters == 0 ? id.suffix(1) : id.prefix(folderLetters))/\(id)" }
        var listed: [String] = []
        for _ in 0..<200 where listed.isEmpty {
            try await Task.sleep(for: .milliseconds(10))
            listed = ((try? String(contentsOfFile: devices.folder.sub("cache-a/spares"), encoding: .utf8)) ?? "")
                .split(separator: "\n").map(String.init).filter { access(path($0), F_OK) == 0 }
        }
        #expect(!listed.isEmpty)
        let (attributes, file) = try a.makeFileForWriting("new.txt", in: .root, mode: 0o644)
        #expect(listed.contains(attributes.id.rawValue))
        let data = Data("written to the file made ahead".utf8)
        let wrote = try a.write(file, offset: 0, count: data.count) { fd in
            data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        }
        #expect(wrote == data.count)
        #expect(FileManager.default.contents(atPath: path(attributes.id.rawValue)) == data)
        try a.close(file)
        await a.stop()
        // The ones not taken went with the stop.
        #expect(listed.filter { access(path($0), F_OK) == 0 } == [attributes.id.rawValue])
        let again = try await devices.open("a")
        #expect(try await again.readFile("new.txt") == data)
        await again.stop()
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
        // (Files made ahead made their folders too, and left them.)
        #expect(folders(devices, "b").allSatisfy { $0.count == 2 })
        #expect(folders(devices, "b").contains(String(id.rawValue.prefix(2))))
        let again = try await devices.open("b")
        #expect(try await again.readFile("f.txt") == data)
        await again.stop()
    }
}
