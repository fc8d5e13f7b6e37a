/// One device's picture of its container: its own queued changes (`pending`) folded
/// speculatively on top of the synced tree (the fold of the journal as far as the device has
/// read it), which is what the user sees (`view`).
///
/// The synced tree is not kept here: the sync engine owns it and folds journal entries into
/// it (`Tree.fold`) on its own, then lands the result here (`land`), so that the fold does not
/// hold up whoever guards this view. The view shows the device's own changes as made (a
/// local edit is visible at once, even if a remote edit of the same file arrived meanwhile);
/// when the change reaches the journal, the fold decides, and a conflict shows as a conflict
/// copy. Pure: the replica persists what this holds.
public struct DeviceView: Sendable {
    /// The journal number of the synced tree the view was last built on.
    public private(set) var syncedHead: UInt64
    public private(set) var pending: [LocalChange]
    public private(set) var view: Tree
    /// How many recent local changes keep their landing number (see `landed`).
    public static let landedKept = 10_000

    /// The journal numbers at which this device's recent changes landed: what a change
    /// based on one of them is based on. 0 for one whose content did not stay where it was
    /// put (`wroteItsContent`).
    public private(set) var landed: [Int64: UInt64]
    /// Items whose content in `view` was set by a pending change, by that change's id.
    private var contentOwner: [ItemID: Int64] = [:]
    /// Items the speculative fold of `pending` touched (their view may differ from `synced`).
    private var speculativelyChanged: Set<ItemID> = []
    /// Queued changes whose fold in the view made a decision (a name taken, a folder
    /// revived, an operation skipped or redirected): while one is queued, a landing replays
    /// the queue.
    private var decided: Set<Int64> = []
    /// This device's name, for the conflict copies the view predicts.
    public let device: String

    public init(device: String, synced: Tree, pending: [LocalChange] = [], landed: [Int64: UInt64] = [:]) {
        self.device = device
        syncedHead = synced.head
        self.pending = pending
        self.landed = landed
        view = synced
        // Where packed chunks are is the synced tree's alone (readers look there): the view
        // keeping a reference to it would make the next pull that adds packs copy it whole.
        view.packedChunks = [:]
        replayPending(resetting: [], to: synced)
    }

    /// What a new operation on `id` is based on: the item's content version as the view
    /// shows it, which may be the result of a change still in the queue.
    public func base(of id: ItemID) -> BaseVersion {
        if let owner = contentOwner[id] { return .pending(owner) }
        return .seq(view.item(id)?.contentVersion ?? 0)
    }

    /// Builds a local change from operations and their bases (`base` fields are filled in).
    public func makeChange(
        localID: Int64, time: Timestamp, _ operations: [(ItemOperation, BaseVersion?)]
    ) -> LocalChange {
        var ops: [ItemOperation] = []
        var dependencies: [Int: Int64] = [:]
        for (index, (op, base)) in operations.enumerated() {
            switch base {
            case .seq(let seq)?: ops.append(op.withBase(seq))
            case .pending(let owner)?:
                dependencies[index] = owner
                ops.append(op.withBase(0))
            case nil: ops.append(op)
            }
        }
        return LocalChange(localID: localID, time: time, ops: ops, dependencies: dependencies)
    }

    /// Queues a change and shows it in the view at once.
    @discardableResult
    public mutating func append(_ change: LocalChange) -> FoldOutcome {
        assert(pending.last.map { $0.localID < change.localID } ?? true, "the queue is in local id order")
        pending.append(change)
        return applySpeculatively(change)
    }

    /// The journal number a queued change is folded at in the view: above any real one, and
    /// its own for as long as it is queued (local ids only grow), so that when earlier
    /// changes land the versions it wrote stay as they are (`landInPlace`). `icloudfs
    /// versions` shows it until the change lands.
    public static func provisionalSeq(of localID: Int64) -> UInt64 {
        provisionalBase + UInt64(localID)
    }

    public static let provisionalBase: UInt64 = 1 << 62

