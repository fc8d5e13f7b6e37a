/// The `user.icloud.*` extended attributes: the one list of their names and of how their
/// values are written. The mount answers them (FuseAdapter, from Replica's `SyncState`); the
/// commands ask and set them. docs/SEMANTICS.md ("Sync state", "What is kept locally") and
/// icloudfs(1) describe each one.
public enum SyncAttribute: String, CaseIterable, Sendable {
    // The state each file and folder answers, listed (to `getfattr`) in this order.
    case isDownloaded
    case downloadingStatus
    case isDownloading
    case percentDownloaded
    case downloadRequested
    case isUploaded
    case isUploading
    case percentUploaded
    case hasUnresolvedConflicts
    case isPinned
    case itemIdentifier
    /// Only while the last download failed: `code: message`.
    case downloadingError
    /// Only while the last upload failed: `code: message`.
    case uploadingError

    // Actions: writing one does something (`isPinned` too: 1 pins, 0 unpins).
    /// Download now (`icloudfs download`).
    case download
    /// Drop the local copy (`icloudfs evict`).
    case evict
    /// Push queued changes now (`icloudfs sync`).
    case sync
    /// "SEQ", or "SEQ" and a line with a new name: restore that version (`icloudfs restore`).
    case restore
    /// On the mount root: "ID", or "ID" and a line with a new name (`icloudfs undelete`).
    case undelete

    // Asked by name only, never listed.
    /// On the mount root: "DOWNLOADED_BYTES UNEVICTABLE_BYTES BOUND" (`icloudfs status`).
    case cacheUsage
    /// On the mount root: the cache folder (where the commands find the mount's control
    /// channel, `control.sock`).
    case cacheFolder
    /// A file's live conflict copies, one name per line.
    case conflictCopies
    /// A file's versions, newest first, as JSON (`icloudfs versions`).
    case versions
    /// On the mount root: "versions=S deleted=S grace=S"; written, it sets the container's
    /// retention policy (`icloudfs policy`).
    case policy
    /// On the mount root: the store's usage as JSON (`icloudfs status`).
    case storeUsage
    /// On the mount root: how the kernel serves this mount, as "NAME=VALUE" words:
    /// passthrough=on|off, why=REASON (when off), passthroughOpens, cachedOpens, and
    /// requests by kind since the mount (reads, writes, lookups, ...) (`icloudfs status`).
    case kernel
    /// On the top folder of `mount --all`: each container's name, one per line
    /// (`icloudfs containers`).
    case containers

    /// What every one of them starts with.
    public static let prefix = "user.icloud."

    /// The attribute's full name, as `getfattr -n` takes it.
    public var name: String { Self.prefix + rawValue }

    /// The attribute named `name`, if it is one of these.
    public init?(name: String) {
        guard name.hasPrefix(Self.prefix) else { return nil }
        self.init(rawValue: String(name.dropFirst(Self.prefix.count)))
    }

    /// Whether `name` is in the `user.icloud.` namespace (known or not): such attributes are
    /// the mount's, never stored with a file.
    public static func isReserved(_ name: String) -> Bool { name.hasPrefix(prefix) }

    /// The state attributes, in listing order (the two errors only while present).
    public static let state: [SyncAttribute] = [
        .isDownloaded, .downloadingStatus, .isDownloading, .percentDownloaded, .downloadRequested, .isUploaded,
        .isUploading, .percentUploaded, .hasUnresolvedConflicts, .isPinned, .itemIdentifier, .downloadingError,
        .uploadingError,
    ]
}

/// How values are written: flags as `1`/`0`, percentages as `0` … `100` with one decimal.
public enum SyncAttributeValue {
    public static func flag(_ value: Bool) -> String { value ? "1" : "0" }

    /// `true` for `1`, `false` for `0`, nil for anything else.
    public static func flag(_ text: String?) -> Bool? {
        switch text {
        case "1": true
        case "0": false
        default: nil
        }
    }

    /// `0` … `100`, one decimal where needed (`42.5`); never `100` before complete.
    public static func percent(_ value: Double) -> String {
        let clamped = min(max(value, 0), 100)
        var tenths = (clamped * 10).rounded(.down)
        if tenths == 1000 && clamped < 100 { tenths = 999 }
        let whole = Int(tenths) / 10
        let fraction = Int(tenths) % 10
        return fraction == 0 ? "\(whole)" : "\(whole).\(fraction)"
    }

    /// A percentage as written, nil if it is not one.
    public static func percent(_ text: String?) -> Double? { text.flatMap(Double.init) }
}
