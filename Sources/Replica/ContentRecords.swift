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

    /// Where records' bytes rest when they have no cache file: a record holds its location
    /// there (`StagingLog.hold`, or the `append` that made it) until it lets it go.
    private let staging: StagingLog?

    init(_ records: [ItemID: ContentRecord] = [:], staging: StagingLog? = nil) {
        self.records = records
        self.staging = staging
        for record in records.values {
            count(record, as: 1)
            if let location = record.staged { staging?.hold(location) }
        }
    }

    subscript(id: ItemID) -> ContentRecord? {
        get { records[id] }
        _modify {
            let before = records[id]
            if let before { count(before, as: -1) }
            // In place: a write's range goes into the record without copying it.
            yield &records[id]
            if let after = records[id] { count(after, as: 1) }
            letGoIfMoved(before?.staged, records[id]?.staged)
        }
    }

    @discardableResult
    mutating func removeValue(forKey id: ItemID) -> ContentRecord? {
        guard let record = records.removeValue(forKey: id) else { return nil }
        count(record, as: -1)
        letGoIfMoved(record.staged, nil)
        return record
    }

    /// A record that named a place in the staging log and no longer does lets it go.
    private func letGoIfMoved(_ before: StagingLog.Location?, _ after: StagingLog.Location?) {
        if let before, before != after { staging?.letGo(before) }
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
