import ContainerFormat
import Foundation
import Testing

/// Builds commits tersely for fold tests.
struct Journal {
    var tree = Tree()

    @discardableResult
    mutating func commit(_ device: String, at seconds: Int64 = 1_700_000_000, _ ops: [ItemOperation]) -> FoldOutcome {
        let commit = Commit(
            commitID: UUID().uuidString, device: device, deviceID: device,
            time: Timestamp(seconds: seconds), ops: ops)
        return tree.apply(commit, seq: tree.head + 1)
    }

    func id(_ path: String) -> ItemID? {
        var current = ItemID.root
        for name in path.split(separator: "/") {
            guard let child = tree.child(named: String(name), in: current) else { return nil }
            current = child.id
        }
        return current
    }

    func names(in path: String = "") -> [String] {
        tree.children(of: id(path)!).map(\.name)
    }
}

extension DeviceView {
    /// Queues a change of `ops` made at second 1,000 + `localID`, as a device's requests do.
    mutating func queue(_ localID: Int64, _ ops: [(ItemOperation, BaseVersion?)]) {
        append(makeChange(localID: localID, time: Timestamp(seconds: 1_000 + localID), ops))
    }
}

func content(_ text: String) -> Content {
    let data = Data(text.utf8)
    return Content(size: UInt64(data.count), chunks: [ChunkRef(hash: ChunkHash(of: data), size: UInt32(data.count))])
}

func file(_ id: String, _ name: String, in parent: ItemID = .root, _ text: String = "") -> ItemOperation {
    .create(.init(id: ItemID(id), parent: parent, name: name, kind: .file, mode: 0o644,
                  mtime: Timestamp(seconds: 1), content: text.isEmpty ? .empty : content(text)))
}

func folder(_ id: String, _ name: String, in parent: ItemID = .root) -> ItemOperation {
    .create(.init(id: ItemID(id), parent: parent, name: name, kind: .folder, mode: 0o755, mtime: Timestamp(seconds: 1)))
}

func link(_ id: String, _ name: String, to item: String, in parent: ItemID = .root) -> ItemOperation {
    .create(.init(id: ItemID(id), parent: parent, name: name, kind: .hardLink, mode: 0, mtime: Timestamp(seconds: 1_700_000_100),
                  linkedItem: ItemID(item)))
}

func edit(_ id: String, base: UInt64, _ text: String) -> ItemOperation {
    .update(.init(id: ItemID(id), base: base, content: content(text)))
}

struct FoldTests {
    @Test("creates, edits, moves and deletes apply in order")
    func basics() {
        var journal = Journal()
        journal.commit("a", [folder("d", "Documents"), file("f", "notes.txt", in: ItemID("d"), "v1")])
        #expect(journal.names() == ["Documents"])
        #expect(journal.names(in: "Documents") == ["notes.txt"])
        journal.commit("a", [edit("f", base: 1, "v2")])
        #expect(journal.tree.item(ItemID("f"))?.chunks == content("v2").chunks)
        #expect(journal.tree.item(ItemID("f"))?.contentVersion == 2)
        journal.commit("a", [.move(.init(id: ItemID("f"), base: 2, parent: .root, name: "renamed.txt"))])
        #expect(journal.names() == ["Documents", "renamed.txt"])
        journal.commit("a", [.delete(.init(id: ItemID("f"), base: 2))])
        #expect(journal.names() == ["Documents"])
        #expect(journal.tree.item(ItemID("f"))?.deleted == true)
    }

    @Test("owners: given at creation, changed by updates, kept by conflict copies; none means 0:0")
    func owners() throws {
        var journal = Journal()
        var created = ItemOperation.Create(
            id: ItemID("f"), parent: .root, name: "f", kind: .file, mode: 0o644, mtime: Timestamp(seconds: 1),
            content: content("v1"), owner: Owner(uid: 1000, gid: 100))
        journal.commit("a", [.create(created)])
        #expect(journal.tree.item(ItemID("f"))?.owner == Owner(uid: 1000, gid: 100))
        journal.commit("a", [.update(.init(id: ItemID("f"), base: 1, owner: Owner(uid: 2000, gid: 200)))])
        #expect(journal.tree.item(ItemID("f"))?.ownerOrRoot == Owner(uid: 2000, gid: 200))
        // chown to 0:0 is held as no owner, as items from before owners were stored.
        journal.commit("a", [.update(.init(id: ItemID("f"), base: 1, owner: .root))])
        #expect(journal.tree.item(ItemID("f"))?.owner == nil)
        journal.commit("a", [.update(.init(id: ItemID("f"), base: 1, owner: Owner(uid: 5, gid: 6)))])
        // A stale edit's conflict copy keeps the file's owner.
        journal.commit("b", [edit("f", base: 0, "other")])
        let copy = try #require(journal.tree.children(of: .root).first { $0.conflictOf == ItemID("f") })
        #expect(copy.owner == Owner(uid: 5, gid: 6))
        // Commits carry owners in JSON; a commit without (format 1) decodes with none.
        created.id = ItemID("g")
        let commit = Commit(commitID: "c", device: "a", deviceID: "a", time: .zero, ops: [.create(created)])
        #expect(commit.format == Commit.formatVersion)
        let decoded = try FormatCoding.decode(Commit.self, from: FormatCoding.encode(commit))
        #expect(decoded.ops == commit.ops)
        let old = #"{"commit":"c","device":"a","deviceID":"a","format":1,"ops":[{"op":"create","id":"h","parent":"root","name":"h","kind":"file","mode":420,"mtime":{"s":0,"ns":0},"content":{"size":0,"chunks":[]},"xattrs":{}}],"time":{"s":0,"ns":0}}"#
        let legacy = try FormatCoding.decode(Commit.self, from: Data(old.utf8))
        guard case .create(let op) = legacy.ops.first else { Issue.record("no create in \(legacy.ops)"); return }
        #expect(op.owner == nil)
    }

