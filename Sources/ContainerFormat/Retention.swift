/// How long a container keeps what is no longer current (a journal entry sets it; see
/// FORMAT.md "Retention").
public struct RetentionPolicy: Hashable, Codable, Sendable {
    /// Seconds a replaced content is kept after it was replaced.
    public var versions: Int64
    /// Seconds a deleted item is kept after it was deleted.
    public var deleted: Int64

    public init(versions: Int64, deleted: Int64) {
        self.versions = versions
        self.deleted = deleted
    }

    /// What a container that never set one keeps: 30 days of each.
    public static let standard = RetentionPolicy(versions: 30 * 86_400, deleted: 30 * 86_400)

    /// The expiry this policy calls for at `now`.
    public func expiry(at now: Timestamp) -> Expiry {
        Expiry(
            versionsBefore: Timestamp(clamping: now.seconds - versions, nanoseconds: now.nanoseconds),
            deletedBefore: Timestamp(clamping: now.seconds - deleted, nanoseconds: now.nanoseconds))
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
