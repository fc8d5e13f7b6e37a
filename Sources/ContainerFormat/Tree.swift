/// The container's tree: the deterministic fold of the journal (see `Tree+Fold.swift`).
///
/// Every device that applies the same journal entries in order holds an equal `Tree`, so
/// devices agree without talking to each other. Deleted items stay as tombstones: a later
/// edit, or a write into a deleted folder, revives them instead of losing data.
public struct Tree: Sendable {
    /// The sequence number of the last journal entry applied (0: none).
    public internal(set) var head: UInt64
    /// The retention policy the journal set last (nil: `RetentionPolicy.standard`).
    public internal(set) var policy: RetentionPolicy?
    /// The highest format of the entries folded, if 5 or more (else 0; a snapshot before
    /// format 7 does not say, and no entry before one can be of format 5).
    public internal(set) var journalFormat: Int
    /// Where the chunks stored in packs are (the first location an entry gave; others are
    /// read from `chunks/`).
    public internal(set) var packedChunks: [ChunkHash: PackedLocation] = [:]
    var items: ItemTable
    /// Live children of each folder by name.
    var childIndex: [ItemID: [NameKey: ItemID]]
    /// Live conflict copies of each item.
    var copies: [ItemID: Set<ItemID>]
    /// Live hard links (items of kind `hardLink`) to each item.
    var links: [ItemID: Set<ItemID>]
    /// How many live folders each folder holds (its link count is 2 more).
    var subfolders: [ItemID: Int]
    /// Items (tombstones too) still waiting for their content's chunks, by the journal entry
    /// that announced that content: the later "uploaded" entry finds them here, not by a
    /// scan of every item.
    var pendingContent: [UInt64: Set<ItemID>]

    /// An empty container: the root folder only.
    public init() {
        head = 0
        policy = nil
        journalFormat = 0
        items = ItemTable()
        items[.root] = .rootFolder()
        childIndex = [:]
        copies = [:]
        links = [:]
        subfolders = [:]
        pendingContent = [:]
    }

    /// The tree a snapshot or the cache's database records. The item table and the indexes
    /// by name are built at once, on two cores (a million items take about a second each).
    public init(
        items list: [Item], head: UInt64, policy: RetentionPolicy? = nil, journalFormat: Int = 0,
        packedChunks: [ChunkHash: PackedLocation] = [:]
    ) {
        let (byID, byName) = concurrently({ Tree.table(of: list) }, { Tree.liveIndexes(of: list) })
        self = byID
        self.head = head
        self.policy = policy
        self.journalFormat = journalFormat
        self.packedChunks = packedChunks
        childIndex = byName.childIndex
        copies = byName.copies
        links = byName.links
        subfolders = byName.subfolders
    }

    /// A tree of the root and `list` without the indexes of live items (`liveIndexes`).
    private static func table(of list: [Item]) -> Tree {
        var tree = Tree()
        tree.items = ItemTable(capacity: list.count + 1)
        tree.items[.root] = .rootFolder()
        // One parent id per folder: the items of a folder were decoded (a snapshot, the
        // cache's database) each with its own copy, a string each for as long as the tree.
        var parents: [ItemID: ItemID] = [:]
        for var item in list {
            if let shared = parents[item.parent] { item.parent = shared } else { parents[item.parent] = item.parent }
            tree.items[item.id] = item
            tree.indexPending(item)
        }
        return tree
    }

    /// A tree holding only the indexes of the live items of `list`.
    private static func liveIndexes(of list: [Item]) -> Tree {
        var tree = Tree()
        for item in list { tree.indexLive(item) }
        return tree
    }

    /// How the next entry is written: protobuf once the journal holds an entry of format 5
    /// (see `JournalCoding`), JSON until then.
    public var nextEntryEncoding: JournalCoding.Encoding { journalFormat >= 5 ? .binary : .json }

    public func item(_ id: ItemID) -> Item? { items[id] }

    /// The item if it exists and is live (see ``isLive``).
    public func liveItem(_ id: ItemID) -> Item? {
        guard let item = items[id], !item.deleted || links[id] != nil else { return nil }
        return item
    }