    @Test("times: an operation's change time is the item's ctime; entries made, moved or removed move their folders' times")
    func changeTimes() {
        var journal = Journal()
        journal.commit("a", [folder("d", "d"), folder("e", "e")])
        var created = ItemOperation.Create(
            id: ItemID("f"), parent: ItemID("d"), name: "f", kind: .file, mode: 0o644, mtime: Timestamp(seconds: 10))
        created.owner = nil
        journal.commit("a", [.create(created)])
        #expect(journal.tree.item(ItemID("d"))?.mtime == Timestamp(seconds: 10))
        #expect(journal.tree.item(ItemID("f"))?.ctime == nil)  // shown as its mtime
        var chmod = ItemOperation.Update(id: ItemID("f"), base: 0, mode: 0o600)
        chmod.ctime = Timestamp(seconds: 20)
        chmod.atime = Timestamp(seconds: 5, nanoseconds: 7)
        journal.commit("a", [.update(chmod)])
        #expect(journal.tree.item(ItemID("f"))?.ctime == Timestamp(seconds: 20))
        #expect(journal.tree.item(ItemID("f"))?.atime == Timestamp(seconds: 5, nanoseconds: 7))
        #expect(journal.tree.item(ItemID("f"))?.mtime == Timestamp(seconds: 10))
        var move = ItemOperation.Move(id: ItemID("f"), base: 0, parent: ItemID("e"), name: "g")
        move.ctime = Timestamp(seconds: 30)
        journal.commit("a", [.move(move)])
        #expect(journal.tree.item(ItemID("d"))?.ctime == Timestamp(seconds: 30))
        #expect(journal.tree.item(ItemID("e"))?.mtime == Timestamp(seconds: 30))
        #expect(journal.tree.item(ItemID("f"))?.ctime == Timestamp(seconds: 30))
        var delete = ItemOperation.Delete(id: ItemID("f"), base: 2)
        delete.ctime = Timestamp(seconds: 40)
        journal.commit("a", [.delete(delete)])
        #expect(journal.tree.item(ItemID("e"))?.mtime == Timestamp(seconds: 40))
        // Operations of format 1 carry no change time: they move no folder's times.
        journal.commit("a", [.move(.init(id: ItemID("e"), base: 0, parent: ItemID("d"), name: "e"))])
        #expect(journal.tree.item(ItemID("d"))?.mtime == Timestamp(seconds: 30))
    }

    @Test("an edit from an old base becomes a conflict copy named after the device and UTC time")
    func conflictCopy() {
        var journal = Journal()
        journal.commit("a", [file("f", "report.txt", "base")])
        journal.commit("laptop", [edit("f", base: 1, "first")])
        // 2024-03-05 14:07:09 UTC
        let outcome = journal.commit("phone", at: 1_709_647_629, [edit("f", base: 1, "second")])
        #expect(journal.names() == ["report (conflicted copy from phone 2024-03-05 14.07.09).txt", "report.txt"])
        #expect(journal.tree.item(ItemID("f"))?.chunks == content("first").chunks)
        let copy = journal.tree.child(named: "report (conflicted copy from phone 2024-03-05 14.07.09).txt", in: .root)
        #expect(copy?.chunks == content("second").chunks)
        #expect(copy?.conflictOf == ItemID("f"))
        #expect(journal.tree.hasUnresolvedConflicts(ItemID("f")))
        #expect(outcome.changed.contains(ItemID("f")))
        // Renaming the copy away resolves the conflict.
        journal.commit("a", [.move(.init(id: copy!.id, base: 3, parent: .root, name: "mine.txt"))])
        #expect(!journal.tree.hasUnresolvedConflicts(ItemID("f")))
    }

    @Test("operations based on a version that became a conflict copy continue on that copy")
    func chainedEditsOneCopy() {
        var journal = Journal()
        journal.commit("a", [file("f", "doc.txt", "base")])
        journal.commit("b", [edit("f", base: 1, "b wins")])
        // c saves twice in one commit from the old base: one copy, with the last content.
        journal.commit("c", [edit("f", base: 1, "c first"), edit("f", base: 3, "c second")])
        #expect(journal.names().count == 2)
        let copy = journal.tree.conflictCopies(of: ItemID("f")).first!
        #expect(copy.chunks == content("c second").chunks)
        // A later commit of c, based on its lost version, still lands on the copy.
        journal.commit("c", [edit("f", base: 3, "c third")])
        #expect(journal.names().count == 2)
        #expect(journal.tree.item(copy.id)?.chunks == content("c third").chunks)
        #expect(journal.tree.item(ItemID("f"))?.chunks == content("b wins").chunks)
        // Deleting what c saw as the file deletes its copy, not b's version.
        journal.commit("c", [.delete(.init(id: ItemID("f"), base: 4))])
        #expect(journal.names() == ["doc.txt"])
        #expect(!journal.tree.hasUnresolvedConflicts(ItemID("f")))
    }

