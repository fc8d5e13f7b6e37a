/// How long a container keeps what is no longer current (a journal entry sets it; see
/// FORMAT.md "Retention").
public struct RetentionPolicy: Hashable, Codable, Sendable {
    /// Seconds a replaced content is kept after it was replaced.
    public var versions: Int64
    /// Seconds a deleted item is kept after it was deleted.
    public var deleted: Int64
    /// Seconds collection waits between choosing what to delete and deleting it, and the
    /// youngest a chunk or journal entry it deletes may be (FORMAT.md "Collection"). Devices
    /// look for collections at least four times as often.
    public var grace: Int64

    public init(versions: Int64, deleted: Int64, grace: Int64 = RetentionPolicy.standardGrace) {
        self.versions = versions
        self.deleted = deleted
        self.grace = grace
    }

    public static let standardGrace: Int64 = 3600

    /// What a container that never set one keeps: 30 days of each.
    public static let standard = RetentionPolicy(versions: 30 * 86_400, deleted: 30 * 86_400)

    enum CodingKeys: String, CodingKey { case versions, deleted, grace }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        versions = try container.decode(Int64.self, forKey: .versions)
        deleted = try container.decode(Int64.self, forKey: .deleted)
        grace = try container.decodeIfPresent(Int64.self, forKey: .grace) ?? Self.standardGrace
    }

    /// The expiry this policy calls for at `now`.
    public func expiry(at now: Timestamp) -> Expiry {
        Expiry(versionsBefore: now.adding(seconds: -versions), deletedBefore: now.adding(seconds: -deleted))
    }
}

/// An entry's instruction to drop what the retention period no longer keeps: past versions
/// replaced, and tombstones deleted, before these times (the collector writes it; every
/// device folds it alike, so all agree on what history holds).
public struct Expiry: Hashable, Codable, Sendable {
    public var versionsBefore: Timestamp
    public var deletedBefore: Timestamp

    public init(versionsBefore: Timestamp, deletedBefore: Timestamp) {
        self.versionsBefore = versionsBefore
        self.deletedBefore = deletedBefore
    }
}