    /// Folds `update` (a new file's content at its close, attributes set after `tar x` or
    /// `cp -a` made an item) into the item's queued create: one change per new item instead
    /// of up to four (`Create.foldingIn`). Only when the create is queued after the first
    /// `frozen` changes (a push in flight holds those), among the last `foldLookback`, and
    /// no later queued change names the item. Returns the rewritten change (to record in
    /// place of the create's), nil when nothing was folded.
    public mutating func foldIntoQueuedCreate(_ update: ItemOperation.Update, frozen: Int) -> LocalChange? {
        var index = pending.endIndex
        let start = max(frozen, pending.startIndex, pending.endIndex - DeviceView.foldLookback)
        while index > start {
            index -= 1
            let change = pending[index]
            if change.ops.count == 1, case .create(let create) = change.ops[0], create.id == update.id {
                guard let create = create.foldingIn(update) else { return nil }
                let folded = LocalChange(
                    localID: change.localID, time: change.time, ops: [.create(create)], dependencies: change.dependencies)
                pending[index] = folded
                view.setQueuedCreate(create)
                return folded
            }
            if change.ops.contains(where: { $0.itemID == update.id || $0.namedItems.contains(update.id) }) { return nil }
        }
        return nil
    }

    /// How far back in the queue a fold looks for the item's create: the updates that fold
    /// come right after it (a close, tar's setattrs). Bounded, so that an update of an item
    /// made long ago (`chmod -R` while a large burst is still queued) costs no walk of the
    /// whole queue each.
    public static let foldLookback = 64

    /// The commit that pushes `batch` (a prefix of `pending`) as journal entry `seq`.
    public func commit(for batch: Batch, device: String, deviceID: String, seq: UInt64) -> Commit {
        let changes = pending.prefix(batch.localIDs.count)
        precondition(changes.map(\.localID) == batch.localIDs, "a batch is a prefix of the queue")
        let inBatch = Set(batch.localIDs)
        var ops: [ItemOperation] = []
        for change in changes {
            for (index, op) in change.ops.enumerated() {
                guard let owner = change.dependencies[index] else {
                    ops.append(op)
                    continue
                }
                // Based on an earlier change: one in this same commit takes this commit's
                // number; one pushed before took the number recorded when it landed.
                let base = inBatch.contains(owner) ? seq : (landed[owner] ?? 0)
                ops.append(op.withBase(base))
            }
        }
        return Commit(
            commitID: batch.commitID, device: device, deviceID: deviceID,
            time: changes.first?.time ?? .zero, ops: ops)
    }

    /// The first `limit` operations' worth of queued changes (at least one change), and at
    /// most `maximumChunks` chunk references: every version of a large file lists all its
    /// chunks, and a commit is built, encoded and decoded whole in memory.
    public func nextBatchIDs(maximumOperations limit: Int, maximumChunks: Int = .max) -> [Int64] {
        var ids: [Int64] = []
        var count = 0
        var chunks = 0
        for change in pending {
            let changeChunks = change.ops.reduce(0) { $0 + $1.chunks.count }
            if !ids.isEmpty && (count + change.ops.count > limit || chunks + changeChunks > maximumChunks) { break }
            ids.append(change.localID)
            count += change.ops.count
            chunks += changeChunks
        }
        return ids
    }

    /// Starts again from `tree` (a snapshot newer than the journal this device could read),
    /// keeping the queue; returns the queued changes rewritten (see `recreateExpired`).
    /// `old` is the synced tree the view was built on.
    public mutating func rebase(on tree: Tree, from old: Tree) -> [LocalChange] {
        let before = view
        let gone = Set(old.allIDs.filter { tree.item($0) == nil })
        let rewritten = recreateExpired(gone) { before.item($0) }
        self = DeviceView(device: device, synced: tree, pending: pending, landed: landed)
        return rewritten
    }

