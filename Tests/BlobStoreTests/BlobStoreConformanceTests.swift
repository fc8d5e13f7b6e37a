import BlobStore
import Foundation
import SystemPackage
import Testing
import TestSupport

/// The contract every store backend keeps; each backend's factory runs the same checks.
struct BlobStoreConformanceTests {
    static let directory = TemporaryDirectory("blobstore")

    /// The directory store, and an S3 store on the test server when `Scripts/test` started one.
    static func makeStores() throws -> [any BlobStore] {
        var stores: [any BlobStore] = [try DirectoryStore(root: FilePath(directory.sub(UUID().uuidString)))]
        if let s3 = try S3TestServer.store("conformance") { stores.append(s3) }
        return stores
    }

    @Test("get returns what put stored, whole and by range")
    func roundTrip() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("a/b/c.bin")
            var random = SeededRandom(seed: 1)
            let data = random.data(count: 100_000)
            try await store.put(key, data: data)
            #expect(try await store.get(key) == data)
            #expect(try await store.get(key, range: 10..<20) == data[10..<20])
            #expect(try await store.get(key, range: 99_990..<200_000) == data[99_990...])
            #expect(try await store.size(of: key) == 100_000)
        }
    }

    @Test("a missing key is notFound, and its size is nil")
    func missing() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("nothing/here")
            await #expect(throws: StoreError.notFound("nothing/here")) { try await store.get(key) }
            #expect(try await store.size(of: key) == nil)
        }
    }

    @Test("put-if-absent creates once and refuses an existing key, leaving it unchanged")
    func putIfAbsent() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("journal/00000000000000000001")
            try await store.putIfAbsent(key, data: Data("first".utf8))
            await #expect(throws: StoreError.alreadyExists(key.rawValue)) {
                try await store.putIfAbsent(key, data: Data("second".utf8))
            }
            #expect(try await store.get(key) == Data("first".utf8))
        }
    }

    @Test("put replaces an existing object")
    func putReplaces() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("x")
            try await store.put(key, data: Data("one".utf8))
            try await store.put(key, data: Data("two".utf8))
            #expect(try await store.get(key) == Data("two".utf8))
        }
    }

    @Test("list returns keys under a prefix after a key, in byte order, paged by limit")
    func list() async throws {
        for store in try Self.makeStores() {
            for n in [3, 1, 2, 5, 4] {
                try await store.put(try BlobKey("c/journal/\(n)"), data: Data())
            }
            try await store.put(try BlobKey("c/chunks/ab/abc"), data: Data())
            try await store.put(try BlobKey("c/journalx"), data: Data())
            let all = try await store.list(prefix: "c/journal/", after: nil, limit: 100)
            #expect(all.map(\.key.rawValue) == (1...5).map { "c/journal/\($0)" })
            #expect(all.allSatisfy { $0.size == 0 && abs($0.modified.timeIntervalSinceNow) < 60 })
            let page = try await store.list(prefix: "c/journal/", after: try BlobKey("c/journal/2"), limit: 2)
            #expect(page.map(\.key.rawValue) == ["c/journal/3", "c/journal/4"])
            let nested = try await store.list(prefix: "c/chunks/", after: nil, limit: 100)
            #expect(nested.map(\.key.rawValue) == ["c/chunks/ab/abc"])
            #expect(try await store.listAll(prefix: "zzz/").isEmpty)
        }
    }

    @Test("listFolders names each folder right under a prefix once, not the objects beside them")
    func listFolders() async throws {
        for store in try Self.makeStores() {
            for key in ["one/identity", "one/journal/1", "two/chunks/ab/abc", "loose", "two/kv/1"] {
                try await store.put(try BlobKey(key), data: Data())
            }
            #expect(try await store.listFolders(prefix: "") == ["one", "two"])
            #expect(try await store.listFolders(prefix: "two/") == ["chunks", "kv"])
            #expect(try await store.listFolders(prefix: "none/").isEmpty)
        }
    }

    @Test("delete removes an object and ignores a missing one")
    func delete() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("d/e")
            try await store.put(key, data: Data("x".utf8))
            try await store.delete(key)
            #expect(try await store.size(of: key) == nil)
            try await store.delete(key)
        }
    }

    @Test("keys with '..', empty parts or unsafe characters are refused")
    func invalidKeys() {
        for bad in ["", "a//b", "../x", "a/./b", "/a", "a/", "a b", "a\u{0}b", "é"] {
            #expect(throws: StoreError.self) { try BlobKey(bad) }
        }
    }

    @Test("many tasks racing put-if-absent on one key: exactly one wins")
    func racingTasks() async throws {
        for store in try Self.makeStores() {
            let key = try BlobKey("race/key")
            let winners = await withTaskGroup(of: Int.self) { group in
                for i in 0..<32 {
                    group.addTask {
                        (try? await store.putIfAbsent(key, data: Data("\(i)".utf8))) != nil ? 1 : 0
                    }
                }
                return await group.reduce(0, +)
            }
            #expect(winners == 1)
        }
    }
}

