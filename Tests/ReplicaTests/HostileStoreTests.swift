import BlobStore
import ContainerFormat
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
import TestSupport

@testable import Replica

struct HostileStoreTests {
    @Test("malformed journal entries and bad names are skipped; the rest of the journal applies")
    func badJournal() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("good-1", Data("one".utf8))
        try await a.push()
        let store = devices.store
        let journal = "\(devices.container)/journal/"
        func key(_ seq: Int) throws -> BlobKey { try BlobKey(journal + String(format: "%020d", seq)) }
        let head = Int(a.head)
        // A truncated entry, garbage, an entry missing fields, and hostile names.
        let valid = FormatCoding.encode(Commit(
            commitID: "x", device: "evil", deviceID: "evil", time: .zero,
            ops: ["../escape", "a/b", "", String(repeating: "n", count: 300), "ok-from-evil"].enumerated().map {
                .create(.init(id: ItemID("evil\($0.offset)"), parent: .root, name: $0.element, kind: .file, mode: 0o644, mtime: .zero))
            }))
        try await store.putIfAbsent(try key(head + 1), data: valid.prefix(valid.count / 2))
        try await store.putIfAbsent(try key(head + 2), data: Data([0xFF, 0x00, 0x13]))
        try await store.putIfAbsent(try key(head + 3), data: Data(#"{"format":1,"commit":"f"}"#.utf8))
        try await store.putIfAbsent(try key(head + 4), data: valid)
        try await store.putIfAbsent(try key(head + 5), data: Data(#"{"format":1,"commit":"g","device":"d","deviceID":"d","time":{"s":0,"ns":0},"ops":[{"op":"explode"},{"op":"delete","id":"nothing","base":1}]}"#.utf8))

        let b = try await devices.open("b")
        #expect(b.head == UInt64(head + 5))
        #expect(try b.names() == ["good-1", "ok-from-evil"])
        // The device still works after it.
        try await b.writeFile("good-2", Data("two".utf8))
        try await b.push()
        try await a.pull()
        #expect(try a.names() == ["good-1", "good-2", "ok-from-evil"])
    }

    @Test("an entry of a newer format is refused, not skipped: nothing after it applies, and the error says to upgrade")
    func newerFormat() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("before", Data("1".utf8))
        try await a.push()
        let head = Int(a.head)
        let journal = "\(devices.container)/journal/"
        func key(_ seq: Int) throws -> BlobKey { try BlobKey(journal + String(format: "%020d", seq)) }
        try await devices.store.putIfAbsent(
            try key(head + 1), data: Data(#"{"format":99,"commit":"f","device":"d","deviceID":"d","time":{"s":0,"ns":0},"ops":[]}"#.utf8))
        try await devices.store.putIfAbsent(try key(head + 2), data: FormatCoding.encode(Commit(
            commitID: "y", device: "d", deviceID: "d", time: .zero,
            ops: [.create(.init(id: ItemID("after"), parent: .root, name: "after", kind: .file, mode: 0o644, mtime: .zero))])))
        do {
            try await a.pull()
            Issue.record("a newer entry was read past")
        } catch let error as FormatError {
            #expect(error == .unsupportedFormat(what: "journal entry \(head + 1)", version: 99))
            #expect(error.message.contains("upgrade icloudfs"))
        }
        #expect(a.head == UInt64(head))
        #expect(try a.names() == ["before"])
    }

    @Test("a FIFO, a 1 TB sparse file and symlink loops in the store stall nothing: they are skipped as unreadable")
    func objectsThatAreNotFiles() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("before", Data("1".utf8))
        try await a.push()
        let head = Int(a.head)
        let base = devices.folder.sub("store/\(devices.container)")
        func journal(_ seq: Int) -> String { base + "/journal/" + String(format: "%020d", seq) }
        #expect(mkfifo(journal(head + 1), 0o644) == 0)
        #expect(truncate(journal(head + 2), 0) != 0)  // absent yet
        let fd = open(journal(head + 2), O_CREAT | O_WRONLY, 0o644)
        #expect(fd >= 0 && ftruncate(fd, 1 << 40) == 0)
        close(fd)
        #expect(symlink(journal(head + 2), journal(head + 3)) == 0)
        // A folder that links to itself, and a snapshot that is a link to itself.
        let snapshots = base + "/snapshots"
        try FileManager.default.createDirectory(atPath: snapshots, withIntermediateDirectories: true)
        #expect(symlink(snapshots, snapshots + "/loop") == 0)
        let snapshot = snapshots + "/" + String(format: "%020d", head + 3)
        #expect(symlink(snapshot, snapshot) == 0)

        let b = try await devices.open("b")
        #expect(b.head == UInt64(head + 3))
        try await b.writeFile("after", Data("2".utf8))
        try await b.push()
        try await a.pull()
        #expect(try a.names() == ["after", "before"])
        #expect(try await a.readFile("after") == Data("2".utf8))
    }

    @Test("a corrupted chunk is an error, never data")
    func corruptChunk() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.writeFile("precious", Data(repeating: 7, count: 10_000))
        try await a.writeFile("other", Data("fine".utf8))
        try await a.push()
        // A small file's chunk is in a pack: its bytes there are overwritten in place.
        let hash = ChunkHash(of: Data(repeating: 7, count: 10_000))
        let chunkPath = hash.hex
        let location = try #require(a.synced.withLock { $0.packedChunks[hash] })
        let pack = location.pack.hex
        let packFile = try #require(
            FileHandle(forWritingAtPath: devices.folder.sub("store/\(devices.container)/packs/\(pack.prefix(2))/\(pack)")))
        try packFile.seek(toOffset: location.offset)
        try packFile.write(contentsOf: Data(repeating: 8, count: 10_000))
        try packFile.close()

        let b = try await devices.open("b")
        await #expect(throws: ReplicaError.format(.corruptChunk(hash: chunkPath))) {
            _ = try await b.readFile("precious")
        }
        let state = try b.syncState(of: b.id("precious"))
        #expect(state.downloadingError?.hasPrefix("corruptChunk") == true)
        #expect(!state.isDownloaded)
        #expect(try await b.readFile("other") == Data("fine".utf8))
    }

