import BlobStore
import ContainerFormat

/// Errors of the replica layer. Store and format errors are wrapped, not flattened, so the
/// user-visible `code` still says what went wrong below.
public enum ReplicaError: Error, Equatable, Sendable, CustomStringConvertible {
    case notFound
    case exists
    case notEmpty
    case notAFolder
    case isAFolder
    case invalidName(String)
    case invalidArgument(String)
    /// Refused while the item is in use (open, or changes not yet uploaded).
    case busy(String)
    case notSupported(String)
    /// The cache belongs to another container or another incarnation of it.
    case identityMismatch(String)
    /// Another device announced this content (metadata first) but has not uploaded it yet.
    case contentNotUploaded(String)
    /// Reading or writing the local cache failed.
    case local(String)
    case store(StoreError)
    case format(FormatError)

    public var code: String {
        switch self {
        case .notFound: "notFound"
        case .exists: "exists"
        case .notEmpty: "notEmpty"
        case .notAFolder: "notAFolder"
        case .isAFolder: "isAFolder"
        case .invalidName: "invalidName"
        case .invalidArgument: "invalidArgument"
        case .busy: "busy"
        case .notSupported: "notSupported"
        case .identityMismatch: "identityMismatch"
        case .contentNotUploaded: "contentNotUploaded"
        case .local: "localCacheFailed"
        case .store(let error): error.code
        case .format(let error): error.code
        }
    }

    public var message: String {
        switch self {
        case .notFound: "no such item"
        case .exists: "an item with that name exists"
        case .notEmpty: "the folder is not empty"
        case .notAFolder: "not a folder"
        case .isAFolder: "is a folder"
        case .invalidName(let why), .invalidArgument(let why), .busy(let why), .notSupported(let why),
            .identityMismatch(let why), .contentNotUploaded(let why), .local(let why):
            why
        case .store(let error): error.message
        case .format(let error): error.message
        }
    }

    public var description: String { "\(code): \(message)" }

    /// Wraps whatever a lower layer threw.
    static func wrapping(_ error: any Error) -> ReplicaError {
        switch error {
        case let error as ReplicaError: error
        case let error as StoreError: .store(error)
        case let error as FormatError: .format(error)
        default: .local("\(error)")
        }
    }
}
