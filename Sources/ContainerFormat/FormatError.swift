/// What the container format rejects. Store failures pass through as `StoreError`.
public enum FormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidContainerName(String)
    case malformed(what: String, why: String)
    case unsupportedFormat(what: String, version: Int)
    /// A chunk's bytes do not hash to its name: never returned as data.
    case corruptChunk(hash: String)

    public var code: String {
        switch self {
        case .invalidContainerName: "invalidContainer"
        case .malformed: "malformedStoreContent"
        case .unsupportedFormat: "unsupportedFormat"
        case .corruptChunk: "corruptChunk"
        }
    }

    public var message: String {
        switch self {
        case .invalidContainerName(let name):
            "invalid container name \(name.debugDescription): use letters, digits, '.', '_' and '-', like iCloud.com.example.notes"
        case .malformed(let what, let why):
            "\(what) in the store is malformed (\(why))"
        case .unsupportedFormat(let what, let version):
            "\(what) has format version \(version), newer than this icloudfs understands: upgrade icloudfs"
        case .corruptChunk(let hash):
            "chunk \(hash) in the store does not match its hash (corrupted); the file cannot be read until it is re-uploaded"
        }
    }

    public var description: String { "\(code): \(message)" }
}
