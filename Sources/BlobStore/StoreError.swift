/// What can go wrong talking to a store. `code` is stable (it is what users see in
/// `user.icloud.uploadingError` / `downloadingError`); `message` says what to do.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case notFound(String)
    case alreadyExists(String)
    case invalidKey(String)
    /// The store cannot be reached (missing directory, network down, server 5xx).
    case unavailable(String)
    case permissionDenied(String)
    case quotaExceeded(String)
    /// Anything else the backend reported, with its own words.
    case failed(String)
    /// The key holds something that is not an object this store may hand out: too large,
    /// or not a regular file. Not transient: it will not get better by waiting.
    case badObject(String)

    public var code: String {
        switch self {
        case .notFound: "notFound"
        case .alreadyExists: "alreadyExists"
        case .invalidKey: "invalidKey"
        case .unavailable: "serverUnavailable"
        case .permissionDenied: "permissionDenied"
        case .quotaExceeded: "quotaExceeded"
        case .failed: "storeFailed"
        case .badObject: "badObject"
        }
    }

    public var message: String {
        switch self {
        case .notFound(let key): "no object \(key) in the store"
        case .alreadyExists(let key): "object \(key) already exists"
        case .invalidKey(let key): "invalid store key \(key.debugDescription)"
        case .unavailable(let why): why
        case .permissionDenied(let why): why
        case .quotaExceeded(let why): why
        case .failed(let why): why
        case .badObject(let why): why
        }
    }

    /// Worth retrying later: the store may come back.
    public var isTransient: Bool {
        switch self {
        case .unavailable, .quotaExceeded, .failed: true
        case .notFound, .alreadyExists, .invalidKey, .permissionDenied, .badObject: false
        }
    }

    public var description: String { "\(code): \(message)" }
}