    @Test("deleting the conflict copy resolves the conflict")
    func deleteCopyResolves() {
        var journal = Journal()
        journal.commit("a", [file("f", "a", "x")])
        journal.commit("a", [edit("f", base: 1, "y")])
        journal.commit("b", [edit("f", base: 1, "z")])
        let copy = journal.tree.conflictCopies(of: ItemID("f")).first!
        #expect(copy.name == "a (conflicted copy from b 2023-11-14 22.13.20)")
        journal.commit("a", [.delete(.init(id: copy.id, base: copy.contentVersion))])
        #expect(!journal.tree.hasUnresolvedConflicts(ItemID("f")))
    }

    @Test("two creates of one name: the later becomes NAME 2.EXT, then NAME 3.EXT")
    func sameName() {
        var journal = Journal()
        journal.commit("a", [file("1", "photo.jpg")])
        journal.commit("b", [file("2", "photo.jpg")])
        journal.commit("c", [file("3", "photo.jpg")])
        journal.commit("c", [folder("4", ".config"), folder("5", ".config")])
        #expect(journal.names() == [".config", ".config 2", "photo 2.jpg", "photo 3.jpg", "photo.jpg"])
        #expect(journal.tree.child(named: "photo.jpg", in: .root)?.id == ItemID("1"))
    }

    @Test("hard links: more names of one item, which lives while any name is left; each name made or removed moves its ctime")
    func hardLinks() throws {
        var journal = Journal()
        journal.commit("a", [folder("d", "d"), file("f", "a.txt", "v1")])
        journal.commit("a", at: 1_700_000_100, [link("l1", "b.txt", to: "f"), link("l2", "c.txt", to: "f", in: ItemID("d"))])
        #expect(journal.names() == ["a.txt", "b.txt", "d"])
        #expect(journal.tree.linkCount(of: ItemID("f")) == 3)
        #expect(journal.tree.item(ItemID("f"))?.ctime == Timestamp(seconds: 1_700_000_100))
        let second = try #require(journal.tree.child(named: "c.txt", in: ItemID("d")))
        #expect(journal.tree.resolved(second)?.id == ItemID("f"))

        // The item's own name goes; the item and its content stay under the others.
        var remove = ItemOperation.Delete(id: ItemID("f"), base: 1)
        remove.ctime = Timestamp(seconds: 50)
        journal.commit("a", [.delete(remove)])
        #expect(journal.names() == ["b.txt", "d"])
        #expect(journal.tree.linkCount(of: ItemID("f")) == 2)
        #expect(journal.tree.liveItem(ItemID("f"))?.chunks == content("v1").chunks)
        #expect(journal.tree.item(ItemID("f"))?.ctime == Timestamp(seconds: 50))

        // An edit through a link changes the item, without bringing back its own name.
        journal.commit("b", [edit("f", base: 1, "v2")])
        #expect(journal.names() == ["b.txt", "d"])
        #expect(journal.tree.liveItem(ItemID("f"))?.chunks == content("v2").chunks)

        // Removing the last name of content changed since it was seen is declined.
        journal.commit("a", [.delete(.init(id: ItemID("l1"), base: 4))])
        #expect(journal.tree.linkCount(of: ItemID("f")) == 1)
        journal.commit("a", [.delete(.init(id: ItemID("l2"), base: 2))])
        #expect(journal.names(in: "d") == ["c.txt"])
        journal.commit("a", [.delete(.init(id: ItemID("l2"), base: 4))])
        #expect(journal.names(in: "d") == [])
        #expect(!journal.tree.isLive(ItemID("f")))

        // A link made by a device that had not seen the last name go brings the item back.
        journal.commit("b", [link("l3", "kept.txt", to: "f")])
        #expect(journal.tree.liveItem(ItemID("f"))?.chunks == content("v2").chunks)
        #expect(journal.names() == ["d", "kept.txt"])
    }

    @Test("a folder's link count is 2 and one per live subfolder (their '..'), as on ext4")
    func folderLinkCounts() {
        var journal = Journal()
        journal.commit("a", [folder("d", "d"), folder("e", "e", in: ItemID("d")), folder("g", "g", in: ItemID("d")), file("f", "f", in: ItemID("d"))])
        #expect(journal.tree.linkCount(of: .root) == 3)
        #expect(journal.tree.linkCount(of: ItemID("d")) == 4)
        journal.commit("a", [.move(.init(id: ItemID("g"), base: 1, parent: .root, name: "g")), .delete(.init(id: ItemID("e"), base: 1))])
        #expect(journal.tree.linkCount(of: ItemID("d")) == 2)
        #expect(journal.tree.linkCount(of: .root) == 4)
        let restored = Tree(items: journal.tree.allItems, head: journal.tree.head)
        #expect(restored.linkCount(of: .root) == 4 && restored.linkCount(of: ItemID("d")) == 2)
    }

    @Test("hard links to folders, to links, to nothing, and links with content or attributes are rejected")
    func hostileLinks() {
        var journal = Journal()
        journal.commit("a", [folder("d", "d"), file("f", "a.txt", "v1"), link("l", "b.txt", to: "f")])
        var withContent = ItemOperation.Create(
            id: ItemID("x3"), parent: .root, name: "x3", kind: .hardLink, mode: 0, mtime: .zero, content: content("x"),
            linkedItem: ItemID("f"))
        withContent.mode = 0
        let outcome = journal.commit("b", [
            link("x1", "x1", to: "d"), link("x2", "x2", to: "l"), .create(withContent), link("x4", "x4", to: "none"),
            .create(.init(id: ItemID("x5"), parent: .root, name: "x5", kind: .file, mode: 0, mtime: .zero, linkedItem: ItemID("f"))),
            .update(.init(id: ItemID("l"), base: 0, mode: 0o777)),
        ])
        #expect(outcome.rejected.count == 6)
        #expect(journal.names() == ["a.txt", "b.txt", "d"])
    }