    /// Lands journal entries the sync engine folded into its synced tree (`synced`, now
    /// `Tree.fold`'s result): if they hold `ourBatch`, those changes leave the queue; the
    /// view is rebuilt on the new tree. The outcome's `changed` names every item whose state
    /// in the view changed.
    public mutating func land(_ folded: FoldedEntries, on synced: Tree, ourBatch: Batch?) -> RemoteOutcome {
        var result = RemoteOutcome()
        result.changed = folded.changed
        result.outcomes = folded.outcomes
        let landsInPlace = ourBatch.map { canLandInPlace(folded, ourBatch: $0) } ?? false
        if let ourBatch, let seq = folded.ourBatchSeq {
            let done = Set(ourBatch.localIDs)
            for change in pending.prefix(ourBatch.localIDs.count) {
                landed[change.localID] = DeviceView.wroteItsContent(change, at: seq, in: synced) ? seq : 0
            }
            pending.removeAll { done.contains($0.localID) }
            decided.subtract(done)
            result.landedBatch = true
        }
        syncedHead = synced.head
        // Kept (not only for queued changes): an open file's writer may still be based on a
        // change that has landed. Bounded: the oldest go first, trimmed now and then (local
        // ids only grow, so the newest `landedKept` ids are those above a cutoff).
        if landed.count > DeviceView.landedKept + DeviceView.landedKept / 4, let newest = landed.keys.max() {
            let cutoff = newest - Int64(DeviceView.landedKept)
            landed = landed.filter { $0.key > cutoff }
        }
        if landsInPlace, let ourBatch, let landedInPlace = landInPlace(ourBatch, changed: folded.changed, on: synced) {
            result.previous = landedInPlace
            assert(matchesFullReplay(on: synced), "the batch landed in place differs from a full replay")
            result.changed = result.changed.filter { !Item.sameApartFromVersions(landedInPlace[$0], view.items[$0]) }
            return result
        }
        // Only items the journal or a queued change touched can differ between the view and
        // the synced tree: the view is rebuilt from those alone (a pull costs what it
        // changed, not the size of the container).
        let touched = speculativelyChanged.union(result.changed)
        result.previous = touched.reduce(into: [:]) { previous, id in previous[id] = view.items[id] }
        result.rewritten = recreateExpired(result.changed.filter { synced.item($0) == nil }) { [previous = result.previous] in
            previous[$0]
        }
        replayPending(resetting: touched, to: synced)
        assert(matchesFullReplay(on: synced), "the view rebuilt from touched items differs from a full replay")
        // Of those, keep the ones that look different: the device's own changes landing
        // only renumber versions. One the replay touched for the first time counts.
        result.changed = touched.union(speculativelyChanged).filter { id in
            !touched.contains(id) || !Item.sameApartFromVersions(result.previous[id], view.items[id])
        }
        return result
    }

    // MARK: - Internals

    /// Whether each content `change` set is where a later change based on it will look for
    /// it: the item holds it at `seq`, or (the fold redirected it there) a copy of the item
    /// that a base of `seq` leads to does. Not when the fold made it a conflict copy, or a
    /// later operation of the same entry replaced it: the item's version `seq` is then not
    /// what the device saw, and a change based on it must conflict (its base is recorded as
    /// 0), not replace that version unseen.
    static func wroteItsContent(_ change: LocalChange, at seq: UInt64, in synced: Tree) -> Bool {
        change.ops.allSatisfy { op in
            let content: Content
            switch op {
            case .create(let create): content = create.content
            case .update(let update):
                guard let updated = update.content else { return true }
                content = updated
            case .move, .delete: return true
            }
            guard let item = synced.item(op.itemID) else { return false }
            if item.contentVersion == seq { return item.chunks == content.chunks }
            return synced.conflictCopies(of: item.id).contains {
                $0.contentVersion == seq && $0.contentFrom == item.id && $0.chunks == content.chunks
            }
        }
    }

