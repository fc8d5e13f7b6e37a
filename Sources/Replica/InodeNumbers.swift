import ContainerFormat

/// Stable inode numbers: one per item, handed out on first use and never reused. New ones
/// are saved in batches (`takeUnsaved`), not in a transaction each: a walk of a large
/// container meets thousands of items for the first time.
struct InodeNumbers: Sendable {
    private var byID: [ItemID: UInt64] = [:]
    /// Numbers are handed out in order from 1, so the ids by number are an array (16 bytes
    /// a number; a dictionary took 48 to 64); a number never handed out holds `unassigned`.
    private var byNumber: [ItemID] = []
    private static let unassigned = ItemID("")
    private var next: UInt64 = 1
    private var unsaved: [(UInt64, ItemID)] = []

    /// From the saved assignments.
    init(_ saved: [(UInt64, ItemID)]) {
        for (number, id) in saved { record(number, id) }
    }

    func number(of id: ItemID) -> UInt64? { byID[id] }

    func item(_ number: UInt64) -> ItemID? {
        guard number >= 1, number <= byNumber.count else { return nil }
        let id = byNumber[Int(number - 1)]
        return id == Self.unassigned ? nil : id
    }

    /// The number of `id`, assigning the next free one on first use.
    mutating func assign(_ id: ItemID) -> UInt64 {
        if let number = byID[id] { return number }
        let number = next
        record(number, id)
        unsaved.append((number, id))
        return number
    }

    /// Assignments made since the last call (the caller saves them).
    mutating func takeUnsaved() -> [(UInt64, ItemID)] {
        defer { unsaved = [] }
        return unsaved
    }

    var hasUnsaved: Bool { !unsaved.isEmpty }

    private mutating func record(_ number: UInt64, _ id: ItemID) {
        guard number >= 1 else { return }  // 0 is no inode
        byID[id] = number
        if number > byNumber.count {
            byNumber.append(contentsOf: repeatElement(Self.unassigned, count: Int(number) - byNumber.count))
        }
        byNumber[Int(number - 1)] = id
        next = max(next, number + 1)
    }
}