    @Test("history: each content replaced is kept with when and by which device it was made; empty contents are not")
    func history() throws {
        var journal = Journal()
        journal.commit("laptop", at: 100, [.create(.init(id: ItemID("f"), parent: .root, name: "f", kind: .file, mode: 0o644, mtime: .zero))])
        journal.commit("laptop", at: 200, [edit("f", base: 1, "v1")])
        journal.commit("desk", at: 300, [edit("f", base: 2, "v2")])
        journal.commit("laptop", at: 400, [edit("f", base: 3, "v3")])
        let item = try #require(journal.tree.item(ItemID("f")))
        #expect(item.contentTime == Timestamp(seconds: 400) && item.contentDevice == "laptop")
        #expect(item.history?.map(\.seq) == [2, 3])  // the empty first content is not kept
        #expect(item.history?.map(\.device) == ["laptop", "desk"])
        #expect(item.history?.map(\.replaced) == [Timestamp(seconds: 300), Timestamp(seconds: 400)])
        #expect(item.history?.first?.chunks == content("v1").chunks)
        // A conflict copy is made by the commit that conflicted; the item's history stays.
        journal.commit("desk", at: 500, [edit("f", base: 3, "late")])
        let copy = try #require(journal.tree.conflictCopies(of: ItemID("f")).first)
        #expect(copy.contentDevice == "desk" && copy.history == nil)
        #expect(journal.tree.item(ItemID("f"))?.history?.count == 2)
        // A deletion records when and by whom; bringing the item back (a move) clears it.
        journal.commit("phone", at: 600, [.delete(.init(id: ItemID("f"), base: 4))])
        #expect(journal.tree.item(ItemID("f"))?.deletion == Deletion(time: Timestamp(seconds: 600), device: "phone"))
        // Kept in snapshots.
        let restored = try SnapshotCoding.decode(SnapshotCoding.encode(Snapshot(of: journal.tree)))
        #expect(restored.tree == journal.tree)
        journal.commit("laptop", at: 700, [.move(.init(id: ItemID("f"), base: 0, parent: .root, name: "f"))])
        #expect(journal.tree.liveItem(ItemID("f"))?.deletion == nil)
        #expect(journal.tree.item(ItemID("f"))?.history?.count == 2)
    }

    @Test("retention: a policy entry sets it; an expiry drops past versions and tombstones older than it, on every device alike")
    func expiry() throws {
        var journal = Journal()
        journal.commit("a", at: 100, [file("f", "f.txt", "v1"), file("g", "g.txt", "gone"), folder("d", "d")])
        journal.commit("a", at: 200, [edit("f", base: 1, "v2")])
        journal.commit("a", at: 300, [edit("f", base: 2, "v3"), .delete(.init(id: ItemID("g"), base: 1))])
        journal.commit("a", at: 400, [.delete(.init(id: ItemID("d"), base: 0))])
        #expect(journal.tree.policy == nil)
        var policy = Commit(commitID: "p", device: "a", deviceID: "a", time: Timestamp(seconds: 450), ops: [])
        policy.policy = RetentionPolicy(versions: 150, deleted: 120)
        _ = journal.tree.apply(policy, seq: journal.tree.head + 1)
        #expect(journal.tree.policy == RetentionPolicy(versions: 150, deleted: 120))
        // At 500: versions replaced before 350 go (v1 at 200, v2 at 300); deletions before 380 (g).
        var expire = Commit(commitID: "e", device: "a", deviceID: "a", time: Timestamp(seconds: 500), ops: [])
        expire.expire = RetentionPolicy(versions: 150, deleted: 120).expiry(at: Timestamp(seconds: 500))
        #expect(expire.expire == Expiry(versionsBefore: Timestamp(seconds: 350), deletedBefore: Timestamp(seconds: 380)))
        let outcome = journal.tree.apply(expire, seq: journal.tree.head + 1)
        #expect(outcome.changed == [ItemID("f"), ItemID("g")])
        #expect(journal.tree.item(ItemID("f"))?.history == nil)
        #expect(journal.tree.item(ItemID("g")) == nil)
        #expect(journal.tree.item(ItemID("d"))?.deleted == true)  // deleted at 400: kept
        // Kept in snapshots; and entries round-trip in JSON.
        let restored = try SnapshotCoding.decode(SnapshotCoding.encode(Snapshot(of: journal.tree)))
        #expect(restored.tree == journal.tree)
        #expect(try FormatCoding.decode(Commit.self, from: FormatCoding.encode(expire)) == expire)
        // A negative policy is refused.
        var bad = policy
        bad.policy = RetentionPolicy(versions: -1, deleted: 0)
        #expect(journal.tree.apply(bad, seq: journal.tree.head + 1).rejected.count == 1)
        #expect(journal.tree.policy == RetentionPolicy(versions: 150, deleted: 120))
    }

