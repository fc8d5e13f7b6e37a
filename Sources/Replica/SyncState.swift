import SyncAttributes

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
    public var attributes: [(attribute: SyncAttribute, value: String)] {
        var list: [(SyncAttribute, String)] = [
            (.isDownloaded, SyncAttributeValue.flag(isDownloaded)),
            (.downloadingStatus, downloadingStatus.rawValue),
            (.isDownloading, SyncAttributeValue.flag(isDownloading)),
            (.percentDownloaded, SyncAttributeValue.percent(percentDownloaded)),
            (.downloadRequested, SyncAttributeValue.flag(downloadRequested)),
            (.isUploaded, SyncAttributeValue.flag(isUploaded)),
            (.isUploading, SyncAttributeValue.flag(isUploading)),
            (.percentUploaded, SyncAttributeValue.percent(percentUploaded)),
            (.hasUnresolvedConflicts, SyncAttributeValue.flag(hasUnresolvedConflicts)),
            (.isPinned, SyncAttributeValue.flag(isPinned)),
            (.itemIdentifier, itemIdentifier),
        ]
        if let downloadingError { list.append((.downloadingError, downloadingError)) }
        if let uploadingError { list.append((.uploadingError, uploadingError)) }
        return list
    }
}
