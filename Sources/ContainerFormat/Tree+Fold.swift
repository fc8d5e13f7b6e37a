import Foundation

/// What applying one journal entry did.
public struct FoldOutcome: Sendable {
    public var seq: UInt64
    /// Items whose state changed (created, edited, moved, deleted, revived).
    public var changed: Set<ItemID> = []
    /// Operations skipped because they were malformed or impossible, one line each.
    public var rejected: [String] = []
    /// Decisions worth knowing: conflict copies made, deletes declined, items revived.
    public var notes: [String] = []
    /// An operation based on a version a conflict copy now holds went to the copy.
    public var redirected = false

    /// Whether the fold decided anything (a note, a rejection, a redirect to a copy): a fold
    /// that did not placed and named items as the operations say.
    public var madeDecisions: Bool { !notes.isEmpty || !rejected.isEmpty || redirected }

    public init(seq: UInt64) { self.seq = seq }
}

/// The conflict rules (docs/SEMANTICS.md, "Several devices and conflicts"); the whole fold is in this file.
///
/// - An update whose `base` is not the item's current `contentVersion` changed content that
///   someone else changed first: its content becomes a sibling conflict copy, named
///   `NAME (conflicted copy from DEVICE YYYY-MM-DD HH.MM.SS).EXT`, and the item keeps the
///   earlier version. Attribute-only updates (mode, mtime, xattrs) never conflict: the later
///   one wins.
/// - A create or move onto a name a live item holds gets `NAME 2.EXT` (3, 4, ...).
/// - A delete of a file whose content changed since its base is declined (the edit wins); a
///   delete of a folder that still has live children is declined (items written into it by
///   another device stay). An edit, create or move into a deleted item revives it.
/// - A move that would put a folder inside itself is skipped.
extension Tree {
    public mutating func apply(_ commit: Commit, seq: UInt64) -> FoldOutcome {
        var outcome = FoldOutcome(seq: seq)
        guard seq > head else {
            outcome.rejected.append("journal \(seq): already applied (head \(head))")
            return outcome
        }
        if commit.droppedOperations > 0 {
            outcome.rejected.append("journal \(seq): \(commit.droppedOperations) unreadable operation(s) skipped")
        }
        var fold = Fold(seq: seq, commit: commit, outcome: outcome)
        for (index, operation) in commit.ops.enumerated() {
            fold.index = index
            switch operation {
            case .create(let op): create(op, &fold)
            case .update(let op): update(op, &fold)
            case .move(let op): move(op, &fold)
            case .delete(let op): delete(op, &fold)
            }
        }
        for entry in commit.uploaded { contentUploaded(entry, &fold) }
        if let policy = commit.policy {
            if policy.versions >= 0, policy.deleted >= 0, policy.grace >= 0 {
                self.policy = policy
            } else {
                fold.reject("a retention policy of negative length")
            }
        }
        // The last location wins: a repack or a device storing a chunk again moves it, and
        // the pack it left may then be collected.
        for pack in commit.packs {
            for chunk in pack.chunks {
                packedChunks[chunk.hash] = PackedLocation(pack: pack.id, offset: chunk.offset, size: chunk.size)
            }
        }
        if let expiry = commit.expire { expire(expiry, &fold) }
        head = seq
        // Counted from format 5, the first that changes how entries after it are written:
        // every device then holds the same value at a SEQ (snapshots of it are equal).
        if commit.format >= 5 { journalFormat = max(journalFormat, commit.format) }
        return fold.outcome
    }

    /// Gives an item created by a change still queued the content and attributes that
    /// change now carries (`DeviceView.foldIntoQueuedCreate`): what folding the rewritten
    /// create would show, without folding the queue again. Its version numbers stay the
    /// create's.
    mutating func setQueuedCreate(_ op: ItemOperation.Create) {
        guard var item = items[op.id] else { return }
        item.describe(as: op)
        store(item)
    }

    /// Applies an entry that could not be read at all: it still takes its sequence number.
    public mutating func skip(seq: UInt64) {
        if seq > head { head = seq }
    }

    struct Fold {
        let seq: UInt64
        let commit: Commit
        var outcome: FoldOutcome
        var index = 0

        mutating func reject(_ why: String) {
            outcome.rejected.append("journal \(seq), operation \(index): \(why) (skipped)")
        }

