import BlobStore
import ContainerFormat
import Foundation
import Replica
import Testing
import Synchronization
import TestSupport

struct ReplicaTests {
    @Test("a file written on one device appears on another as a placeholder, then downloads on read")
    func placeholderThenDownload() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 1)
        let data = random.data(count: 5_000_000)
        _ = try a.makeFolder("Documents", in: .root, mode: 0o755)
        try await a.writeFile("Documents/big.bin", data)
        #expect(try a.syncState(of: a.id("Documents/big.bin")).isUploaded == false)
        try await a.push()
        #expect(try a.syncState(of: a.id("Documents/big.bin")).isUploaded)
        #expect(try a.syncState(of: .root).percentUploaded == 100)

        let b = try await devices.open("b")
        let id = try b.id("Documents/big.bin")
        #expect(try b.attributes(of: id).size == 5_000_000)
        let before = try b.syncState(of: id)
        #expect(before.downloadingStatus == .notDownloaded)
        #expect(before.percentDownloaded == 0)
        #expect(!before.isDownloaded)
        #expect(before.isUploaded)
        #expect(try await b.readFile("Documents/big.bin") == data)
        let after = try b.syncState(of: id)
        #expect(after.downloadingStatus == .current)
        #expect(after.percentDownloaded == 100)
        #expect(try b.syncState(of: .root).isDownloaded)
    }

    @Test("what a device downloaded is still there after it restarts (progress is recorded)")
    func downloadSurvivesRestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 7)
        let data = random.data(count: 3_000_000)
        try await a.writeFile("f", data)
        try await a.push()
        do {
            let b = try await devices.open("b")
            #expect(try await b.readFile("f") == data)
            #expect(try b.syncState(of: b.id("f")).isDownloaded)
        }
        let b = try await devices.open("b")
        #expect(try b.syncState(of: b.id("f")).percentDownloaded == 100)
    }

    @Test("a read downloads only the chunks it touches first")
    func partialRead() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 2)
        let data = random.data(count: 12_000_000)
        try await a.writeFile("f", data)
        try await a.push()
        // The file's chunks and where each lies (cut as the container cuts: checked against
        // the chunks in the store), and those the read touches.
        var chunks: [(range: Range<Int>, key: BlobKey)] = []
        var offset = 0
        for length in data.withUnsafeBytes({ Chunker().chunkLengths(of: $0) }) {
            let range = offset..<offset + length
            offset += length
            let hex = ChunkHash(of: data[range]).hex
            chunks.append((range, try BlobKey("\(devices.container)/chunks/\(hex.prefix(2))/\(hex)")))
        }
        // Chunks under the pack limit (the tail, say) travel in a pack, read by range.
        let stored = Set(devices.chunkFiles().map { String($0.split(separator: "/").last!) })
        try #require(
            Set(chunks.filter { $0.range.count >= Int(Replica.packedChunkLimit) }.map { String($0.key.rawValue.split(separator: "/").last!) })
                == stored)
        let objects = chunks.filter { stored.contains(String($0.key.rawValue.split(separator: "/").last!)) }
        let wanted = 6_000_000..<6_004_096
        let touched = chunks.filter { $0.range.overlaps(wanted) }
        try #require((1...2).contains(touched.count) && chunks.count >= 6, "\(touched.count) of \(chunks.count) chunks")
        // Chunks the read does not touch wait until the read has returned.
        let store = GatedChunkStore(devices.store, servedAtOnce: Set(touched.map(\.key)))
        let b = try await Replica.open(
            ReplicaConfiguration(container: devices.container, cacheDirectory: devices.folder.sub("cache-b"), deviceName: "b"),
            store: store, logger: quietLogger)
        let id = try b.id("f")
        let file = try await b.open(id, write: false, truncate: false)
        let piece = try await b.read(file, offset: UInt64(wanted.lowerBound), count: wanted.count)
        let servedBeforeReturn = store.served
        let stateBeforeReturn = try b.syncState(of: id)
        store.release()
        #expect(piece == data[wanted])
        // When the read returned, the store had served the chunks it touches, each once, and
        // nothing else; the device held those bytes and no others.
        #expect(servedBeforeReturn.sorted() == touched.map(\.key).sorted())
        let touchedBytes = touched.map(\.range.count).reduce(0, +)
        #expect(abs(stateBeforeReturn.percentDownloaded - Double(touchedBytes) * 100 / Double(data.count)) < 0.001)
        #expect(!stateBeforeReturn.isDownloaded)
        // The rest follows in the background.
        let deadline = ContinuousClock.now + .seconds(20)
        while try b.syncState(of: id).percentDownloaded < 100, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try b.syncState(of: id).isDownloaded)
        #expect(Set(store.served) == Set(objects.map(\.key)))
        try b.close(file)
        #expect(try await b.readFile("f") == data)
    }

    @Test("a 4 KiB edit in a 20 MB file uploads only a chunk or two")
    func smallEditFewChunks() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 3)
        var data = random.data(count: 20_000_000)
        try await a.writeFile("big", data)
        try await a.push()
        let before = devices.chunkFiles()
        data.replaceSubrange(10_000_000..<10_004_096, with: random.data(count: 4096))
        let file = try await a.open(try a.id("big"), write: true, truncate: false)
        try a.write(file, offset: 10_000_000, data: data[10_000_000..<10_004_096])
        try a.close(file)
        try await a.push()
        let added = devices.chunkFiles().subtracting(before)
        #expect(added.count >= 1 && added.count <= 2, "\(added.count) chunks added")
        let b = try await devices.open("b")
        #expect(try await b.readFile("big") == data)
    }

    @Test("simultaneous edits from one base give one conflict copy, the same on both devices")
    func conflict() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("alpha")
        let b = try await devices.open("beta")
        try await a.writeFile("doc.txt", Data("base".utf8))
        try await a.push()
        try await b.pull()
        try await a.writeFile("doc.txt", Data("from alpha".utf8))
        try await b.writeFile("doc.txt", Data("from beta".utf8))
        try await a.push()
        try await b.push()
        try await a.pull()
        #expect(try a.names() == b.names())
        let names = try a.names()
        #expect(names.count == 2)
        let copy = try #require(names.first { $0.hasPrefix("doc (conflicted copy from beta ") && $0.hasSuffix(").txt") })
        #expect(try await a.readFile("doc.txt") == Data("from alpha".utf8))
        #expect(try await a.readFile(copy) == Data("from beta".utf8))
        #expect(try await b.readFile(copy) == Data("from beta".utf8))
        #expect(try a.syncState(of: a.id("doc.txt")).hasUnresolvedConflicts)
        try b.remove(copy, in: .root)
        try await b.push()
        try await a.pull()
        #expect(try !a.syncState(of: a.id("doc.txt")).hasUnresolvedConflicts)
    }

    @Test("a save through a handle opened before a remote edit arrived keeps both versions")
    func saveBasedOnOpenVersion() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let b = try await devices.open("b")
        try await a.writeFile("doc", Data("v0".utf8))
        try await a.push()
        try await b.pull()
        let file = try await a.open(try a.id("doc"), write: true, truncate: false)
        try await b.writeFile("doc", Data("from b".utf8))
        try await b.push()
        try await a.pull()  // b's version arrives while a has the file open
        try a.write(file, offset: 0, data: Data("from a".utf8))
        try a.close(file)
        try await a.push()
        try await b.pull()
        #expect(try b.names().count == 2)
        #expect(try await b.readFile("doc") == Data("from b".utf8))
        let copy = try #require(try b.names().first { $0.contains("conflicted copy from a") })
        #expect(try await b.readFile(copy) == Data("from a".utf8))
    }

    @Test("close-to-open: an open file keeps reading the version it opened; the next open sees the new one")
    func closeToOpen() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let b = try await devices.open("b")
        try await a.writeFile("doc", Data("version 0".utf8))
        try await a.push()
        try await b.pull()
        let handle = try await b.open(try b.id("doc"), write: false, truncate: false)
        #expect(try await b.read(handle, offset: 0, count: 100) == Data("version 0".utf8))
        try await a.writeFile("doc", Data("version 1!".utf8))
        try await a.push()
        try await b.pull()
        #expect(try await b.read(handle, offset: 0, count: 100) == Data("version 0".utf8))
        try b.close(handle)
        #expect(try await b.readFile("doc") == Data("version 1!".utf8))
    }

    @Test("POSIX name rules: exists, not empty, rename over a file, folder into itself")
    func namespace() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let folder = try a.makeFolder("d", in: .root, mode: 0o755).id
        try await a.writeFile("d/x", Data("x".utf8))
        try await a.writeFile("y", Data("y".utf8))
        #expect(throws: ReplicaError.exists) { try a.makeFolder("d", in: .root, mode: 0o755) }
        #expect(throws: ReplicaError.notEmpty) { try a.removeFolder("d", in: .root) }
        #expect(throws: ReplicaError.isAFolder) { try a.remove("d", in: .root) }
        #expect(throws: ReplicaError.self) { try a.rename("d", in: .root, to: "inner", in: folder) }
        #expect(throws: ReplicaError.invalidName("name contains '/'")) { try a.makeFile("a/b", in: .root, mode: 0o644) }
        try a.rename("y", in: .root, to: "x", in: folder)
        #expect(try a.names("d") == ["x"])
        #expect(try await a.readFile("d/x") == Data("y".utf8))
        let link = try a.makeSymlink("l", in: .root, target: "d/x")
        #expect(try a.readLink(link.id) == "d/x")
        try a.setUserAttribute("user.color", of: a.id("d/x"), to: Data("red".utf8))
        try await a.push()
        let b = try await devices.open("b")
        #expect(try b.names() == ["d", "l"])
        #expect(try b.userAttribute("user.color", of: b.id("d/x")) == Data("red".utf8))
        #expect(try await b.readFile("d/x") == Data("y".utf8))
        #expect(try b.readLink(b.id("l")) == "d/x")
    }

    @Test("a queued delete keeps the folder and the container not uploaded")
    func queuedDeleteCounts() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let folder = try a.makeFolder("d", in: .root, mode: 0o755).id
        try await a.writeFile("d/x", Data("x".utf8))
        try await a.push()
        try a.remove("x", in: folder)
        #expect(try !a.syncState(of: .root).isUploaded)
        #expect(try !a.syncState(of: folder).isUploaded)
        try await a.push()
        #expect(try a.syncState(of: .root).isUploaded)
    }

    @Test("a folder's isUploaded counts only what is in it: a file being written, then its queued change")
    func isUploadedIsScopedToTheFolder() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let d = try a.makeFolder("d", in: .root, mode: 0o755).id
        let e = try a.makeFolder("e", in: d, mode: 0o755).id
        let other = try a.makeFolder("other", in: .root, mode: 0o755).id
        let file = try a.makeFile("f", in: e, mode: 0o644).id
        try await a.push()
        let handle = try await a.open(file, write: true, truncate: false)
        try a.write(handle, offset: 0, data: Data("x".utf8))
        for phase in ["written", "queued"] {
            for id in [ItemID.root, d, e, file] {
                #expect(try !a.isUploaded(id), "\(phase): \(id)")
                #expect(try a.syncState(of: id).isUploaded == false, "\(phase): \(id)")
            }
            #expect(try a.isUploaded(other), "\(phase)")
            if phase == "written" { try a.close(handle) }
        }
        try await a.push()
        for id in [ItemID.root, d, e, file, other] { #expect(try a.isUploaded(id)) }
    }

    @Test("mode and time set on a file being written go out with its content, in its still queued create")
    func attributesOfFileBeingWrittenJoinItsContent() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        try await a.push()
        let id = try a.makeFile("t", in: .root, mode: 0o600).id
        let queuedByCreate = a.pendingChangeCount
        let file = try await a.open(id, write: true, truncate: false)
        try a.write(file, offset: 0, data: Data("tar".utf8))
        let shown = try a.setAttributes(id, mode: 0o100644, mtime: Timestamp(seconds: 1_000_000_000))
        #expect(shown.mode == 0o644 && shown.mtime == Timestamp(seconds: 1_000_000_000))
        #expect(a.pendingChangeCount == queuedByCreate)
        try a.close(file)
        #expect(a.pendingChangeCount == queuedByCreate)  // folded into the create
        // Mode only, on a file created and closed without a write: still queued.
        let empty = try a.makeFile("e", in: .root, mode: 0o600).id
        let emptyFile = try await a.open(empty, write: true, truncate: false)
        _ = try a.setAttributes(empty, mode: 0o640)
        try a.close(emptyFile)
        try await a.push()

        let b = try await devices.open("b")
        let seen = try b.attributes(of: b.id("t"))
        #expect(seen.mode == 0o644 && seen.mtime == Timestamp(seconds: 1_000_000_000) && seen.size == 3)
        #expect(try await b.readFile("t") == Data("tar".utf8))
        #expect(try b.attributes(of: b.id("e")).mode == 0o640)
    }

    @Test("an access ACL set on a file still being written keeps its mode: the commit does not queue the chmod before it again")
    func aclOnFileBeingWritten() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let id = try a.makeFile("f", in: .root, mode: 0o600).id
        let file = try await a.open(id, write: true, truncate: false)
        try a.write(file, offset: 0, data: Data("acl".utf8))
        _ = try a.setAttributes(id, mode: 0o644)  // held for the commit: the file is being written
        // user::rw- user:1000:rw- group::r-- mask::rw- other::r--, as setfacl -m u:1000:rw hands it over
        var acl = Data([2, 0, 0, 0])
        for (tag, permissions, owner) in [(0x01, 6, UInt32.max), (0x02, 6, 1000), (0x04, 4, .max), (0x10, 6, .max), (0x20, 4, .max)] {
            acl.append(contentsOf: [UInt8(tag), 0, UInt8(permissions), 0])
            acl.append(contentsOf: withUnsafeBytes(of: owner.littleEndian) { Array($0) })
        }
        try a.setUserAttribute("system.posix_acl_access", of: id, to: acl)
        #expect(try a.attributes(of: id).mode == 0o664)
        try a.close(file)
        #expect(try a.attributes(of: id).mode == 0o664)
        try await a.push()

        let b = try await devices.open("b")
        #expect(try b.attributes(of: b.id("f")).mode == 0o664)
    }

    @Test("files closed in the background arrive whole; one unlinked before it was queued stays deleted")
    func closeInBackground() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.pollInterval = .milliseconds(50) }
        a.start()
        func content(_ n: Int) -> Data { Data((0..<(n * 50_000 + 1)).map { UInt8(truncatingIfNeeded: $0 &+ n) }) }
        for n in 0..<12 {
            let id = try a.makeFile("f\(n)", in: .root, mode: 0o644).id
            let file = try await a.open(id, write: true, truncate: false)
            try a.write(file, offset: 0, data: content(n))
            a.commitSoon(file)
            a.closeSoon(file)
            // Unlinked before or after the background close ran: it must not come back.
            if n % 3 == 0 { try a.remove("f\(n)", in: .root) }
        }
        #expect(await a.waitUntilUploaded(timeout: .seconds(30)))
        await a.stop()

        let b = try await devices.open("b")
        let expected = (0..<12).filter { $0 % 3 != 0 }
        #expect(Set(try b.names()) == Set(expected.map { "f\($0)" }))
        for n in expected {
            #expect(try await b.readFile("f\(n)") == content(n), "f\(n) differs")
        }
    }

    @Test("queued changes survive closing and reopening the device, and upload later")
    func queueSurvivesRestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        do {
            let a = try await devices.open("a")
            try await a.writeFile("kept.txt", Data("queued".utf8), durable: true)
            #expect(a.pendingChangeCount > 0)
        }
        let a = try await devices.open("a")
        #expect(a.pendingChangeCount > 0)
        try await a.push()
        #expect(a.pendingChangeCount == 0)
        let b = try await devices.open("b")
        #expect(try await b.readFile("kept.txt") == Data("queued".utf8))
    }

    @Test("the background loop uploads by itself, and remote changes reach the observer")
    func backgroundLoop() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.pollInterval = .milliseconds(100) }
        let b = try await devices.open("b") { $0.pollInterval = .milliseconds(100) }
        let seen = Mutex<Set<ItemID>>([])
        b.setChangeObserver { changes in seen.withLock { $0.formUnion(changes.map(\.id)) } }
        // a's own upload landing changes nothing the kernel shows: a hears nothing of it.
        let seenByA = Mutex<Set<ItemID>>([])
        a.setChangeObserver { changes in seenByA.withLock { $0.formUnion(changes.map(\.id)) } }
        a.start()
        b.start()
        let id = try await a.writeFile("live.txt", Data("hello".utf8))
        // A folder and a file in it, in the same batch: its landing moves the folder's journal
        // numbers only, which the kernel does not see.
        let folder = try a.makeFolder("d", in: .root, mode: 0o755).id
        _ = try await a.writeFile("d/in.txt", Data("inside".utf8))
        #expect(await a.waitUntilUploaded(timeout: .seconds(10)))
        func waitUntil(_ seen: borrowing Mutex<Set<ItemID>>, has id: ItemID) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while !seen.withLock({ $0.contains(id) }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        try await waitUntil(seen, has: id)
        #expect(seen.withLock { $0.contains(id) })
        #expect(try await b.readFile("live.txt") == Data("hello".utf8))
        #expect(seenByA.withLock { $0.isEmpty }, "\(seenByA.withLock { $0 }), the folder \(folder)")
        // b's edit of it does reach a's observer.
        _ = try await b.writeFile("live.txt", Data("edited on b".utf8))
        #expect(await b.waitUntilUploaded(timeout: .seconds(10)))
        try await waitUntil(seenByA, has: id)
        #expect(seenByA.withLock { $0.contains(id) })
        await a.stop()
        await b.stop()
    }

    @Test("a cache made for another container identity is refused")
    func identityMismatch() async throws {
        let devices = Devices()
        defer { devices.remove() }
        _ = try await devices.open("a")
        // The container is deleted and re-created: a new identity token.
        try FileManager.default.removeItem(atPath: devices.folder.sub("store/\(devices.container)"))
        _ = try await devices.open("b")
        await #expect(throws: ReplicaError.self) { _ = try await devices.open("a") }
    }
}

