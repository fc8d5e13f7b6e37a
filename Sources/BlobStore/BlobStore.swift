import Foundation
import SystemPackage

/// The remote a container lives in, shaped like S3 so that every backend is thin.
///
/// Keys are `/`-separated paths of safe characters (see ``BlobKey``). Every call is atomic
/// for one key: a reader sees a whole object or none. Implementations must be safe to use
/// from several tasks and several processes (devices) at once.
public protocol BlobStore: Sendable {
    /// Where the store is, for messages (never credentials).
    var location: String { get }

    /// The whole object. Throws ``StoreError/notFound(_:)`` when there is none, and
    /// ``StoreError/badObject(_:)`` when it is larger than `maximumSize` or not an object at
    /// all (a folder, a FIFO, a symlink in a directory store): store content is untrusted,
    /// and a 1 TB journal entry or a FIFO must not stall every device.
    func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data

    /// The bytes of `range` (clamped to the object's end). Throws `notFound` when absent.
    func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data

    /// Size of the object, or nil when absent (S3 `HEAD`).
    func size(of key: BlobKey) async throws -> UInt64?

    /// Creates the object only if the key is free; throws ``StoreError/alreadyExists(_:)``
    /// otherwise. This is the store's one synchronisation primitive (S3 `If-None-Match: *`).
    func putIfAbsent(_ key: BlobKey, data: Data) async throws

    /// Creates or replaces the object.
    func put(_ key: BlobKey, data: Data) async throws

    /// Up to `limit` objects whose keys start with `prefix` and sort after `after`, in byte
    /// order, with their sizes and times (S3 `ListObjectsV2` with `start-after`). Page by
    /// passing the last key back.
    func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject]

    /// Every object under `prefix` after `after`, in byte order. See the extension for the
    /// default (paging through `list`).
    func listAll(prefix: String, after: BlobKey?) async throws -> [StoredObject]

    /// The names of the folders right under `prefix` (a prefix ending in `/`, or "" for
    /// the top): each distinct next part of a key below it (S3 `ListObjectsV2` with
    /// delimiter `/`). See the extension for the default (listing every key).
    func listFolders(prefix: String) async throws -> [String]

    /// Removes the object; removing an absent key is not an error.
    func delete(_ key: BlobKey) async throws

    /// See the extension: nil unless the store can notify.
    func changeNotifications(prefix: String) -> AsyncStream<Void>?

    /// Stores each object whose key is free, leaving existing ones as they are; all are
    /// durable when it returns. See the extension for the default (several at once).
    func putAllIfAbsent(_ objects: [(key: BlobKey, data: Data)]) async throws

    /// The object open for copying into a file inside the kernel, where the store is a
    /// local folder; nil where it is not (`get` it). The bounds and errors of
    /// `get(_:maximumSize:)`. Blocks: call it off the task threads.
    func openLocally(_ key: BlobKey, maximumSize: UInt64) throws -> LocalObject?

    /// Removes what writes cut short left under `prefix` (a process killed mid-write) if
    /// it is older than `before`; how many it removed. See the extension for the default
    /// (nothing: a store whose writes are whole or absent leaves nothing).
    func removeAbandonedWrites(under prefix: String, before: Date) async throws -> Int
}

/// An object of a local store, open, its bytes already being read from disk.
public final class LocalObject {
    let fd: FileDescriptor
    public let size: UInt64
    let path: String

    init(fd: FileDescriptor, size: UInt64, path: String) {
        self.fd = fd
        self.size = size
        self.path = path
        // The disk starts on it now: the copy (often under a lock) then finds it in memory.
        _ = posix_fadvise(fd.rawValue, 0, off_t(size), POSIX_FADV_WILLNEED)
    }

    deinit { try? fd.close() }

    /// Every byte, read at once.
    public func read() throws -> Data {
        let data = try FileIO.read(fd, offset: 0, count: Int(size))
        guard data.count == Int(size) else { throw StoreError.badObject("\(path) changed while it was read") }
        return data
    }
}

extension BlobStore {
    /// The largest object any read accepts when the caller names no bound.
    public static var defaultMaximumSize: UInt64 { 1 << 30 }

    public func get(_ key: BlobKey) async throws -> Data {
        try await get(key, maximumSize: Self.defaultMaximumSize)
    }

    /// A stream that yields soon after anyone creates a key under `prefix`, where the store
    /// can tell (nil where it cannot: callers poll). A hint only: yields may be spurious or
    /// coalesced, and callers still read to find out what changed.
    public func changeNotifications(prefix: String) -> AsyncStream<Void>? { nil }

    public func openLocally(_ key: BlobKey, maximumSize: UInt64) throws -> LocalObject? { nil }

    public func removeAbandonedWrites(under prefix: String, before: Date) async throws -> Int { 0 }

    /// Eight `putIfAbsent` calls in flight at once: a remote store's latency, not its
    /// bandwidth, bounds one-at-a-time uploads of small objects.
    public func putAllIfAbsent(_ objects: [(key: BlobKey, data: Data)]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, object) in objects.enumerated() {
                if index >= 8 { try await group.next() }
                group.addTask {
                    do {
                        try await putIfAbsent(object.key, data: object.data)
                    } catch StoreError.alreadyExists {
                        return
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    public func listAll(prefix: String) async throws -> [StoredObject] {
        try await listAll(prefix: prefix, after: nil)
    }

    public func listFolders(prefix: String) async throws -> [String] {
        var names = Set<String>()
        for object in try await listAll(prefix: prefix) {
            let rest = object.key.rawValue.dropFirst(prefix.count)
            if let slash = rest.firstIndex(of: "/") { names.insert(String(rest[..<slash])) }
        }
        return names.sorted()
    }

    /// Every object under `prefix`, paging through ``list(prefix:after:limit:)``.
    public func listAll(prefix: String, after: BlobKey?) async throws -> [StoredObject] {
        var objects: [StoredObject] = []
        var cursor = after
        while true {
            let page = try await list(prefix: prefix, after: cursor, limit: 1000)
            objects += page
            guard page.count == 1000, let last = page.last else { return objects }
            cursor = last.key
        }
    }
}

/// One object of a listing.
public struct StoredObject: Hashable, Sendable {
    public var key: BlobKey
    public var size: UInt64
    /// When it was last written (S3 `LastModified`; a directory store's file mtime).
    public var modified: Date

    public init(key: BlobKey, size: UInt64, modified: Date) {
        self.key = key
        self.size = size
        self.modified = modified
    }
}
