/// A tree's items by id, stored densely: the items in one array and a small index from id
/// to position. A `[ItemID: Item]` keeps every item in a hash bucket, and a hash table is
/// up to half empty buckets: for 100,000 items it allocated 262,144 item-sized buckets
/// (50 MB); here the index's buckets hold 4-byte positions.
struct ItemTable: Sendable {
    private var slots: [Item?] = []
    private var positions: [ItemID: Int32] = [:]
    /// Positions of removed items, reused by the next insertions.
    private var free: [Int32] = []

    init() {}

    /// Room for `count` items without regrowing (a snapshot's size is known up front).
    init(capacity count: Int) {
        slots.reserveCapacity(count)
        positions.reserveCapacity(count)
    }

    subscript(id: ItemID) -> Item? {
        get { positions[id].flatMap { slots[Int($0)] } }
        set {
            if let position = positions[id] {
                slots[Int(position)] = newValue
                if newValue == nil {
                    positions[id] = nil
                    free.append(position)
                }
            } else if let newValue {
                if let position = free.popLast() {
                    slots[Int(position)] = newValue
                    positions[id] = position
                } else {
                    positions[id] = Int32(slots.count)
                    slots.append(newValue)
                }
            }
        }
    }

    /// Changes the item `id` where it is stored (no copy of it in and out); false if there is
    /// none or `body` said it changed nothing. Only for fields no index keys (see `Tree.store`).
    mutating func modify(_ id: ItemID, _ body: (inout Item) -> Bool) -> Bool {
        guard let position = positions[id] else { return false }
        return body(&slots[Int(position)]!)
    }

    var count: Int { positions.count }

    /// Every item, in no order.
    var values: some Sequence<Item> { slots.lazy.compactMap { $0 } }

    /// Every id, in no order.
    var keys: Dictionary<ItemID, Int32>.Keys { positions.keys }
}

extension ItemTable: Equatable {
    /// The same items under the same ids (where each is stored does not matter).
    static func == (lhs: ItemTable, rhs: ItemTable) -> Bool {
        lhs.count == rhs.count && lhs.values.allSatisfy { rhs[$0.id] == $0 }
    }
}