    @Test("an edit queued by a device that never saw the delete survives the tombstone's expiry (and its folder's)")
    func editSurvivesExpiry() {
        var journal = Journal()
        journal.commit("b", at: 100, [folder("d", "docs"), file("f", "f.txt", in: ItemID("d"), "v1")])
        let created = journal.tree
        var device = DeviceView(device: "a", synced: created)
        // Offline on a: an edit, and a new file beside it.
        let offline = device.makeChange(localID: 1, time: Timestamp(seconds: 150), [
            (edit("f", base: 0, "edited offline"), .seq(1)),
            (file("n", "new.txt", in: ItemID("d"), "new"), nil),
        ])
        device.append(offline)
        // Meanwhile b deletes the folder, and a collector expires the tombstones.
        let delete = Commit(commitID: "del", device: "b", deviceID: "b", time: Timestamp(seconds: 200), ops: [
            .delete(.init(id: ItemID("f"), base: 1)), .delete(.init(id: ItemID("d"), base: 0)),
        ])
        var expire = Commit(commitID: "exp", device: "c", deviceID: "c", time: Timestamp(seconds: 300), ops: [])
        expire.expire = Expiry(versionsBefore: Timestamp(seconds: 300), deletedBefore: Timestamp(seconds: 300))
        _ = journal.tree.apply(delete, seq: 2)
        _ = journal.tree.apply(expire, seq: 3)
        let expired = journal.tree
        #expect(expired.item(ItemID("f")) == nil && expired.item(ItemID("d")) == nil)
        var synced = created
        let outcome = device.land(synced.fold([(2, delete), (3, expire)], ourBatch: nil), on: synced, ourBatch: nil)
        #expect(synced == expired)
        #expect(outcome.rewritten.count == 1)
        #expect(device.view.liveItem(ItemID("f"))?.chunks == content("edited offline").chunks)
        // Pushed: the folder and the file are made again, and the new file lands in it.
        let commit = device.commit(for: Batch(commitID: "push", localIDs: [1]), device: "a", deviceID: "a", seq: 4)
        #expect(journal.tree.apply(commit, seq: 4).rejected.isEmpty)
        #expect(journal.tree.liveItem(ItemID("f"))?.chunks == content("edited offline").chunks)
        #expect(journal.tree.liveItem(ItemID("n"))?.parent == ItemID("d"))
        #expect(journal.tree.liveItem(ItemID("d"))?.name == "docs")
        // The same on a device that starts again from a snapshot taken after the expiry.
        var behind = DeviceView(device: "a", synced: created)
        behind.append(offline)
        #expect(behind.rebase(on: expired, from: created).count == 1)
        #expect(behind.view.liveItem(ItemID("f"))?.chunks == content("edited offline").chunks)
        #expect(behind.view.liveItem(ItemID("n"))?.parent == ItemID("d"))
    }

    @Test("a change queued between the synced tree's fold and the view's landing (the replica's window) is kept, shown and based on the landed change")
    func changeQueuedBetweenFoldAndLanding() {
        var synced = Tree()
        var device = DeviceView(device: "a", synced: synced)
        device.queue(1, [(file("f", "f.txt", "one"), nil)])
        device.queue(2, [(file("g", "g.txt", "two"), nil)])
        let batch = Batch(commitID: "push-1", localIDs: [1])
        let ours = device.commit(for: batch, device: "a", deviceID: "a", seq: 1)
        let theirs = Commit(commitID: "b-1", device: "b", deviceID: "b", time: Timestamp(seconds: 150), ops: [file("h", "h.txt", "three")])
        // The sync engine folds; a request queues an edit of f (based on the queued change 1)
        // before the view lands the fold.
        let folded = synced.fold([(1, ours), (2, theirs)], ourBatch: batch)
        #expect(folded.ourBatchSeq == 1 && folded.changed.isSuperset(of: [ItemID("f"), ItemID("h")]))
        #expect(device.base(of: ItemID("f")) == .pending(1))
        device.queue(3, [(edit("f", base: 0, "one, edited"), device.base(of: ItemID("f")))])
        let outcome = device.land(folded, on: synced, ourBatch: batch)
        #expect(outcome.landedBatch)
        #expect(device.pending.map(\.localID) == [2, 3])
        #expect(device.syncedHead == 2 && device.landed[1] == 1)
        #expect(device.view == DeviceView(device: "a", synced: synced, pending: device.pending, landed: device.landed).view)
        #expect(device.view.liveItem(ItemID("f"))?.chunks == content("one, edited").chunks)
        #expect(device.view.liveItem(ItemID("g")) != nil && device.view.liveItem(ItemID("h")) != nil)
        // Pushed next, the edit is based on the entry its base landed in: no conflict copy.
        let next = device.commit(for: Batch(commitID: "push-2", localIDs: [2, 3]), device: "a", deviceID: "a", seq: 3)
        #expect(synced.apply(next, seq: 3).rejected.isEmpty)
        #expect(synced.liveItem(ItemID("f"))?.chunks == content("one, edited").chunks)
        #expect(synced.conflictCopies(of: ItemID("f")).isEmpty)
    }