    @Test("an unreadable snapshot is skipped for an older one or the journal")
    func badSnapshot() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.snapshotInterval = 2 }
        try await a.writeFile("one", Data("1".utf8))
        try await a.push()
        try await a.writeFile("two", Data("2".utf8))
        try await a.push()
        try await Task.sleep(for: .milliseconds(200))  // snapshots are written in the background
        let snapshots = devices.folder.sub("store/\(devices.container)/snapshots")
        #expect(try !FileManager.default.contentsOfDirectory(atPath: snapshots).isEmpty)
        try Data("{\"format\":1,\"seq\":99,\"items\":[]}".utf8).write(to: URL(fileURLWithPath: snapshots + "/" + String(format: "%020d", 99)))
        let b = try await devices.open("b")
        #expect(try b.names() == ["one", "two"])
    }
}

struct FullCacheDiskTests {
    @Test("a snapshot whose recording fails (cache disk full) refuses with the reason: its failure does not deadlock the pull after it")
    func snapshotNotRecorded() async throws {
        let devices = Devices()
        defer { devices.remove() }
        // One entry of 3,000 items, and a snapshot of it (of every entry).
        let a = try await devices.open("a") {
            $0.snapshotInterval = 1
            $0.maximumBatchOperations = 10_000
        }
        for n in 0..<3000 { _ = try a.makeFolder("folder-\(n)", in: .root, mode: 0o755) }
        try await a.push()
        // Written in the background (seconds under a sanitizer): the new device must start
        // from it, in one large write.
        let snapshots = devices.folder.sub("store/\(devices.container)/snapshots")
        for _ in 0..<1200 where ((try? FileManager.default.contentsOfDirectory(atPath: snapshots)) ?? []).isEmpty {
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(!((try? FileManager.default.contentsOfDirectory(atPath: snapshots)) ?? []).isEmpty)
        // An entry after the snapshot: the new device's first pull has something to record.
        _ = try a.makeFolder("after", in: .root, mode: 0o755)
        try await a.push()

        // Files of at most 420 KB: the new database's tables fit (330 KB did not fail at
        // creation, 300 KB did after migrations v14 and v15), the snapshot's items do not
        // (600 KB still failed there).
        let (child, pipe) = try HelperProcess.start([
            "open-on-full-disk", devices.folder.sub("store"), devices.folder.sub("cache-full"), devices.container, "420000",
        ])
        let deadline = ContinuousClock.now + .seconds(30)
        while child.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let hung = child.isRunning
        if hung { kill(child.processIdentifier, SIGKILL) }
        child.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(!hung, "opening on a full cache disk hung")
        #expect(output.contains("refused") && output.contains("cannot record"), "\(output)")
    }
}

struct IncompleteContentTests {
    @Test("a file whose bytes are not all downloaded is never queued: the missing bytes would become zeros")
    func incompleteFileNotQueued() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 7)
        let original = random.data(count: 3_000_000)
        try await a.writeFile("big", original)
        try await a.push()
        let b = try await devices.open("b")
        // Written without the download an open for writing does first (as when the copy was
        // evicted in between): only the written byte is present.
        let file = try b.openWithoutDownload(try b.id("big"), write: true, truncate: false)
        try b.write(file, offset: 10, data: Data([1]))
        #expect(throws: ReplicaError.self) { try b.commit(file, durable: false) }
        // Reading it gives the written byte, and an error (not zeros) where bytes are missing.
        #expect(try await b.read(file, offset: 10, count: 1) == Data([1]))
        await #expect(throws: ReplicaError.self) { _ = try await b.read(file, offset: 0, count: 100) }
        try? b.close(file)
        try await b.push()
        try await a.pull()
        #expect(try await a.readFile("big") == original)
    }
}
