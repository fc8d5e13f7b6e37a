import BlobStore
import ContainerFormat
import Foundation
import GRDB
import SystemPackage

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
    /// Not allowed for this caller (`chown` to another user by anyone but root).
    case notPermitted(String)
    /// The cache belongs to another container or another incarnation of it.
    case identityMismatch(String)
    /// Another device announced this content (metadata first) but has not uploaded it yet.
    case contentNotUploaded(String)
    /// This device's cache lost a queued version's bytes before they reached the store: the
    /// version was published without them, and no device can read it.
    case contentLost(String)
    /// A file would grow past `Replica.largestFile`.
    case tooLarge(String)
    /// Reading or writing the local cache failed. `errno` is what programs see: ENOSPC,
    /// EDQUOT or EFBIG when that was the cause (a full cache disk is not an I/O error),
    /// else EIO.
    case local(String, errno: Int32 = EIO)
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
        case .notPermitted: "notPermitted"
        case .identityMismatch: "identityMismatch"
        case .contentNotUploaded: "contentNotUploaded"
        case .contentLost: "contentLost"
        case .tooLarge: "fileTooLarge"
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
        case .invalidName(let why), .invalidArgument(let why), .busy(let why), .notSupported(let why), .notPermitted(let why),
            .identityMismatch(let why), .contentNotUploaded(let why), .contentLost(let why), .tooLarge(let why),
            .local(let why, _):
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
        default: .localFailure("", error)
        }
    }

    /// The cache failed doing `what`, with `error` from the system, Foundation or SQLite:
    /// keeps the errno a program should see.
    static func localFailure(_ what: String, _ error: any Error) -> ReplicaError {
        let message = what.isEmpty ? "\(error)" : "\(what): \(error)"
        return .local(message, errno: passedOnErrno(of: error) ?? EIO)
    }

    private static func passedOnErrno(of error: any Error) -> Int32? {
        let code: Int32? =
            switch error {
            case let error as Errno: error.rawValue
            case let error as POSIXError: error.code.rawValue
            case let error as DatabaseError where error.resultCode == .SQLITE_FULL: ENOSPC
            case let error as ReplicaError: if case .local(_, let errno) = error { errno } else { nil }
            default: nil
            }
        guard let code, [ENOSPC, EDQUOT, EFBIG].contains(code) else { return nil }
        return code
    }
}
