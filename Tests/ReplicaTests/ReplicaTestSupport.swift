import BlobStore
import ContainerFormat
import Foundation
import Logging
import Replica
import SystemPackage
import TestSupport

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