    @Test("the device's own batch lands in place: only its items change, the queue after it keeps the numbers it was folded at")
    func ownBatchLandsInPlace() {
        var journal = Journal()
        journal.commit("b", at: 100, [folder("d", "docs"), file("e", "e.txt", in: ItemID("d"), "old")])
        var synced = journal.tree
        var device = DeviceView(device: "a", synced: synced)
        device.queue(1, [(file("f", "f.txt", in: ItemID("d"), "one"), nil), (file("p", "p.bin", "large"), nil)])
        device.queue(2, [(ItemOperation.delete(.init(id: ItemID("e"), base: 0)).stamped(Timestamp(seconds: 1_002)), device.base(of: ItemID("e")))])
        device.queue(3, [(edit("f", base: 0, "two"), device.base(of: ItemID("f")))])
        device.queue(4, [(file("g", "g.txt", in: ItemID("d"), "three"), nil)])
        device.queue(5, [(.update(.init(id: ItemID("f"), base: 0, mode: 0o600)), nil)])
        device.queue(6, [(.update(.init(id: ItemID("p"), base: 0, mode: 0o600)), nil)])
        let batch = Batch(commitID: "push-1", localIDs: [1, 2])
        var ours = device.commit(for: batch, device: "a", deviceID: "a", seq: 2)
        // Pushed metadata first, as a push does large content: its chunks are on their way.
        ours.ops = ours.ops.map { $0.itemID == ItemID("p") ? $0.markingContentPending() : $0 }
        let folded = synced.fold([(2, ours)], ourBatch: batch)
        let outcome = device.land(folded, on: synced, ourBatch: batch)
        #expect(outcome.landedBatch && device.pending.map(\.localID) == [3, 4, 5, 6])
        // Only the entry's items were looked at (a replay of the queue rebuilds g too).
        #expect(Set(outcome.previous.keys) == folded.changed)
        #expect(!folded.changed.contains(ItemID("g")))
        #expect(device.view == DeviceView(device: "a", synced: synced, pending: device.pending, landed: device.landed).view)
        // f's first version is the entry's now, its second still queued; g and the folder
        // keep the numbers the queue folded them at.
        let f = device.view.liveItem(ItemID("f"))
        #expect(f?.history?.map(\.seq) == [2] && f?.history?.first?.time == Timestamp(seconds: 1_001))
        #expect(f?.contentVersion == DeviceView.provisionalSeq(of: 3) && f?.version == DeviceView.provisionalSeq(of: 5))
        #expect(device.base(of: ItemID("f")) == .pending(3))
        #expect(device.view.item(ItemID("g"))?.version == DeviceView.provisionalSeq(of: 4))
        #expect(device.view.item(ItemID("d"))?.version == DeviceView.provisionalSeq(of: 4))
        #expect(device.view.item(ItemID("e"))?.deletion?.time == Timestamp(seconds: 1_001))
        #expect(device.view.item(ItemID("p"))?.isContentPending == true && device.view.item(ItemID("p"))?.mode == 0o600)
        // Only p looks different: its content is now on its way to the store.
        #expect(outcome.changed == [ItemID("p")])
        // An entry of another device's is folded under the queue again: then everything the
        // queue touched is rebuilt.
        let theirs = Commit(commitID: "b-2", device: "b", deviceID: "b", time: Timestamp(seconds: 300), ops: [file("h", "h.txt", "four")])
        let pulled = synced.fold([(3, theirs)], ourBatch: nil)
        let after = device.land(pulled, on: synced, ourBatch: nil)
        #expect(after.previous.keys.contains(ItemID("g")))
        #expect(device.view == DeviceView(device: "a", synced: synced, pending: device.pending, landed: device.landed).view)
    }

    @Test("an edit based on this device's own edit that became a conflict copy conflicts too: it never replaces unseen the version another edit of the same entry put there")
    func editBasedOnAConflictedEditConflicts() {
        var journal = Journal()
        journal.commit("b", at: 100, [file("x", "notes.md", "first")])
        journal.commit("b", at: 110, [edit("x", base: 1, "b's edit")])
        journal.commit("a", at: 120, [edit("x", base: 1, "a's edit")])  // a conflict copy of x, made at 3
        var synced = journal.tree
        let copy = synced.conflictCopies(of: ItemID("x"))[0].id
        var device = DeviceView(device: "a", synced: synced)
        // Saved on the line of edits that continues in the copy (based on 3: the fold puts it
        // there), then the copy edited as the device saw it (based on 3 too: a conflict), then
        // edited again, based on that last edit.
        device.queue(1, [(edit("x", base: 0, "saved again"), .seq(3))])
        device.queue(2, [(edit(copy.rawValue, base: 0, "the copy edited"), .seq(3))])
        device.queue(3, [(edit(copy.rawValue, base: 0, "the copy edited twice"), device.base(of: copy))])
        #expect(device.base(of: copy) == .pending(3))
        let batch = Batch(commitID: "push-1", localIDs: [1, 2])
        let ours = device.commit(for: batch, device: "a", deviceID: "a", seq: 4)
        let folded = synced.fold([(4, ours)], ourBatch: batch)
        _ = device.land(folded, on: synced, ourBatch: batch)
        #expect(synced.item(copy)?.chunks == content("saved again").chunks)
        #expect(device.landed[1] == 4 && device.landed[2] == 0)
        let next = device.commit(for: Batch(commitID: "push-2", localIDs: [3]), device: "a", deviceID: "a", seq: 5)
        _ = synced.apply(next, seq: 5)
        // Every version written is still there.
        let held = Set(synced.allItems.filter { !$0.deleted }.map(\.chunks))
        for text in ["b's edit", "saved again", "the copy edited", "the copy edited twice"] {
            #expect(held.contains(content(text).chunks), "\(text) was lost")
        }
    }