    /// Whether the landing of `ourBatch` can leave the queue's other changes folded as they
    /// are: it is all the entries brought, and neither its fold into the synced tree nor any
    /// fold in the view made a decision. Then the batch, folded as one entry, left the same
    /// items named, placed and filled as its changes folded in the view did; only its
    /// journal number, the times the entry stamps (of the content, a deletion, a past
    /// version's replacement) and whether new content is still on its way (a push marks
    /// large content so, metadata first) differ. The other changes folded at their own
    /// numbers, and such values never pass from one item to another in a fold without
    /// decisions.
    private func canLandInPlace(_ folded: FoldedEntries, ourBatch: Batch) -> Bool {
        guard folded.ourBatchSeq != nil, folded.outcomes.count == 1, decided.isEmpty else { return false }
        return !folded.outcomes[0].madeDecisions
    }

    /// Lands `batch` (already out of the queue) without replaying the queue: each item the
    /// entry changed takes the synced tree's state if no queued change wrote it since (every
    /// write stamps the item's `version`), else keeps the view's state with the batch's
    /// provisional numbers and times replaced by the entry's. Returns the items as they were
    /// before, or nil (nothing changed) when an item does not fit this: then the queue is
    /// replayed.
    private mutating func landInPlace(_ batch: Batch, changed: Set<ItemID>, on synced: Tree) -> [ItemID: Item]? {
        let batchSeqs = Set(batch.localIDs.map(DeviceView.provisionalSeq))
        var previous: [ItemID: Item] = [:]
        var updated: [Item] = []
        var settled: [ItemID] = []
        for id in changed {
            guard let old = view.items[id], let new = synced.item(id) else { return nil }
            previous[id] = old
            if batchSeqs.contains(old.version) {
                updated.append(new)
                settled.append(id)
                continue
            }
            // A queued change wrote it after the batch. A deletion both made is ambiguous
            // (the batch's, whose time moves, or the later change's): replay.
            guard old.deletion == nil || new.deletion == nil else { return nil }
            var item = old
            if batchSeqs.contains(old.contentVersion) {
                (item.contentVersion, item.contentTime, item.contentDevice) = (new.contentVersion, new.contentTime, new.contentDevice)
                item.isContentPending = new.isContentPending
            }
            // The past versions up to the batch are the entry's; those after, the queue's,
            // the first of which may be the batch's content.
            let kept = new.history ?? []
            let all = old.history ?? []
            guard all.count >= kept.count else { return nil }
            let later = all[kept.count...].map { past in
                guard batchSeqs.contains(past.seq) else { return past }
                var past = past
                (past.seq, past.time) = (new.contentVersion, new.contentTime ?? new.mtime)
                return past
            }
            item.history = kept.isEmpty && later.isEmpty ? nil : kept + later
            updated.append(item)
        }
        for item in updated { view.store(item) }
        let batchIDs = Set(batch.localIDs)
        for id in changed where contentOwner[id].map(batchIDs.contains) == true { contentOwner[id] = nil }
        // Where the view now equals the synced tree, no queued change wrote the item.
        speculativelyChanged.subtract(settled)
        view.head = pending.last.map { DeviceView.provisionalSeq(of: $0.localID) } ?? synced.head
        view.policy = synced.policy
        return previous
    }