struct StoreOutageTests {
    @Test("while the store is unreachable, changes queue with an uploadingError; when it returns they drain")
    func outage() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a") { $0.pollInterval = .milliseconds(50) }
        let store = devices.folder.sub("store")
        try FileManager.default.moveItem(atPath: store, toPath: store + ".away")
        a.start()
        let id = try await a.writeFile("offline.txt", Data("written offline".utf8))
        #expect(await a.waitUntilUploaded(timeout: .milliseconds(500)) == false)
        // The failed push records its error (on a busy machine, maybe after the wait above).
        var state = try a.syncState(of: id)
        let deadline = ContinuousClock.now + .seconds(10)
        while state.uploadingError == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            state = try a.syncState(of: id)
        }
        #expect(!state.isUploaded)
        #expect(state.uploadingError?.hasPrefix("serverUnavailable") == true, "\(state)")
        try FileManager.default.moveItem(atPath: store + ".away", toPath: store)
        #expect(await a.waitUntilUploaded(timeout: .seconds(10)))
        #expect(try a.syncState(of: id).uploadingError == nil)
        await a.stop()
        let b = try await devices.open("b")
        #expect(try await b.readFile("offline.txt") == Data("written offline".utf8))
    }
}

extension ReplicaTests {
    @Test("renaming over an open file replaces the version that was opened; a newer one that arrived meanwhile is kept")
    func renameOverOpenFileKeepsNewerVersion() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let b = try await devices.open("b")
        try await a.writeFile("f.txt", Data("v1".utf8))
        try await a.writeFile("g.txt", Data("g".utf8))
        try await a.push()
        try await b.pull()
        let seen = try await b.open(try b.id("f.txt"), write: false, truncate: false)
        #expect(try await b.read(seen, offset: 0, count: 100) == Data("v1".utf8))
        try await a.writeFile("f.txt", Data("v2".utf8))
        try await a.push()
        try await b.pull()  // v2 arrives while b still has v1 open
        try b.rename("g.txt", in: .root, to: "f.txt", in: .root)
        try b.close(seen)
        try await b.push()
        try await a.pull()
        var contents: [Data] = []
        let names = try a.names()
        for name in names { contents.append(try await a.readFile(name)) }
        #expect(contents.contains(Data("v2".utf8)), "the version b never saw survives: \(names)")
        #expect(contents.contains(Data("g".utf8)))
    }
}

extension ReplicaTests {
    @Test("a device's earlier declined delete does not drop its later edit when another device deletes meanwhile")
    func editAfterDeclinedDeleteSurvivesRemoteDelete() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let b = try await devices.open("b")
        let c = try await devices.open("c")
        try await a.writeFile("doc", Data("v1".utf8))
        try await a.push()
        try await b.pull()
        try await b.writeFile("doc", Data("v2".utf8))
        try await b.push()
        try a.remove("doc", in: .root)  // based on v1: declined, b's edit wins
        try await a.push()
        #expect(try await a.readFile("doc") == Data("v2".utf8))
        try await c.pull()
        let file = try await a.open(try a.id("doc"), write: true, truncate: false)
        try c.remove("doc", in: .root)  // c saw v2 only
        try await c.push()
        try await a.pull()  // the delete arrives while a has the file open
        try a.write(file, offset: 0, data: Data("v3".utf8))
        try a.close(file)
        try await a.push()
        try await c.pull()
        #expect(try await c.readFile("doc") == Data("v3".utf8), "the edit c never saw survives its delete")
    }
}