    @Test("an edit beats a concurrent delete, in either order")
    func editBeatsDelete() {
        var first = Journal()
        first.commit("a", [file("f", "a.txt", "v1")])
        first.commit("a", [.delete(.init(id: ItemID("f"), base: 1))])
        first.commit("b", [edit("f", base: 1, "v2")])
        #expect(first.names() == ["a.txt"])
        #expect(first.tree.item(ItemID("f"))?.chunks == content("v2").chunks)

        var second = Journal()
        second.commit("a", [file("f", "a.txt", "v1")])
        second.commit("b", [edit("f", base: 1, "v2")])
        second.commit("a", [.delete(.init(id: ItemID("f"), base: 1))])
        #expect(second.names() == ["a.txt"])
    }

    @Test("deleting a folder another device wrote into keeps the folder and the item")
    func deleteFolderKeepsNewItems() {
        var journal = Journal()
        journal.commit("a", [folder("d", "Shared"), file("old", "old.txt", in: ItemID("d"), "o")])
        // b writes into the folder; then a (not having seen it) deletes what it knew.
        journal.commit("b", [file("new", "new.txt", in: ItemID("d"), "n")])
        journal.commit("a", [.delete(.init(id: ItemID("old"), base: 1)), .delete(.init(id: ItemID("d"), base: 1))])
        #expect(journal.names() == ["Shared"])
        #expect(journal.names(in: "Shared") == ["new.txt"])

        // The other order: the folder is gone first; the write revives it.
        var other = Journal()
        other.commit("a", [folder("d", "Shared")])
        other.commit("a", [.delete(.init(id: ItemID("d"), base: 1))])
        other.commit("b", [file("new", "new.txt", in: ItemID("d"), "n")])
        #expect(other.names() == ["Shared"])
        #expect(other.names(in: "Shared") == ["new.txt"])
    }

    @Test("a move that would put a folder inside itself is skipped")
    func moveCycle() {
        var journal = Journal()
        journal.commit("a", [folder("x", "x"), folder("y", "y")])
        journal.commit("a", [.move(.init(id: ItemID("x"), base: 1, parent: ItemID("y"), name: "x"))])
        let outcome = journal.commit("b", [.move(.init(id: ItemID("y"), base: 1, parent: ItemID("x"), name: "y"))])
        #expect(outcome.rejected.count == 1)
        #expect(journal.names() == ["y"])
        #expect(journal.names(in: "y") == ["x"])
    }

    @Test("a move onto a taken name gets a numbered name; a rename over a deleted file takes it")
    func moveOntoName() {
        var journal = Journal()
        journal.commit("a", [file("1", "a.txt"), file("2", "b.txt")])
        journal.commit("a", [.move(.init(id: ItemID("1"), base: 1, parent: .root, name: "b.txt"))])
        #expect(journal.names() == ["b 2.txt", "b.txt"])
        journal.commit("a", [.delete(.init(id: ItemID("2"), base: 1)),
                             .move(.init(id: ItemID("1"), base: 1, parent: .root, name: "b.txt"))])
        #expect(journal.names() == ["b.txt"])
    }

    @Test("untrusted names and malformed operations are skipped with a reason, never applied")
    func hostileNames() {
        var journal = Journal()
        let bad = ["a/b", "..", ".", "", String(repeating: "x", count: 256), "nul\u{0}"]
        let outcome = journal.commit("evil", bad.enumerated().map { file("e\($0.offset)", $0.element) } + [
            .create(.init(id: ItemID("bad id!"), parent: .root, name: "ok", kind: .file, mode: 0, mtime: .zero)),
            .create(.init(id: ItemID("lie"), parent: .root, name: "lie", kind: .file, mode: 0, mtime: .zero,
                          content: Content(size: 99, chunks: []))),
            file("good", "fine.txt"),
        ])
        #expect(outcome.rejected.count == bad.count + 2)
        #expect(journal.names() == ["fine.txt"])
    }

    @Test("attribute updates never conflict: the later wins")
    func attributesLastWriterWins() {
        var journal = Journal()
        journal.commit("a", [file("f", "f", "x")])
        journal.commit("a", [.update(.init(id: ItemID("f"), base: 1, mode: 0o600))])
        journal.commit("b", [.update(.init(id: ItemID("f"), base: 1, mode: 0o640, xattrs: ["user.tag": Data("red".utf8), "user.icloud.isPinned": Data([49])]))])
        #expect(journal.tree.item(ItemID("f"))?.mode == 0o640)
        #expect(journal.tree.item(ItemID("f"))?.xattrs == ["user.tag": Data("red".utf8)])
        #expect(journal.names() == ["f"])
    }

    @Test("conflict copy names fit in 255 bytes")
    func longNames() {
        let long = String(repeating: "n", count: 250) + ".txt"
        let name = ItemName.conflictCopy(of: long, device: "device", time: Timestamp(seconds: 0))
        #expect(name.utf8.count <= 255)
        #expect(name.hasSuffix("(conflicted copy from device 1970-01-01 00.00.00).txt"))
        #expect(ItemName.numbered("archive.tar.gz", 2) == "archive.tar 2.gz")
    }
}