    /// Items an expiry removed from the synced tree (tombstones past the retention period)
    /// that queued changes still name: an edit or rename of one made here before this device
    /// saw the delete (offline for longer than the retention) would be rejected by the fold
    /// and lost. Such an operation becomes a create of the item as the view showed it
    /// (before the expiry), after the folders above it that went too: the same outcome as an
    /// edit reviving a deleted item. Attribute changes and deletes of them are dropped.
    /// Returns the changes rewritten (the replica stores them again).
    private mutating func recreateExpired(_ gone: Set<ItemID>, as before: (ItemID) -> Item?) -> [LocalChange] {
        // Nearly always: nothing went (the queue is not walked per pull).
        guard !gone.isEmpty else { return [] }
        let named = Set(pending.flatMap { $0.ops.flatMap(\.namedItems) })
        guard !gone.isDisjoint(with: named) else { return [] }
        var recreated = Set<ItemID>()
        var rewritten: [LocalChange] = []
        for position in pending.indices {
            let change = pending[position]
            var ops: [ItemOperation] = []
            var dependencies: [Int: Int64] = [:]
            func recreate(_ id: ItemID) {
                guard gone.contains(id), !recreated.contains(id), let item = before(id), !item.deleted else { return }
                recreate(item.parent)
                ops.append(.create(.init(recreating: item)))
                recreated.insert(id)
            }
            for (index, op) in change.ops.enumerated() {
                let id = op.itemID
                let expired = gone.contains(id) && !recreated.contains(id)
                switch op {
                case .update(let update) where expired:
                    if update.content != nil { recreate(id) }
                    continue
                case .move where expired:
                    recreate(id)
                    continue
                case .delete where expired:
                    continue
                case .create(let create):
                    recreate(create.parent)
                    if let linked = create.linkedItem { recreate(linked) }
                case .move(let move):
                    recreate(move.parent)
                default:
                    break
                }
                if let owner = change.dependencies[index] { dependencies[ops.count] = owner }
                ops.append(op)
            }
            guard ops != change.ops else { continue }
            pending[position] = LocalChange(localID: change.localID, time: change.time, ops: ops, dependencies: dependencies)
            rewritten.append(pending[position])
        }
        return rewritten
    }

    /// Checked in debug builds: the incremental rebuild gives what replaying from scratch does.
    private func matchesFullReplay(on synced: Tree) -> Bool {
        let full = DeviceView(device: device, synced: synced, pending: pending, landed: landed)
        return full.view == view && full.contentOwner == contentOwner
    }

    /// Rebuilds the view: the synced tree with the queue folded on top. `touched` are the
    /// items where the view may differ from the synced tree (everywhere else it equals it).
    private mutating func replayPending(resetting touched: Set<ItemID>, to synced: Tree) {
        view.reset(touched, to: synced)
        contentOwner = [:]
        speculativelyChanged = []
        decided = []
        for change in pending { applySpeculatively(change) }
    }

    /// The commit id of a queued change folded into the view: the fold does not read it, and
    /// one made per change (`local-N`) cost a string per create.
    private static let speculativeCommitID = "local"

    @discardableResult
    private mutating func applySpeculatively(_ change: LocalChange) -> FoldOutcome {
        let seq = DeviceView.provisionalSeq(of: change.localID)
        // Locally the device's own change wins: it is shown as made, whatever arrived since.
        // Only the journal decides conflicts, so the view never holds a conflict copy with an
        // id the journal will not have.
        // (A hard link's delete is based on its item's content.)
        let ops = change.ops.map { op in
            op.base == nil ? op : op.withBase(view.item(op.itemID).flatMap(view.resolved)?.contentVersion ?? 0)
        }
        let commit = Commit(
            commitID: DeviceView.speculativeCommitID, device: device, deviceID: "", time: change.time, ops: ops)
        let outcome = view.apply(commit, seq: seq)
        speculativelyChanged.formUnion(outcome.changed)
        if outcome.madeDecisions { decided.insert(change.localID) }
        for op in ops {
            let id = op.itemID
            if view.item(id)?.contentVersion == seq { contentOwner[id] = change.localID }
        }
        return outcome
    }
}

/// What applying journal entries did to a device's view.
public struct RemoteOutcome: Sendable {
    /// Items whose state in the view changed (for cache invalidation and `monitor`).
    public var changed: Set<ItemID> = []
    /// The fold's outcome per entry (rejections and decisions, for the log).
    public var outcomes: [FoldOutcome] = []
    /// True when the device's own batch was among the entries.
    public var landedBatch = false
    /// The view's items before, of those that may have changed (absent: did not exist).
    public var previous: [ItemID: Item] = [:]
    /// Queued changes rewritten because they named items the expiry removed.
    public var rewritten: [LocalChange] = []

    public init() {}
}
