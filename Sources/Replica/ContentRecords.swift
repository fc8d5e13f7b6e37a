import ContainerFormat

/// The local copies' records by item, with the totals the periodic work asks for kept as
/// each record changes: the cache bound, `sync --wait` and the pinned-file downloads ask
/// every second or more often, and summing the records each time walked every file with a
/// local copy (30,000 after a `tar x`).
struct ContentRecords: Sendable, Sequence {
    private var records: [ItemID: ContentRecord]
    /// Bytes present in all local copies (within each file's size).
    private(set) var presentBytes: UInt64 = 0
    /// Records of files written since their last commit.
    private(set) var dirtyCount = 0
    private(set) var pinnedCount = 0

    init(_ records: [ItemID: ContentRecord] = [:]) {
        self.records = records
        for record in records.values { count(record, as: 1) }
    }

    subscript(id: ItemID) -> ContentRecord? {
        get { records[id] }
        _modify {
            if let before = records[id] { count(before, as: -1) }
            // In place: a write's range goes into the record without copying it.
            yield &records[id]
            if let after = records[id] { count(after, as: 1) }
        }
    }

    @discardableResult
    mutating func removeValue(forKey id: ItemID) -> ContentRecord? {
        guard let record = records.removeValue(forKey: id) else { return nil }
        count(record, as: -1)
        return record
    }

    var ids: Dictionary<ItemID, ContentRecord>.Keys { records.keys }
    var values: Dictionary<ItemID, ContentRecord>.Values { records.values }

    func makeIterator() -> Dictionary<ItemID, ContentRecord>.Iterator { records.makeIterator() }

    private mutating func count(_ record: ContentRecord, as sign: Int) {
        let present = record.present.coveredBytes(below: record.size)
        presentBytes = sign > 0 ? presentBytes + present : presentBytes - present
        if record.dirty { dirtyCount += sign }
        if record.pinned { pinnedCount += sign }
    }
}
