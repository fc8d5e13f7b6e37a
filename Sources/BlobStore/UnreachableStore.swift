import Foundation

/// A store that is never reached (`-o offline`): every call fails at once as unavailable, so
/// the device works from its cache and queues its changes.
public struct UnreachableStore: BlobStore {
    public let location: String

    public init(location: String) { self.location = location }

    private var failure: StoreError { .unavailable("offline mode (-o offline): \(location) is not contacted") }

    public func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data { throw failure }
    public func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data { throw failure }
    public func size(of key: BlobKey) async throws -> UInt64? { throw failure }
    public func putIfAbsent(_ key: BlobKey, data: Data) async throws { throw failure }
    public func put(_ key: BlobKey, data: Data) async throws { throw failure }
    public func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] { throw failure }
    public func delete(_ key: BlobKey) async throws { throw failure }
}
