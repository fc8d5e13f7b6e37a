import BlobStore
import BlobStoreS3
import ContainerFormat
import Foundation
import Logging
import Replica
import SystemPackage

// A child process for tests that need several processes or a kill at a chosen moment.
// Usage: icloudfs-testhelper COMMAND ARGS...

func waitForFile(_ path: String) {
    while !FileManager.default.fileExists(atPath: path) { usleep(1000) }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The content the crash test writes for file number `n` (the checker recomputes it).
func content(_ n: Int) -> Data {
    Data((0..<(n * 37_003 % 300_000 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) })
}

/// A directory store that sleeps a random moment before each call, so that a kill lands
/// anywhere in the upload pipeline (between chunks, before or after a journal append).
struct SlowStore: BlobStore {
    let base: DirectoryStore
    var location: String { base.location }

    func pause() async { try? await Task.sleep(for: .milliseconds(Int.random(in: 0...15))) }

    func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data {
        await pause()
        return try await base.get(key, maximumSize: maximumSize)
    }
    func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data {
        await pause()
        return try await base.get(key, range: range)
    }
    func size(of key: BlobKey) async throws -> UInt64? { await pause(); return try await base.size(of: key) }
    func putIfAbsent(_ key: BlobKey, data: Data) async throws {
        await pause()
        try await base.putIfAbsent(key, data: data)
        await pause()
    }
    func put(_ key: BlobKey, data: Data) async throws { await pause(); try await base.put(key, data: data) }
    func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] {
        await pause()
        return try await base.list(prefix: prefix, after: after, limit: limit)
    }
    func delete(_ key: BlobKey) async throws { await pause(); try await base.delete(key) }
}

func openReplica(store: String, cache: String, container: String) async throws -> Replica {
    var configuration = ReplicaConfiguration(container: container, cacheDirectory: cache, deviceName: "crashy")
    configuration.maximumBatchOperations = 3
    configuration.pollInterval = .milliseconds(20)
    let slow = SlowStore(base: try DirectoryStore(root: FilePath(store)))
    return try await Replica.open(configuration, store: slow, logger: Logger(label: "helper") { _ in SwiftLogNoOpLogHandler() })
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "race-put-if-absent":
    // STORE KEY VALUE START_FILE: waits for START_FILE, then tries to create KEY.
    // STORE is a directory or an s3:// URL (credentials from the environment).
    let store: any BlobStore =
        arguments[1].hasPrefix("s3://")
        ? try S3Store.open(url: arguments[1])
        : try DirectoryStore(root: FilePath(arguments[1]), create: false)
    waitForFile(arguments[4])
    do {
        try await store.putIfAbsent(try BlobKey(arguments[2]), data: Data(arguments[3].utf8))
        say("won")
    } catch StoreError.alreadyExists {
        say("lost")
    }

case "write-files":
    // STORE CACHE CONTAINER COUNT: writes file-0 ... with fsync (`sync`), saying "acked NAME" after
    // each, while the background loop uploads; also edits and renames some. Killed by tests.
    let replica = try await openReplica(store: arguments[1], cache: arguments[2], container: arguments[3])
    replica.start()
    for n in 0..<Int(arguments[4])! {
        let id = try replica.makeFile("file-\(n)", in: .root, mode: 0o644).id
        let file = try await replica.open(id, write: true, truncate: true)
        try replica.write(file, offset: 0, data: content(n))
        // As the FUSE layer does for fsync then close: acknowledged once the bytes are
        // durable; chunking and queuing follow in the background.
        try replica.sync(file)
        say("acked file-\(n)")
        replica.closeSoon(file)
    }
    _ = await replica.waitUntilUploaded(timeout: .seconds(60))
    say("uploaded")

case "drain":
    // STORE CACHE CONTAINER: reopens a device and pushes its whole queue.
    let replica = try await openReplica(store: arguments[1], cache: arguments[2], container: arguments[3])
    replica.start()
    guard await replica.waitUntilUploaded(timeout: .seconds(60)) else {
        say("not drained")
        exit(1)
    }
    await replica.stop()
    say("drained")

case "open-on-full-disk":
    // STORE CACHE CONTAINER BYTES: opens a new device (it starts from the store's snapshot)
    // with every file it writes limited to BYTES (RLIMIT_FSIZE: its cache disk fills up
    // during the snapshot's write), then says how opening ended. Tests time it out: a hang
    // here is a deadlock between the failed write's completion and the pull after it.
    signal(SIGXFSZ, SIG_IGN)
    var limit = rlimit(rlim_cur: rlim_t(arguments[4])!, rlim_max: rlim_t.max)
    setrlimit(__rlimit_resource_t(RLIMIT_FSIZE.rawValue), &limit)
    let configuration = ReplicaConfiguration(container: arguments[3], cacheDirectory: arguments[2], deviceName: "full")
    do {
        let replica = try await Replica.open(
            configuration, store: try DirectoryStore(root: FilePath(arguments[1])),
            logger: Logger(label: "helper") { _ in SwiftLogNoOpLogHandler() })
        // The failed write is reported a moment later (its completion hops off the writer's
        // queue): pulls then refuse, with the reason.
        for _ in 0..<100 {
            try await replica.pull()
            try await Task.sleep(for: .milliseconds(100))
        }
        say("opened and pulled")
    } catch {
        say("refused: \(error)")
    }

default:
    FileHandle.standardError.write(Data("icloudfs-testhelper: unknown command\n".utf8))
    exit(2)
}
