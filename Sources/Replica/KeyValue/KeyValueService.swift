import BlobStore
import ContainerFormat
import Foundation
import Logging
import Synchronization
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A container's key-value store on this device (docs/SEMANTICS.md "The key-value store"):
/// the merged values and the writes not yet in the store, kept in `kv.json` in the cache
/// folder; a loop of its own appends those writes to the store (`kv/SEQ`) and applies what
/// other devices appended, every poll interval or as soon as a local write or the store says
/// so. It shares nothing with the replica but the store and the device's identity.
public final class KeyValueService: Sendable {
    /// Why values changed, as `NSUbiquitousKeyValueStore` names it.
    public enum Reason: String, Codable, Sendable {
        /// Another device's write arrived.
        case serverChange = "ServerChange"
        /// The first values this device received.
        case initialSyncChange = "InitialSyncChange"
        /// Merged writes of several devices went over the limits (each device kept to them).
        case quotaViolationChange = "QuotaViolationChange"
    }

    /// What `watch` reports: why, and which keys changed value.
    public struct Change: Codable, Sendable, Equatable {
        public var reason: Reason
        public var keys: [String]
    }

    public enum Failure: Error, Sendable {
        /// A write outside `KeyValueLimits`: refused, nothing recorded.
        case refused(String)
        /// The write could not be recorded in the cache folder.
        case localFailure(String)

        public var message: String {
            switch self {
            case .refused(let why), .localFailure(let why): why
            }
        }
    }

    /// What `kv.json` holds.
    private struct Saved: Codable {
        var format = 1
        var table = KeyValueTable()
        /// The last record of the store applied here.
        var seen: UInt64 = 0
        /// Local writes not yet in the store, oldest first.
        var queued: [KeyValueRecord] = []
        var initialSyncDone = false
    }

    private let container: ContainerStore
    private let device: String
    private let deviceID: String
    private let path: String
    private let pollInterval: Duration
    private let offline: Bool
    private let logger: Logger
    private let saved: Mutex<Saved>
    /// The watchers, and the initial sync's change while no watcher has seen it: a watcher
    /// started just after the mount (whose first sync ran at once) still learns what came.
    private let watchers = Mutex((next: 0, all: [Int: @Sendable (Change) -> Void](), unseenInitialSync: Change?.none))
    private let loop = BackgroundLoop()
    /// Sync failures: logged once until one succeeds.
    private let failures = FailureStreak()

    public init(
        container: ContainerStore, device: String, deviceID: String, cacheDirectory: String,
        pollInterval: Duration, offline: Bool, logger: Logger
    ) {
        self.container = container
        self.device = device
        self.deviceID = deviceID
        path = "\(cacheDirectory)/kv.json"
        self.pollInterval = pollInterval
        self.offline = offline
        self.logger = logger
        var loaded = Saved()
        if let data = FileManager.default.contents(atPath: path) {
            do {
                loaded = try FormatCoding.decode(Saved.self, from: data)
            } catch {
                // What the store has comes back at the next sync; only unsent writes are lost.
                let aside = path + ".unreadable"
                _ = rename(path, aside)
                logger.error("\(path) is unreadable (\(error)); moved to \(aside), values come again from the store")
            }
        }
        saved = Mutex(loaded)
    }

    // MARK: Reading and writing

    public func value(of key: String) -> KeyValue? { saved.withLock { $0.table.value(of: key) } }

    public var values: [String: KeyValue] { saved.withLock { $0.table.values } }

    /// Writes not yet in the store.
    public var queuedCount: Int { saved.withLock { $0.queued.count } }

    /// Sets and removes keys at once (all or none), if the store stays within its limits.
    public func write(set values: [String: KeyValue], remove keys: [String] = []) throws(Failure) {
        for key in Array(values.keys) + keys {
            if let problem = KeyValueLimits.problem(withKey: key) { throw .refused(problem) }
        }
        try saved.withLock { saved throws(Failure) in
            for key in keys where saved.table.value(of: key) == nil {
                throw .refused("no key \(key.debugDescription) in the key-value store")
            }
            var after = saved.table.values.merging(values) { $1 }
            for key in keys { after[key] = nil }
            if let problem = KeyValueLimits.problem(withStore: after) { throw .refused(problem) }
            // Later than every write this device has seen, whatever its clock did meanwhile:
            // a write always replaces the values it was made over.
            var time = Timestamp.now()
            if let latest = saved.table.entries.values.map(\.time).max(), latest >= time {
                time = latest.nanoseconds < 999_999_999
                    ? Timestamp(seconds: latest.seconds, nanoseconds: latest.nanoseconds + 1)
                    : Timestamp(clamping: latest.seconds + 1, nanoseconds: 0)
            }
            let record = KeyValueRecord(device: device, deviceID: deviceID, time: time, set: values, removed: keys)
            var next = saved
            next.table.apply(record)
            next.queued.append(record)
            try save(next)
            saved = next
        }
        loop.wakeup.signal()
    }

