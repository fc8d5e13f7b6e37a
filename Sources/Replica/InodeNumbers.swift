import ContainerFormat

/// Stable inode numbers: one per item, handed out on first use and never reused. New ones
/// are saved in batches (`takeUnsaved`), not in a transaction each: a walk of a large
/// container meets thousands of items for the first time.
struct InodeNumbers: Sendable {
    private var byID: [ItemID: UInt64] = [:]
    private var byNumber: [UInt64: ItemID] = [:]
    private var next: UInt64 = 1
    private var unsaved: [(UInt64, ItemID)] = []

    /// From the saved assignments.
    init(_ saved: [(UInt64, ItemID)]) {
        for (number, id) in saved { record(number, id) }
    }

    func number(of id: ItemID) -> UInt64? { byID[id] }

    func item(_ number: UInt64) -> ItemID? { byNumber[number] }

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
        byID[id] = number
        byNumber[number] = id
        next = max(next, number + 1)
    }
}