struct RedirectTests {
    @Test("a save continues on the copy of its own line, not on another copy that has the same version number")
    func redirectPicksTheCopyOfItsLine() {
        var journal = Journal()
        journal.commit("a", [file("x", "x.txt", "base")])
        journal.commit("a", [edit("x", base: 1, "v2")])
        journal.commit("a", [edit("x", base: 1, "c1")])  // copy x@3.0, "from a" (sorts first)
        // One entry: b's save loses (copy x@4.0), b edits copy x@3.0 as itself (its version is
        // now 4 too), then b saves x again on top of its own losing version 4.
        journal.commit("b", [edit("x", base: 1, "c2"), edit("x@3.0", base: 3, "c1b"), edit("x", base: 4, "c2b")])
        #expect(journal.tree.item(ItemID("x@3.0"))?.chunks == content("c1b").chunks)
        #expect(journal.tree.item(ItemID("x@4.0"))?.chunks == content("c2b").chunks)
        #expect(journal.tree.item(ItemID("x"))?.chunks == content("v2").chunks)
    }
}

struct MetadataFirstFoldTests {
    @Test("content announced as pending stays pending until an uploaded entry names its entry")
    func pendingUntilUploaded() throws {
        var journal = Journal()
        journal.commit("a", [file("f", "big.bin", "content").markingContentPending()])
        #expect(journal.tree.item(ItemID("f"))?.isContentPending == true)
        // A conflicting edit's copy keeps its own flag; the original is still pending.
        journal.commit("b", [edit("f", base: 0, "other")])
        let uploaded = Commit(commitID: "u", device: "a", deviceID: "a", time: .zero, ops: [], uploaded: [1])
        let outcome = journal.tree.apply(uploaded, seq: 3)
        #expect(journal.tree.item(ItemID("f"))?.isContentPending == false)
        #expect(outcome.changed == [ItemID("f")])
        // The marker survives the journal's JSON form; old entries without it read as done.
        let decoded = try FormatCoding.decode(Commit.self, from: FormatCoding.encode(uploaded))
        #expect(decoded.uploaded == [1])
        let pendingOp = file("g", "g.bin", "x").markingContentPending()
        let roundTrip = try FormatCoding.decode(ItemOperation.self, from: FormatCoding.encode(pendingOp))
        #expect(roundTrip.announcesPendingContent)
        #expect(!file("h", "h.bin", "x").announcesPendingContent)
    }

    @Test("a tree rebuilt from its items (a snapshot, the cache's database) has the same names, links, copies and pending items")
    func rebuiltIndexes() {
        var journal = Journal()
        journal.commit("a", [folder("d", "d"), folder("e", "e", in: ItemID("d")), file("f", "f.txt", in: ItemID("d"), "v1"),
                             file("g", "g.txt", "g"), link("l", "l.txt", to: "f"), file("p", "p.bin", "p").markingContentPending()])
        journal.commit("a", [edit("f", base: 1, "v2")])
        journal.commit("b", [edit("f", base: 1, "other")])  // a conflict copy of f
        journal.commit("a", [.delete(.init(id: ItemID("g"), base: 1)), .delete(.init(id: ItemID("e"), base: 1))])
        let tree = journal.tree
        #expect(tree.hasUnresolvedConflicts(ItemID("f")))
        let rebuilt = Tree(items: tree.allItems, head: tree.head)
        #expect(rebuilt == tree)
        for id in tree.allIDs {
            #expect(rebuilt.children(of: id) == tree.children(of: id))
            #expect(rebuilt.linkCount(of: id) == tree.linkCount(of: id))
            #expect(rebuilt.conflictCopies(of: id) == tree.conflictCopies(of: id))
            #expect(rebuilt.isLive(id) == tree.isLive(id))
        }
        #expect(Set(rebuilt.itemsWithPendingContent) == [ItemID("p")])
        #expect(rebuilt.child(named: "g.txt", in: .root) == nil)  // tombstones have no name
        #expect(rebuilt.linkCount(of: ItemID("f")) == 2)
    }

    @Test("an uploaded entry clears only items still holding that entry's content, also after a snapshot")
    func uploadedFindsItsItems() {
        var journal = Journal()
        journal.commit("a", [file("f", "f.bin", "one").markingContentPending()])
        journal.commit("a", [edit("f", base: 1, "two").markingContentPending()])
        journal.commit("a", [file("g", "g.bin", "three").markingContentPending()])
        // Entry 1's content was replaced before its upload finished: nothing holds it now.
        let first = journal.tree.apply(Commit(commitID: "u1", device: "a", deviceID: "a", time: .zero, ops: [], uploaded: [1]), seq: 4)
        #expect(first.changed.isEmpty)
        #expect(journal.tree.item(ItemID("f"))?.isContentPending == true)
        // A device that starts from a snapshot finds the pending items as well.
        var restored = Tree(items: journal.tree.allItems, head: journal.tree.head)
        let second = restored.apply(Commit(commitID: "u2", device: "a", deviceID: "a", time: .zero, ops: [], uploaded: [2]), seq: 5)
        #expect(second.changed == [ItemID("f")])
        #expect(restored.item(ItemID("f"))?.isContentPending == false)
        #expect(restored.item(ItemID("g"))?.isContentPending == true)
    }

    @Test("the tree knows the journal's format from format 5 on: older entries leave it 0, so every device agrees at a SEQ")
    func journalFormat() {
        var tree = Tree()
        var entry = Commit(commitID: "a", device: "d", deviceID: "d", time: .zero, ops: [])
        entry.format = 4
        _ = tree.apply(entry, seq: 1)
        #expect(tree.journalFormat == 0 && tree.nextEntryEncoding == .json)
        entry.format = 5
        _ = tree.apply(entry, seq: 2)
        entry.format = 3
        _ = tree.apply(entry, seq: 3)
        #expect(tree.journalFormat == 5 && tree.nextEntryEncoding == .binary)
    }
}