        mutating func note(_ what: String) {
            outcome.notes.append("journal \(seq), operation \(index): \(what)")
        }
    }

    private mutating func create(_ op: ItemOperation.Create, _ fold: inout Fold) {
        guard op.id.isValid, op.id != .root else { return fold.reject("invalid item id \(op.id)") }
        if let problem = ItemName.problem(with: op.name) { return fold.reject(problem) }
        guard items[op.id] == nil else { return fold.reject("item \(op.id) exists already") }
        if let problem = Tree.problem(kind: op.kind, content: op.content, target: op.target) {
            return fold.reject(problem)
        }
        if let problem = linkProblem(op) { return fold.reject(problem) }
        let parent = livingFolder(op.parent, &fold)
        var item = Item(
            id: op.id, parent: parent, name: freeName(op.name, in: parent, for: op.id),
            kind: op.kind, mode: 0, mtime: op.mtime, target: op.target,
            version: fold.seq, contentVersion: fold.seq, isContentPending: op.contentPending == true,
            device: op.kind == .characterDevice || op.kind == .blockDevice ? op.device ?? 0 : nil,
            linkedItem: op.kind == .hardLink ? op.linkedItem : nil)
        item.describe(as: op)
        if item.kind == .file { item.madeBy(fold.commit) }
        if item.name != op.name { fold.note("\(op.name) exists; created as \(item.name)") }
        if let linked = item.linkedItem, !isLive(linked) {
            fold.note("\(linked) had no name left; the new link \(item.name) keeps it")
        }
        store(item)
        fold.outcome.changed.insert(item.id)
        touchFolder(parent, at: op.nameTime ?? op.mtime, &fold)
        if let linked = item.linkedItem { touchLinked(linked, at: op.nameTime ?? op.mtime, &fold) }
    }

    /// Why a create cannot be a hard link, or nil: a link names a linkable item (never a
    /// folder or another link), and nothing else names one.
    private func linkProblem(_ op: ItemOperation.Create) -> String? {
        guard op.kind == .hardLink else {
            return op.linkedItem == nil ? nil : "only a hard link links to an item"
        }
        guard let linked = op.linkedItem, let item = items[linked] else { return "a hard link to no item" }
        return item.kind.isLinkable ? nil : "a hard link to a \(item.kind.rawValue)"
    }

    /// A name of `id` was made or removed at `time`: its change time moves, as `link(2)` and
    /// `unlink(2)` move it (`stat` shows the new link count).
    private mutating func touchLinked(_ id: ItemID, at time: Timestamp, _ fold: inout Fold) {
        guard var item = items[id] else { return }
        item.ctime = time
        item.version = fold.seq
        store(item)
        fold.outcome.changed.insert(id)
    }

    /// `origin`: the item the operation was addressed to, when it was redirected to a copy.
    private mutating func update(_ op: ItemOperation.Update, _ fold: inout Fold, origin: ItemID? = nil) {
        guard var item = items[op.id] else { return fold.reject("no item \(op.id)") }
        guard item.kind != .hardLink else {
            return fold.reject("\(op.id) is a hard link: its item holds content and attributes")
        }
        guard let content = op.content else {
            guard isLive(item.id) else { return fold.note("attributes of deleted \(op.id) ignored") }
            item.mode = op.mode.map { $0 & 0o7777 } ?? item.mode
            item.mtime = op.mtime ?? item.mtime
            item.xattrs = op.xattrs.map(Tree.storedAttributes) ?? item.xattrs
            item.owner = op.owner.map(Tree.stored) ?? item.owner
            item.atime = op.atime ?? item.atime
            item.ctime = op.ctime ?? item.ctime
            item.version = fold.seq
            store(item)
            fold.outcome.changed.insert(item.id)
            return
        }
        guard item.kind == .file, content.isConsistent else {
            return fold.reject("content for \(op.id) is not a file's or its sizes do not add up")
        }
        if !isLive(item.id) {
            fold.note("\(op.id) was deleted; the edit revives it")
            item = revived(item, &fold)
        } else if item.contentVersion != op.base {
            if let copy = copy(of: op.id, holding: op.base) {
                // Based on a version that now lives in a conflict copy: continue there.
                var redirected = op
                redirected.id = copy.id
                fold.outcome.redirected = true
                return update(redirected, &fold, origin: op.id)
            }
            return makeConflictCopy(of: item, with: op, content: content, &fold)
        }
        item.keepPastVersion(replacedAt: fold.commit.time)
        item.madeBy(fold.commit)
        item.size = content.size
        item.chunks = content.chunks
        item.mode = op.mode.map { $0 & 0o7777 } ?? item.mode
        item.mtime = op.mtime ?? item.mtime
        item.xattrs = op.xattrs.map(Tree.storedAttributes) ?? item.xattrs
        item.owner = op.owner.map(Tree.stored) ?? item.owner
        item.atime = op.atime ?? item.atime
        item.ctime = op.ctime ?? item.ctime
        item.version = fold.seq
        item.contentVersion = fold.seq
        item.contentFrom = origin
        item.isContentPending = op.contentPending == true
        store(item)
        fold.outcome.changed.insert(item.id)
    }