    /// Whether the item has a name: its own (not deleted), or a live hard link's. An item
    /// whose own name was removed lives on, content and all, while another name is left.
    public func isLive(_ id: ItemID) -> Bool { liveItem(id) != nil }

    /// How many names the item has: its own, unless deleted, and its live hard links; for
    /// a folder, as on ext4, 2 (its name and its `.`) and one per subfolder (their `..`).
    public func linkCount(of id: ItemID) -> Int {
        guard let item = items[id] else { return 0 }
        if item.kind == .folder { return item.deleted ? 0 : 2 + (subfolders[id] ?? 0) }
        return (item.deleted ? 0 : 1) + (links[id]?.count ?? 0)
    }

    /// The item a name stands for: for a hard link, the item it links to; else `item`.
    public func resolved(_ item: Item) -> Item? {
        guard item.kind == .hardLink else { return item }
        return item.linkedItem.flatMap { items[$0] }
    }

    /// Items (tombstones too) whose content is still waiting for its chunks in the store.
    public var itemsWithPendingContent: some Sequence<ItemID> { pendingContent.values.joined() }

    public func child(named name: String, in folder: ItemID) -> Item? {
        childIndex[folder]?[NameKey(name)].flatMap { items[$0] }
    }

    /// Live children, sorted by name.
    public func children(of folder: ItemID) -> [Item] {
        childEntries(of: folder).compactMap { items[$0.id] }
    }

    /// Names and ids of the live children, sorted by name, without copying out an item (an
    /// `ls` of a folder of 10,000 spent most of its time moving items around).
    public func childEntries(of folder: ItemID) -> [(name: String, id: ItemID)] {
        (childIndex[folder] ?? [:]).map { ($0.key.name, $0.value) }.sorted { $0.name.precedesInBytes($1.name) }
    }

    /// The live children by name, in no order, as the tree keeps them (no copy): for walks
    /// that look at names before items (a query of a large container).
    public func namedChildren(of folder: ItemID) -> [NameKey: ItemID]? { childIndex[folder] }

    public func hasChildren(_ folder: ItemID) -> Bool {
        !(childIndex[folder]?.isEmpty ?? true)
    }

    /// Ids of the live children in no particular order: for walks that visit them all,
    /// without the sort and the copies of `children` (a whole container's walk sorted every
    /// folder's children).
    public func childIDs(of folder: ItemID) -> Dictionary<NameKey, ItemID>.Values {
        (childIndex[folder] ?? [:]).values
    }

    /// True while a live conflict copy of `id` exists.
    public func hasUnresolvedConflicts(_ id: ItemID) -> Bool {
        !(copies[id]?.isEmpty ?? true)
    }

    public func conflictCopies(of id: ItemID) -> [Item] {
        (copies[id] ?? []).compactMap { items[$0] }.sorted { $0.name.precedesInBytes($1.name) }
    }

    /// Every item including tombstones, sorted by id (what a snapshot holds).
    public var allItems: [Item] {
        items.values.sorted { $0.id < $1.id }
    }

    /// Every item's id, tombstones included, in no order.
    public var allIDs: [ItemID] { Array(items.keys) }

    public var count: Int { items.count }

    /// `/`-joined names from the root, e.g. `Documents/notes.txt` (empty for the root).
    public func path(of id: ItemID) -> String? {
        var names: [String] = []
        var current = id
        var steps = 0
        while current != .root {
            guard let item = items[current], steps < Tree.maximumDepth else { return nil }
            names.append(item.name)
            current = item.parent
            steps += 1
        }
        return names.reversed().joined(separator: "/")
    }

    /// True when `ancestor` is on the parent chain of `id` (tombstones included).
    public func isAncestor(_ ancestor: ItemID, of id: ItemID) -> Bool {
        var current = id
        var steps = 0
        while current != .root, steps < Tree.maximumDepth {
            guard let item = items[current] else { return false }
            if item.parent == ancestor { return true }
            current = item.parent
            steps += 1
        }
        return ancestor == .root && id != .root
    }

