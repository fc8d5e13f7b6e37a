import BlobStore
import ContainerFormat
import Foundation
import TestSupport
import Testing

@testable import Replica

/// A new file's content at its close is folded into its queued create (issue 37): one
/// operation per new file in the journal.
struct OneChangePerFileTests {
    @Test("a burst of new files goes up as one create per file, carrying its content; another device reads them")
    func burstIsOneCreatePerFile() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let written = try await devices.writeFiles(40, on: a) { Data("file \($0)".utf8) }
        try await a.push()
        let ops = try await devices.journalOperations(upTo: a.head)
        let creates = ops.compactMap { op -> ItemOperation.Create? in if case .create(let c) = op { c } else { nil } }
        #expect(creates.count == 40)
        #expect(!ops.contains { if case .update = $0 { true } else { false } })
        #expect(creates.allSatisfy { $0.content.size > 0 && $0.nameTime != nil })
        try await devices.expectNewDevice("b", reads: written)
        await a.stop()
    }

    @Test("the folder's time on another device is the create's, not the file's last write")
    func folderKeepsTheCreateTime() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        _ = try a.makeFolder("d", in: .root, mode: 0o755)
        let id = try a.makeFile("f", in: a.id("d"), mode: 0o644).id
        let folderTime = try a.attributes(of: a.id("d")).mtime
        try await Task.sleep(for: .milliseconds(30))
        let file = try await a.open(id, write: true, truncate: false)
        try a.write(file, offset: 0, data: Data("late".utf8))
        try a.close(file)
        let fileTime = try a.attributes(of: id).mtime
        #expect(fileTime > folderTime)
        try await a.push()
        let b = try await devices.open("b")
        #expect(try b.attributes(of: b.id("d")).mtime == folderTime)
        #expect(try b.attributes(of: b.id("d/f")).mtime == fileTime)
        #expect(try await b.readFile("d/f") == Data("late".utf8))
        await a.stop()
        await b.stop()
    }

    @Test("a file renamed before its close keeps two changes: the create is not rewritten past a change naming the item")
    func notFoldedPastALaterChange() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let id = try a.makeFile("f", in: .root, mode: 0o644).id
        let file = try await a.open(id, write: true, truncate: false)
        try a.write(file, offset: 0, data: Data("x".utf8))
        try a.rename("f", in: .root, to: "g", in: .root, noReplace: false)
        try a.close(file)
        try await a.push()
        let ops = try await devices.journalOperations(upTo: a.head)
        #expect(ops.contains { if case .update = $0 { true } else { false } })
        let b = try await devices.open("b")
        #expect(try await b.readFile("g") == Data("x".utf8))
        await a.stop()
        await b.stop()
    }
}

/// Attributes set after an item was made (`tar x`, `cp -a`: chown, chmod, utimens after the
/// close) fold into its queued create too (journal format 8).
struct AttributesFoldIntoCreateTests {
    @Test("chown, chmod, utimens and setfattr after a new file's close: one create carries them; another device sees them")
    func attributesAfterCloseFold() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let id = try await a.writeFile("f", Data("tarred".utf8))
        let past = Timestamp(seconds: 1_600_000_000, nanoseconds: 0)
        _ = try a.giveAway(id) { _ in Owner(uid: 1000, gid: 100) }
        _ = try a.setAttributes(id, mode: 0o644)
        try a.setUserAttribute("user.origin", of: id, to: Data("tar".utf8))
        let set = try a.setAttributes(id, mtime: past)
        #expect(set.mtime == past && set.ctime > past)
        try await a.push()
        let ops = try await devices.journalOperations(upTo: a.head)
        #expect(ops.count == 1)
        guard case .create(let create) = ops.first else { Issue.record("no create: \(ops)"); return }
        #expect(create.mode == 0o644 && create.mtime == past && create.ctime == set.ctime)
        let b = try await devices.open("b")
        let seen = try b.attributes(of: b.id("f"))
        #expect(seen.mode == 0o644 && seen.mtime == past && seen.ctime == set.ctime)
        #expect(seen.owner == Owner(uid: 1000, gid: 100))
        #expect(try b.userAttribute("user.origin", of: b.id("f")) == Data("tar".utf8))
        #expect(try await b.readFile("f") == Data("tarred".utf8))
        // The device that made it shows the same once its change landed.
        let landed = try a.attributes(of: id)
        #expect(landed.mtime == past && landed.ctime == set.ctime && landed.mode == 0o644)
        await a.stop()
        await b.stop()
    }
}

/// What waits to be recorded is the latest version of each queued change (`saveChangeSoon`).
struct FoldedQueueRecordTests {
    @Test("a create with its content and mode folded in, and changes queued after it, survive a restart; new changes after it take new numbers")
    func foldedQueueSurvivesRestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        var a = try await devices.open("a")
        let id = try await a.writeFile("f", Data("folded".utf8))
        _ = try a.setAttributes(id, mode: 0o640)
        try await a.writeFile("g", Data("queued after".utf8))
        #expect(a.pendingChangeCount == 2)
        await a.stop()
        a = try await devices.open("a")
        #expect(a.pendingChangeCount == 2)
        // Numbered after the two: a reused number would replace a queued change's row.
        try await a.writeFile("h", Data("after the restart".utf8))
        await a.stop()
        a = try await devices.open("a")
        #expect(a.pendingChangeCount == 3)
        try await a.push()
        let ops = try await devices.journalOperations(upTo: a.head)
        #expect(ops.count == 3 && ops.allSatisfy { if case .create = $0 { true } else { false } })
        try await devices.expectNewDevice(
            "b", reads: ["f": Data("folded".utf8), "g": Data("queued after".utf8), "h": Data("after the restart".utf8)])
        let b = try await devices.open("c")
        #expect(try b.attributes(of: b.id("f")).mode == 0o640)
        await a.stop()
        await b.stop()
    }

    @Test("an update of an item made further back in the queue than a fold looks is queued on its own, and arrives")
    func updateBeyondTheLookbackIsQueued() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        _ = try await a.writeFile("old", Data("old".utf8))
        let id = try a.id("old")
        _ = try await devices.writeFiles(DeviceView.foldLookback + 1, on: a) { Data("\($0)".utf8) }
        _ = try a.setAttributes(id, mode: 0o644)
        try await a.push()
        let ops = try await devices.journalOperations(upTo: a.head)
        #expect(ops.contains { if case .update(let update) = $0 { update.id == id && update.mode == 0o644 } else { false } })
        let b = try await devices.open("b")
        #expect(try b.attributes(of: b.id("old")).mode == 0o644)
        await a.stop()
        await b.stop()
    }
}