struct DirectoryStoreTests {
    @Test("several processes racing put-if-absent on one key: exactly one wins, its bytes stay")
    func racingProcesses() throws {
        let folder = TemporaryDirectory("race")
        defer { folder.remove() }
        _ = try DirectoryStore(root: FilePath(folder.sub("store")))
        for round in 0..<5 {
            let start = folder.sub("start-\(round)")
            let key = "c/journal/\(round)"
            let (winners, clean) = try HelperProcess.racePutIfAbsent(
                store: folder.sub("store"), key: key, writers: 6, startFile: start)
            #expect(clean)
            #expect(winners.count == 1)
            let stored = try String(contentsOfFile: folder.sub("store/\(key)"), encoding: .utf8)
            #expect(stored == "writer-\(winners.first ?? -1)")
        }
        // No temporary files are left behind.
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: folder.sub("store"))
            .filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
    }

    @Test("a write cut short leaves a temporary file that is never listed; removing abandoned writes takes only old ones under the prefix")
    func abandonedWrites() async throws {
        let folder = TemporaryDirectory("abandoned")
        defer { folder.remove() }
        let store = try DirectoryStore(root: FilePath(folder.sub("store")))
        try await store.putIfAbsent(try BlobKey("c/packs/ab/abc"), data: Data("pack".utf8))
        try await store.putIfAbsent(try BlobKey("d/packs/ab/abd"), data: Data("pack".utf8))
        let old = Date(timeIntervalSinceNow: -7200)
        func temporary(_ path: String, modified: Date) throws {
            let url = URL(fileURLWithPath: folder.sub("store/\(path)"))
            try Data("half".utf8).write(to: url)
            try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: url.path)
        }
        try temporary("c/packs/ab/.abc.1.2.tmp", modified: old)
        try temporary("c/packs/ab/.abe.1.3.tmp", modified: Date())  // a write still going on
        try temporary("d/packs/ab/.abd.1.4.tmp", modified: old)  // another container's
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: folder.sub("store/c/packs/ab/abc"))
        #expect(try await store.listAll(prefix: "c/").map(\.key.rawValue) == ["c/packs/ab/abc"])

        #expect(try await store.removeAbandonedWrites(under: "c/", before: Date(timeIntervalSinceNow: -3600)) == 1)
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.sub("store/c/packs/ab")).sorted()
        #expect(left == [".abe.1.3.tmp", "abc"])
        #expect(FileManager.default.fileExists(atPath: folder.sub("store/d/packs/ab/.abd.1.4.tmp")))
    }

    @Test("a store whose folder is gone is unavailable, not empty")
    func missingFolder() async throws {
        let folder = TemporaryDirectory("gone")
        let store = try DirectoryStore(root: FilePath(folder.sub("store")))
        folder.remove()
        await #expect(throws: StoreError.self) { try await store.get(try BlobKey("a")) }
        do {
            _ = try await store.get(try BlobKey("a"))
        } catch let error as StoreError {
            #expect(error.code == "serverUnavailable")
        }
        do {
            try await store.putIfAbsent(try BlobKey("a"), data: Data())
            Issue.record("a write to a missing store succeeded")
        } catch let error as StoreError {
            #expect(error.code == "serverUnavailable")
        }
        // A key in folders of its own: they are made below the store's folder, never the store's
        // folder itself (moving the old one back would then nest it inside a new, empty store).
        do {
            try await store.putAllIfAbsent([(try BlobKey("c/chunks/ab/abc"), Data("x".utf8))])
            Issue.record("a write to a missing store succeeded")
        } catch let error as StoreError {
            #expect(error.code == "serverUnavailable")
        }
        // Nor does watching a folder of it bring the store's folder back.
        #expect(store.changeNotifications(prefix: "c/journal/") == nil)
        #expect(!FileManager.default.fileExists(atPath: folder.sub("store")))
    }

    @Test("watching a folder of a directory store makes it below the store's folder, and a new object there wakes the watcher")
    func watchedFolder() async throws {
        let folder = TemporaryDirectory("watched")
        let store = try DirectoryStore(root: FilePath(folder.sub("store")))
        let changes = try #require(store.changeNotifications(prefix: "c/journal/"))
        #expect(FileManager.default.fileExists(atPath: folder.sub("store/c/journal")))
        try await store.putIfAbsent(try BlobKey("c/journal/1"), data: Data("x".utf8))
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next() != nil)
    }
}