    /// Calls `body` with each change that other devices make, until `stopWatching`.
    public func watch(_ body: @escaping @Sendable (Change) -> Void) -> Int {
        let (number, initial) = watchers.withLock { watchers in
            watchers.next += 1
            watchers.all[watchers.next] = body
            defer { watchers.unseenInitialSync = nil }
            return (watchers.next, watchers.unseenInitialSync)
        }
        if let initial { body(initial) }
        return number
    }

    public func stopWatching(_ number: Int) {
        _ = watchers.withLock { $0.all.removeValue(forKey: number) }
    }

    // MARK: Lifecycle

    public func start() {
        guard !offline else { return }
        loop.start(notifiedBy: container.store, under: container.keyValuePrefix) { [self] in
            while !Task.isCancelled {
                await sync()
                await loop.wakeup.wait(upTo: pollInterval)
            }
        }
    }

    /// Ends the loop; writes not yet sent stay in `kv.json` for the next mount.
    public func stop() async { await loop.stop() }

    // MARK: Sync

    /// Applies the store's new records, then appends the queued writes.
    func sync() async {
        do {
            try await pull()
            while let record = saved.withLock({ $0.queued.first }) {
                let seq = saved.withLock { $0.seen } + 1
                do {
                    try await container.store.putIfAbsent(container.keyValueKey(seq), data: FormatCoding.encode(record))
                } catch StoreError.alreadyExists {
                    try await pull()  // another device's record took the number
                    continue
                }
                try saved.withLock { saved throws(Failure) in
                    var next = saved
                    next.seen = max(next.seen, seq)
                    next.queued.removeFirst()
                    try save(next)
                    saved = next
                }
            }
            if failures.succeeded() { logger.notice("key-value store in sync again") }
        } catch {
            let message = (error as? StoreError)?.message ?? (error as? Failure)?.message ?? "\(error)"
            if failures.failed() { logger.warning("cannot sync the key-value store: \(message); retried every poll") }
        }
    }

    /// Applies the records other devices appended since the last one seen, in order.
    private func pull() async throws {
        let seen = saved.withLock { $0.seen }
        let after = seen > 0 ? container.keyValueKey(seen) : nil
        let objects = try await container.store.listAll(prefix: container.keyValuePrefix, after: after)
        var records: [(seq: UInt64, record: KeyValueRecord?)] = []
        for object in objects {
            guard let seq = container.keyValueSeq(of: object.key), seq > seen else { continue }
            let data = try await container.store.get(object.key, maximumSize: KeyValueRecord.maximumSize)
            do {
                records.append((seq, try KeyValueRecord.decode(data)))
            } catch {
                logger.error("key-value record \(object.key.rawValue) is unreadable (\(error)); skipped")
                records.append((seq, nil))
            }
        }
        let (changed, initial) = try saved.withLock { saved throws(Failure) -> (Set<String>, Bool) in
            let initial = !saved.initialSyncDone
            guard !records.isEmpty || initial else { return ([], false) }
            var next = saved
            var changed = Set<String>()
            for (seq, record) in records where seq > next.seen {
                next.seen = seq
                guard let record else { continue }
                let keys = next.table.apply(record)
                if record.deviceID != deviceID { changed.formUnion(keys) }
            }
            next.initialSyncDone = true
            try save(next)
            saved = next
            return (changed, initial)
        }
        guard !changed.isEmpty else { return }
        let keys = changed.sorted()
        notify(Change(reason: initial ? .initialSyncChange : .serverChange, keys: keys))
        if KeyValueLimits.problem(withStore: values) != nil {
            notify(Change(reason: .quotaViolationChange, keys: keys))
        }
    }

    private func notify(_ change: Change) {
        let all = watchers.withLock { watchers in
            if watchers.all.isEmpty, change.reason == .initialSyncChange { watchers.unseenInitialSync = change }
            return Array(watchers.all.values)
        }
        for watcher in all { watcher(change) }
    }

    /// Writes `state` to `kv.json` whole.
    private func save(_ state: Saved) throws(Failure) {
        do {
            try FileIO.replaceFile(FilePath(path), with: FormatCoding.encode(state))
        } catch {
            throw .localFailure("cannot record the key-value store in \(path): \(error)")
        }
    }
}