    /// Past versions replaced, and tombstones deleted, before the expiry's times go: the
    /// history each device shows is what the store keeps (FORMAT.md "Retention").
    private mutating func expire(_ expiry: Expiry, _ fold: inout Fold) {
        var expired = 0
        for id in allIDs {
            guard var item = items[id] else { continue }
            if item.deleted, !isLive(id), id != .root, (item.deletion?.time ?? .zero) < expiry.deletedBefore {
                purge(id)
                fold.outcome.changed.insert(id)
                expired += 1
                continue
            }
            guard let history = item.history else { continue }
            let kept = history.filter { $0.replaced >= expiry.versionsBefore }
            guard kept.count != history.count else { continue }
            expired += history.count - kept.count
            item.history = kept.isEmpty ? nil : kept
            store(item)
            fold.outcome.changed.insert(id)
        }
        if expired > 0 { fold.note("\(expired) past version(s) and deleted item(s) expired") }
    }

    /// The content an earlier entry announced (metadata first) is complete in the store now:
    /// every item still holding that entry's content stops waiting for it.
    private mutating func contentUploaded(_ entry: UInt64, _ fold: inout Fold) {
        guard entry < fold.seq else { return fold.reject("upload of entry \(entry) announced before it") }
        for id in pendingContent[entry] ?? [] {
            guard var done = items[id] else { continue }
            done.isContentPending = false
            store(done)
            fold.outcome.changed.insert(done.id)
        }
    }

    private mutating func makeConflictCopy(
        of item: Item, with op: ItemOperation.Update, content: Content, _ fold: inout Fold
    ) {
        let copyName = ItemName.conflictCopy(of: item.name, device: fold.commit.device, time: fold.commit.time)
        // Beside the item's own name, or where it was (its folder is revived if need be: an
        // item live through hard links may have lost its own name and folder).
        let parent = livingFolder(item.parent, &fold)
        var copy = Item(
            id: ItemID("\(item.id.rawValue)@\(fold.seq).\(fold.index)"), parent: parent,
            name: freeName(copyName, in: parent, for: nil), kind: .file,
            mode: op.mode.map { $0 & 0o7777 } ?? item.mode, mtime: op.mtime ?? item.mtime,
            size: content.size, chunks: content.chunks,
            xattrs: op.xattrs.map(Tree.storedAttributes) ?? item.xattrs,
            version: fold.seq, contentVersion: fold.seq, conflictOf: item.id, contentFrom: item.id,
            isContentPending: op.contentPending == true, owner: op.owner.map(Tree.stored) ?? item.owner)
        copy.madeBy(fold.commit)
        fold.note("\(item.id) changed since version \(op.base); kept as \(copy.name)")
        store(copy)
        fold.outcome.changed.insert(copy.id)
        fold.outcome.changed.insert(item.id)  // its hasUnresolvedConflicts changed
    }