    /// Bounds walks up the parent chain, so hostile content cannot loop forever.
    public static let maximumDepth = 4096

    // MARK: - Index upkeep: the one place `items` changes.

    mutating func store(_ item: Item) {
        if let old = items[item.id] {
            // Most stores change times, modes or content (a folder's times at each new name
            // in it): the indexes stay as they are.
            if Self.sameIndexKeys(old, item) {
                items[item.id] = item
                return
            }
            removeFromIndexes(old)
        }
        insertIntoIndexes(item)
    }

    /// Whether `a` and `b` sit in the same places of every index (`insertIntoIndexes`).
    private static func sameIndexKeys(_ a: Item, _ b: Item) -> Bool {
        // Names by their bytes, as the name index keys them (`NameKey`): a rename from NFC to
        // NFD changes the key though the strings are equal.
        a.parent == b.parent && a.name.hasSameBytes(as: b.name) && a.deleted == b.deleted && a.kind == b.kind
            && a.conflictOf == b.conflictOf && a.linkedItem == b.linkedItem
            && a.isContentPending == b.isContentPending && (!a.isContentPending || a.contentVersion == b.contentVersion)
    }

    /// Takes `id` out of the tree altogether (a tombstone the retention period no longer keeps).
    mutating func purge(_ id: ItemID) {
        guard let old = items[id] else { return }
        removeFromIndexes(old)
        items[id] = nil
    }

    /// Makes `ids` (and the head) as they are in `other`: a view that differs from `other`
    /// only in those items becomes equal to it without a copy of the whole tree.
    mutating func reset(_ ids: some Sequence<ItemID>, to other: Tree) {
        for id in ids {
            if let old = items[id] {
                removeFromIndexes(old)
                items[id] = nil
            }
            if let item = other.items[id] { insertIntoIndexes(item) }
        }
        head = other.head
        policy = other.policy
    }

    private mutating func insertIntoIndexes(_ item: Item) {
        items[item.id] = item
        indexPending(item)
        indexLive(item)
    }

    private mutating func indexPending(_ item: Item) {
        if item.isContentPending {
            pendingContent[item.contentVersion, default: []].insert(item.id)
        }
    }

    private mutating func indexLive(_ item: Item) {
        guard !item.deleted, item.id != .root else { return }
        childIndex[item.parent, default: [:]][NameKey(item.name)] = item.id
        if let original = item.conflictOf {
            copies[original, default: []].insert(item.id)
        }
        if let linked = item.linkedItem {
            links[linked, default: []].insert(item.id)
        }
        if item.kind == .folder { subfolders[item.parent, default: 0] += 1 }
    }

    private mutating func removeFromIndexes(_ item: Item) {
        if item.isContentPending {
            pendingContent[item.contentVersion]?.remove(item.id)
            if pendingContent[item.contentVersion]?.isEmpty == true { pendingContent[item.contentVersion] = nil }
        }
        guard !item.deleted, item.id != .root else { return }
        if childIndex[item.parent]?[NameKey(item.name)] == item.id {
            childIndex[item.parent]?[NameKey(item.name)] = nil
            if childIndex[item.parent]?.isEmpty == true { childIndex[item.parent] = nil }
        }
        if let original = item.conflictOf {
            copies[original]?.remove(item.id)
            if copies[original]?.isEmpty == true { copies[original] = nil }
        }
        if let linked = item.linkedItem {
            links[linked]?.remove(item.id)
            if links[linked]?.isEmpty == true { links[linked] = nil }
        }
        if item.kind == .folder {
            subfolders[item.parent, default: 1] -= 1
            if subfolders[item.parent] == 0 { subfolders[item.parent] = nil }
        }
    }
}

extension Tree: Equatable {
    /// Equal trees hold equal items at the same head (indexes follow from the items).
    public static func == (lhs: Tree, rhs: Tree) -> Bool {
        lhs.head == rhs.head && lhs.policy == rhs.policy && lhs.items == rhs.items
    }
}
