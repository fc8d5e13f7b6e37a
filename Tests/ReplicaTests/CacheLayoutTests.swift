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

    @Test(
        "a created file takes a cache file made ahead with no name, and has its name once the create is recorded",
        arguments: [1, 2])
    func newFileTakesASpare(folderLetters: Int) async throws {
        let devices = Devices()
        defer { devices.remove() }
        if folderLetters == 2 {  // a cache made before: its folders are made on first use
            try FileManager.default.createDirectory(
                atPath: devices.folder.sub("cache-a/content"), withIntermediateDirectories: true)
        }
        let a = try await devices.open("a")
        // The spares, made in the background: open nameless files in the content folder.
        let content = devices.folder.sub("cache-a/content")
        var spares: Set<UInt64> = []
        for _ in 0..<200 where spares.isEmpty {
            try await Task.sleep(for: .milliseconds(10))
            spares = Self.namelessFiles(in: content)
        }
        #expect(!spares.isEmpty)
        let (attributes, file) = try a.makeFileForWriting("new.txt", in: .root, mode: 0o644)
        // The folder its name goes in, removed by hand meanwhile (or, with two letters, not made
        // yet): made. (`rmdir`: if the database's thread named the file already, the folder
        // stays, and so does the file.)
        let folder = "\(content)/\(attributes.id.rawValue.prefix(folderLetters))"
        _ = rmdir(folder)
        let data = Data("written before it had a name".utf8)
        let wrote = try a.write(file, offset: 0, count: data.count) { fd in
            data.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        }
        #expect(wrote == data.count)
        try a.sync(file)  // records the create: the file is named first
        let path = "\(folder)/\(attributes.id.rawValue)"
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(spares.contains(UInt64(info.st_ino)))
        try a.close(file)
        await a.stop()
        let again = try await devices.open("a")
        #expect(try await again.readFile("new.txt") == data)
        await again.stop()
    }

    /// Inode numbers of the files this process holds open in `folder` that have no name.
    private static func namelessFiles(in folder: String) -> Set<UInt64> {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(descriptors.compactMap { fd -> UInt64? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"),
                target.hasPrefix("\(folder)/#")
            else { return nil }
            var info = stat()
            return fstat(Int32(fd) ?? -1, &info) == 0 ? UInt64(info.st_ino) : nil
        })
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
