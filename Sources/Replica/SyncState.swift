/// Every field of the attribute table in docs/SEMANTICS.md ("Sync state") for one item (or a folder's aggregate).
public struct SyncState: Sendable, Equatable {
    public enum DownloadingStatus: String, Sendable {
        case notDownloaded, downloaded, current
    }

    public var itemIdentifier: String
    public var downloadingStatus: DownloadingStatus
    public var isDownloading: Bool
    public var percentDownloaded: Double
    public var downloadRequested: Bool
    public var isUploaded: Bool
    public var isUploading: Bool
    public var percentUploaded: Double
    public var hasUnresolvedConflicts: Bool
    public var downloadingError: String?
    public var uploadingError: String?
    public var isPinned: Bool

    public var isDownloaded: Bool { downloadingStatus == .current }

    /// The `user.icloud.*` attributes present for this state, in listing order.
    public var attributes: [(name: String, value: String)] {
        var list: [(String, String)] = [
            ("user.icloud.isDownloaded", Self.flag(isDownloaded)),
            ("user.icloud.downloadingStatus", downloadingStatus.rawValue),
            ("user.icloud.isDownloading", Self.flag(isDownloading)),
            ("user.icloud.percentDownloaded", SyncState.percent(percentDownloaded)),
            ("user.icloud.downloadRequested", Self.flag(downloadRequested)),
            (SyncState.isUploadedAttribute, Self.flag(isUploaded)),
            ("user.icloud.isUploading", Self.flag(isUploading)),
            ("user.icloud.percentUploaded", SyncState.percent(percentUploaded)),
            ("user.icloud.hasUnresolvedConflicts", Self.flag(hasUnresolvedConflicts)),
            ("user.icloud.isPinned", Self.flag(isPinned)),
            (SyncState.itemIdentifierAttribute, itemIdentifier),
        ]
        if let downloadingError { list.append(("user.icloud.downloadingError", downloadingError)) }
        if let uploadingError { list.append(("user.icloud.uploadingError", uploadingError)) }
        return list
    }

    /// Asked on their own by `icloudfs sync --wait` (which polls the root), so they have
    /// cheap answers of their own, not an aggregate of a whole folder.
    public static let isUploadedAttribute = "user.icloud.isUploaded"
    public static let itemIdentifierAttribute = "user.icloud.itemIdentifier"

    public static func flag(_ value: Bool) -> String { value ? "1" : "0" }

    /// `0` … `100`, one decimal where needed (`42.5`); never `100` before complete.
    static func percent(_ value: Double) -> String {
        let clamped = min(max(value, 0), 100)
        var tenths = (clamped * 10).rounded(.down)
        if tenths == 1000 && clamped < 100 { tenths = 999 }
        let whole = Int(tenths) / 10
        let fraction = Int(tenths) % 10
        return fraction == 0 ? "\(whole)" : "\(whole).\(fraction)"
    }
}
