import BlobStore
import ContainerFormat
import Foundation
import Logging
import Replica
import Synchronization
import SystemPackage
import TestSupport
import Testing

let quietLogger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

/// A directory store and any number of devices on it, each with its own cache.
struct Devices {
    let folder = TemporaryDirectory("replica")
    let container = "iCloud.com.example.tests"

    var store: DirectoryStore { try! DirectoryStore(root: FilePath(folder.sub("store"))) }

    func open(_ name: String, configure: (inout ReplicaConfiguration) -> Void = { _ in }) async throws -> Replica {
        var configuration = ReplicaConfiguration(container: container, cacheDirectory: folder.sub("cache-\(name)"), deviceName: name)
        configure(&configuration)
        return try await Replica.open(configuration, store: store, logger: quietLogger)
    }

    func chunkFiles() -> Set<String> {
        let root = folder.sub("store/\(container)/chunks")
        return Set((try? FileManager.default.subpathsOfDirectory(atPath: root))?.filter { $0.count > 3 } ?? [])
    }

    func remove() { folder.remove() }

    /// The store key of journal entry `seq`.
    func journalKey(_ seq: UInt64) throws -> BlobKey {
        try BlobKey("\(container)/journal/" + String(format: "%020d", seq))
    }

    /// Every operation of journal entries 1 through `head`, in order.
    func journalOperations(upTo head: UInt64) async throws -> [ItemOperation] {
        var ops: [ItemOperation] = []
        for seq in 1...head {
            ops += try JournalCoding.decode(try await store.get(journalKey(seq), maximumSize: 1 << 24)).ops
        }
        return ops
    }

    /// Writes files `f0`, `f1`, ... with `content(index)` on `device`; returns them by name.
    func writeFiles(
        _ count: Int, on device: Replica, content: (Int) -> Data
    ) async throws -> [String: Data] {
        var written: [String: Data] = [:]
        for index in 0..<count {
            written["f\(index)"] = content(index)
            _ = try await device.writeFile("f\(index)", written["f\(index)"]!)
        }
        return written
    }

    /// A new device `name` reads every file of `written` as written.
    func expectNewDevice(_ name: String, reads written: [String: Data]) async throws {
        let device = try await open(name)
        for (path, data) in written { #expect(try await device.readFile(path) == data) }
        await device.stop()
    }
}

extension Replica {
    func id(_ path: String) throws -> ItemID {
        var current = ItemID.root
        for name in path.split(separator: "/") {
            current = try lookup(String(name), in: current).id
        }
        return current
    }

    /// Creates or replaces a file's content, like `cat > path`.
    @discardableResult
    func writeFile(_ path: String, _ data: Data, durable: Bool = false) async throws -> ItemID {
        let parts = path.split(separator: "/").map(String.init)
        let parent = try id(parts.dropLast().joined(separator: "/"))
        let existing = try? lookup(parts.last!, in: parent).id
        let id = try existing ?? makeFile(parts.last!, in: parent, mode: 0o644).id
        let file = try await open(id, write: true, truncate: true)
        try write(file, offset: 0, data: data)
        try commit(file, durable: durable)
        try close(file)
        return id
    }

    func readFile(_ path: String) async throws -> Data {
        let file = try await open(try id(path), write: false, truncate: false)
        defer { try? close(file) }
        var data = Data()
        while true {
            let piece = try await read(file, offset: UInt64(data.count), count: 1 << 20)
            if piece.isEmpty { return data }
            data += piece
        }
    }

    func names(_ path: String = "") throws -> [String] {
        try list(try id(path)).map(\.name)
    }
}

/// A directory store that serves at once only the chunks `servedAtOnce` names: a get of any
/// other chunk waits until `release()` (or `hold` passes, so that a read that wants it fails
/// its test instead of hanging). Records every chunk it served, in order. It cannot open
/// objects locally, so every chunk a replica downloads goes through `get`.
final class GatedChunkStore: BlobStore {
    let base: DirectoryStore
    let servedAtOnce: Set<BlobKey>
    let hold: Duration
    private let state = Mutex<(released: Bool, served: [BlobKey])>((false, []))

    init(_ base: DirectoryStore, servedAtOnce: Set<BlobKey>, hold: Duration = .seconds(10)) {
        self.base = base
        self.servedAtOnce = servedAtOnce
        self.hold = hold
    }

    /// The chunks served so far, in the order they were.
    var served: [BlobKey] { state.withLock { $0.served } }

    func release() { state.withLock { $0.released = true } }

    var location: String { base.location }

    func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data {
        let isChunk = key.rawValue.contains("/chunks/")
        if isChunk, !servedAtOnce.contains(key) {
            let deadline = ContinuousClock.now + hold
            while !state.withLock({ $0.released }), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        let data = try await base.get(key, maximumSize: maximumSize)
        if isChunk { state.withLock { $0.served.append(key) } }
        return data
    }

    /// Not how chunks are read (were they, `served` would miss them and tests using it fail).
    func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data {
        try await base.get(key, range: range)
    }

    func size(of key: BlobKey) async throws -> UInt64? { try await base.size(of: key) }
    func putIfAbsent(_ key: BlobKey, data: Data) async throws { try await base.putIfAbsent(key, data: data) }
    func put(_ key: BlobKey, data: Data) async throws { try await base.put(key, data: data) }
    func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] {
        try await base.list(prefix: prefix, after: after, limit: limit)
    }
    func delete(_ key: BlobKey) async throws { try await base.delete(key) }
}

/// A directory store whose journal refuses writes while `refusing`: the store goes away
/// between a push's uploads and its entry.
final class JournalRefusingStore: BlobStore {
    let base: DirectoryStore
    private let state = Mutex(true)

    init(_ base: DirectoryStore) { self.base = base }

    func accept() { state.withLock { $0 = false } }

    private func check(_ key: BlobKey) throws {
        if key.rawValue.contains("/journal/"), state.withLock({ $0 }) { throw StoreError.unavailable("journal refused") }
    }

    var location: String { base.location }
    func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data { try await base.get(key, maximumSize: maximumSize) }
    func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data { try await base.get(key, range: range) }
    func size(of key: BlobKey) async throws -> UInt64? { try await base.size(of: key) }
    func putIfAbsent(_ key: BlobKey, data: Data) async throws {
        try check(key)
        try await base.putIfAbsent(key, data: data)
    }
    func put(_ key: BlobKey, data: Data) async throws {
        try check(key)
        try await base.put(key, data: data)
    }
    func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] {
        try await base.list(prefix: prefix, after: after, limit: limit)
    }
    func delete(_ key: BlobKey) async throws { try await base.delete(key) }
}