    private mutating func move(_ op: ItemOperation.Move, _ fold: inout Fold) {
        guard op.id != .root, var item = items[op.id] else { return fold.reject("no movable item \(op.id)") }
        if let problem = ItemName.problem(with: op.name) { return fold.reject(problem) }
        guard let target = items[op.parent], target.kind == .folder else {
            return fold.reject("no folder \(op.parent) to move \(op.id) into")
        }
        guard op.parent != op.id, !isAncestor(op.id, of: op.parent) else {
            return fold.reject("moving \(op.id) into \(op.parent) would put a folder inside itself")
        }
        let parent = livingFolder(op.parent, &fold)
        if let time = op.ctime {
            touchFolder(item.parent, at: time, &fold)
            if parent != item.parent { touchFolder(parent, at: time, &fold) }
            item.ctime = time
        }
        if item.deleted { fold.note("\(op.id) was deleted; the move revives it") }
        if let original = item.conflictOf {
            fold.outcome.changed.insert(original)  // renamed away: the conflict is resolved
        }
        item.parent = parent
        item.name = freeName(op.name, in: parent, for: item.id)
        item.deleted = false
        item.deletion = nil
        item.conflictOf = nil
        item.contentFrom = nil
        item.version = fold.seq
        store(item)
        fold.outcome.changed.insert(item.id)
    }

    private mutating func delete(_ op: ItemOperation.Delete, _ fold: inout Fold) {
        guard op.id != .root, var item = items[op.id], !item.deleted else { return }
        if item.kind == .folder, hasChildren(item.id) {
            return fold.note("folder \(op.id) still holds items another device wrote; kept")
        }
        // Removing one of several names loses nothing; removing the last name of content
        // changed since `base` is declined (a hard link's content is its item's).
        let named = item.kind == .hardLink ? item.linkedItem.flatMap { items[$0] } : item
        if let named, named.kind != .folder, linkCount(of: named.id) <= 1, named.contentVersion != op.base {
            if item.kind == .hardLink {
                return fold.note("\(named.id) changed since version \(op.base); the delete of its last name is declined")
            }
            if let copy = copy(of: op.id, holding: op.base) {
                // The deleting device saw a version that now lives in this copy.
                fold.outcome.redirected = true
                return delete(.init(id: copy.id, base: op.base), &fold)
            }
            return fold.note("\(op.id) changed since version \(op.base); the delete is declined")
        }
        if let original = item.conflictOf {
            fold.outcome.changed.insert(original)
        }
        item.deleted = true
        item.deletion = Deletion(time: fold.commit.time, device: fold.commit.device)
        item.version = fold.seq
        if let time = op.ctime, links[item.id] != nil { item.ctime = time }  // one name of several went
        store(item)
        fold.outcome.changed.insert(item.id)
        if let time = op.ctime {
            touchFolder(item.parent, at: time, &fold)
            if let linked = item.linkedItem { touchLinked(linked, at: time, &fold) }
        }
    }

    /// An entry of `folder` was made, renamed or removed at `time`: its modification and
    /// change times move (a create's time is its `mtime`; a move or delete of format 1
    /// carries no time and moves nothing).
    private mutating func touchFolder(_ folder: ItemID, at time: Timestamp, _ fold: inout Fold) {
        // In place: times and versions key no index, and every create touches its folder.
        let touched = items.modify(folder) { item in
            guard item.kind == .folder, !item.deleted else { return false }
            item.mtime = time
            item.ctime = time
            item.version = fold.seq
            return true
        }
        if touched { fold.outcome.changed.insert(folder) }
    }

    /// An owner as items hold it: 0 and 0 as nil, so that every device (and every
    /// snapshot) holds the same value for the same owner.
    static func stored(_ owner: Owner?) -> Owner? {
        owner == .root ? nil : owner
    }

    // MARK: - Helpers

    /// The live conflict copy of `id` whose content is version `base` of `id`'s line of
    /// edits, if any: an operation based on that version continues on the copy (one device's
    /// successive saves make one copy). A copy changed since (by anyone) no longer holds
    /// `base`: then it conflicts. A copy edited as itself is not `id`'s line, even when its
    /// new version has the same number.
    private func copy(of id: ItemID, holding base: UInt64) -> Item? {
        conflictCopies(of: id).first { $0.contentVersion == base && $0.contentFrom == id }
    }

    /// `id` if it is a live folder; a deleted folder is revived; anything else means root.
    private mutating func livingFolder(_ id: ItemID, _ fold: inout Fold, depth: Int = 0) -> ItemID {
        guard let folder = items[id], folder.kind == .folder, depth < Tree.maximumDepth else {
            fold.note("no folder \(id); using the root")
            return .root
        }
        if folder.deleted {
            fold.note("folder \(id) was deleted; revived to keep what was written into it")
            store(revived(folder, &fold, depth: depth))
            fold.outcome.changed.insert(id)
        }
        return id
    }

    private mutating func revived(_ item: Item, _ fold: inout Fold, depth: Int = 0) -> Item {
        var item = item
        item.parent = livingFolder(item.parent, &fold, depth: depth + 1)
        item.name = freeName(item.name, in: item.parent, for: item.id)
        item.deleted = false
        item.deletion = nil
        item.version = fold.seq
        return item
    }

    /// `name`, or `NAME 2.EXT`, `NAME 3.EXT`, ... if a live item other than `id` holds it.
    private func freeName(_ name: String, in folder: ItemID, for id: ItemID?) -> String {
        func isFree(_ candidate: String) -> Bool {
            guard let holder = childIndex[folder]?[NameKey(candidate)] else { return true }
            return holder == id
        }
        if isFree(name) { return name }
        var n = 2
        while !isFree(ItemName.numbered(name, n)) { n += 1 }
        return ItemName.numbered(name, n)
    }

    static func problem(kind: ItemKind, content: Content, target: String?) -> String? {
        guard content.isConsistent else { return "chunk sizes do not add up to the size" }
        switch kind {
        case .file:
            return target == nil ? nil : "a file has no link target"
        case .folder:
            return content.size == 0 && target == nil ? nil : "a folder has no content"
        case .symlink:
            guard let target, !target.isEmpty, NameBytes.count(target) < 4096, !target.utf8.contains(0) else {
                return "a symlink needs a target of 1 to 4095 bytes without NUL"
            }
            return content.size == 0 ? nil : "a symlink has no content"
        case .fifo, .socket, .characterDevice, .blockDevice:
            return content.size == 0 && target == nil ? nil : "a special file has no content"
        case .hardLink:
            return content.size == 0 && target == nil ? nil : "a hard link has no content of its own"
        }
    }

    /// Only the attributes items keep (`AttributeName`) travel.
    static func storedAttributes(_ attributes: [String: Data]) -> [String: Data] {
        attributes.filter { name, _ in AttributeName.isStored(name) }
    }
}

extension Item {
    /// The current content was made by `commit` (its time and device).
    mutating func madeBy(_ commit: Commit) {
        contentTime = commit.time
        contentDevice = commit.device
    }

    /// New content replaces the current one at `time`: the current one joins the history
    /// (an empty content is not kept: restoring it is a truncate).
    mutating func keepPastVersion(replacedAt time: Timestamp) {
        guard kind == .file, size > 0 else { return }
        let past = PastVersion(
            seq: contentVersion, time: contentTime ?? mtime, device: contentDevice ?? "", size: size, chunks: chunks,
            replaced: time)
        history = (history ?? []) + [past]
    }
}

extension Item {
    /// What a create says of its item besides its place and versions: set when the item is
    /// made, and again when a fold rewrites its still-queued create (`setQueuedCreate`).
    fileprivate mutating func describe(as op: ItemOperation.Create) {
        mode = op.mode & 0o7777
        mtime = op.mtime
        size = op.content.size
        chunks = op.content.chunks
        xattrs = Tree.storedAttributes(op.xattrs)
        owner = Tree.stored(op.owner)
        atime = op.atime
        ctime = op.ctime
    }
}

/// Journal entries folded into the synced tree (`Tree.fold`), to land in the view.
public struct FoldedEntries: Sendable {
    /// Items the entries changed in the synced tree.
    public var changed: Set<ItemID> = []
    /// The fold's outcome per readable entry, in order.
    public var outcomes: [FoldOutcome] = []
    /// Where the device's own batch landed, if it was among the entries.
    public var ourBatchSeq: UInt64?

    public init() {}
}

extension Tree {
    /// Folds journal entries in order (a nil commit: unreadable, it only takes its number).
    /// `ourBatch`: the device's batch in flight, noted if it is among them.
    public mutating func fold(_ entries: [(seq: UInt64, commit: Commit?)], ourBatch: Batch?) -> FoldedEntries {
        var result = FoldedEntries()
        for (seq, commit) in entries {
            guard let commit else {
                skip(seq: seq)
                continue
            }
            let outcome = apply(commit, seq: seq)
            result.changed.formUnion(outcome.changed)
            result.outcomes.append(outcome)
            if commit.commitID == ourBatch?.commitID { result.ourBatchSeq = seq }
        }
        return result
    }
}
