import ContainerFormat
import Foundation
import Replica
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The daemon's end of the control channel (`ControlChannel`): accepts connections on a
/// thread of its own and answers each on another (requests are few: one per command run).
final class ControlServer: Sendable {
    private let replica: Replica
    private let keyValues: KeyValueService
    private let path: String
    private let listener: Int32

    /// Listens at `path` (a stale socket left by a killed daemon is replaced: the cache lock
    /// says this daemon owns the cache).
    init(replica: Replica, keyValues: KeyValueService, cache: String) throws {
        self.replica = replica
        self.keyValues = keyValues
        path = ControlChannel.socketPath(cache: cache)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ExitMessage("cannot make the control socket: \(String(cString: strerror(errno)))") }
        unlink(path)
        let bound = try ControlChannel.withAddress(cache: cache) { bind(fd, $0, $1) }
        guard bound == 0, chmod(path, 0o600) == 0, listen(fd, 16) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ExitMessage("cannot listen at \(path): \(reason)")
        }
        listener = fd
    }

    func start() {
        let thread = Thread { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return  // closed by `stop`
                }
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                let connection = ControlConnection(descriptor: fd)
                Thread { [self] in serve(connection) }.start()
            }
        }
        thread.start()
    }

    /// Ends listening (at unmount); connections being answered finish on their own.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    private func serve(_ connection: ControlConnection) {
        guard let line = connection.receive(), let request = ControlChannel.Request(line: line) else {
            connection.send(ControlChannel.Answer.failed("not a request this mount knows (is icloudfs the same version?)").line)
            return
        }
        switch request {
        case .deleted(let path):
            let json = FormatCoding.encode(replica.deletedItems(under: path))
            connection.send(ControlChannel.Answer.result(json).line)
        case .collect(let dryRun):
            let finished = DispatchSemaphore(value: 0)
            let started = replica.startCollection(
                dryRun: dryRun, progress: { connection.send(ControlChannel.Answer.step($0).line) }
            ) { result in
                switch result {
                case .success(let result): connection.send(ControlChannel.Answer.result(FormatCoding.encode(result)).line)
                case .failure(let error): connection.send(ControlChannel.Answer.failed("\(error)").line)
                }
                finished.signal()
            }
            guard started else {
                connection.send(ControlChannel.Answer.failed("a collection is running on this mount already").line)
                return
            }
            finished.wait()
        case .changes:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let number = replica.followChanges { events in
                for event in events {
                    guard let json = try? encoder.encode(event) else { continue }
                    // A follower that does not read is dropped, never waited for.
                    if !connection.send(ControlChannel.Answer.change(json).line, wait: false) {
                        connection.hangUp()
                        return
                    }
                }
            }
            // Until the command hangs up (it sends nothing more).
            while connection.receive() != nil {}
            replica.stopFollowingChanges(number)
        case .keyValueGet(let key):
            let value = keyValues.value(of: key)
            connection.send(ControlChannel.Answer.result(value.map { FormatCoding.encode($0) } ?? Data("null".utf8)).line)
        case .keyValueList:
            connection.send(ControlChannel.Answer.result(FormatCoding.encode(keyValues.values)).line)
        case .keyValueSet(let values):
            answer(connection) { () throws(KeyValueService.Failure) in try keyValues.write(set: values) }
        case .keyValueRemove(let keys):
            answer(connection) { () throws(KeyValueService.Failure) in try keyValues.write(set: [:], remove: keys) }
        case .query(let request):
            let found = replica.query(request.query)
            // One send for them all: a line per item, written by hand (see `jsonLine`).
            if !found.isEmpty {
                let lines = found.map { ControlChannel.Answer.item(request.details ? $0.jsonLine : MetadataItem.quoted($0.path)).line }
                connection.send(lines.joined(separator: "\n"))
            }
            connection.send(ControlChannel.Answer.result(Data("{\"count\":\(found.count)}".utf8)).line)
            guard request.live else { return }
            follow(request.query, from: found, on: connection)
        case .summary:
            connection.send(ControlChannel.Answer.result(FormatCoding.encode(replica.summary())).line)
        case .uploaded(let milliseconds):
            // This thread is the request's own: it waits for the replica's answer.
            let answered = DispatchSemaphore(value: 0)
            let uploaded = Mutex(false)
            Task { [replica] in
                let done = await replica.waitUntilContainerUploaded(timeout: .milliseconds(milliseconds))
                uploaded.withLock { $0 = done }
                answered.signal()
            }
            answered.wait()
            connection.send(ControlChannel.Answer.result(Data((uploaded.withLock { $0 } ? "true" : "false").utf8)).line)
        case .keyValueWatch:
            let number = keyValues.watch { change in
                if !connection.send(ControlChannel.Answer.change(FormatCoding.encode(change)).line, wait: false) {
                    connection.hangUp()
                }
            }
            while connection.receive() != nil {}
            keyValues.stopWatching(number)
        }
    }

    /// A live query's updates: the query is answered again when remote changes arrive, and
    /// every `liveQueryInterval` for changes of sync state (downloads, uploads) that no
    /// remote change announces; each item added, changed or removed since goes out as a
    /// `change`. Until the command hangs up.
    private func follow(_ query: MetadataQuery, from first: [MetadataItem], on connection: ControlConnection) {
        let wake = DispatchSemaphore(value: 0)
        let ended = Mutex(false)
        let number = replica.followChanges { _ in wake.signal() }
        defer { replica.stopFollowingChanges(number) }
        Thread {
            while connection.receive() != nil {}
            ended.withLock { $0 = true }
            wake.signal()
        }.start()
        var previous = Dictionary(first.map { ($0.id, $0) }) { $1 }
        var interval = ControlServer.liveQueryInterval
        while !ended.withLock({ $0 }) {
            _ = wake.wait(timeout: .now() + interval)
            let started = Date()
            let current = Dictionary(replica.query(query).map { ($0.id, $0) }) { $1 }
            // A large container's query takes a while: at most a fifth of the time in it.
            interval = max(ControlServer.liveQueryInterval, Date().timeIntervalSince(started) * 5)
            var changes: [QueryChange] = []
            for (id, item) in current where previous[id] != item {
                changes.append(QueryChange(change: previous[id] == nil ? .added : .changed, item: item))
            }
            for (id, item) in previous where current[id] == nil {
                changes.append(QueryChange(change: .removed, item: item))
            }
            previous = current
            for change in changes.sorted(by: { $0.item.path.precedesInBytes($1.item.path) }) {
                guard connection.send(ControlChannel.Answer.change(FormatCoding.encode(change)).line, wait: false) else {
                    connection.hangUp()
                    return
                }
            }
        }
    }

    /// Seconds between looks for changes of sync state.
    static let liveQueryInterval = 0.25

    /// Answers a key-value write: an empty `result`, or `failed` with why.
    private func answer(_ connection: ControlConnection, _ write: () throws(KeyValueService.Failure) -> Void) {
        do {
            try write()
            connection.send(ControlChannel.Answer.result(Data("{}".utf8)).line)
        } catch {
            connection.send(ControlChannel.Answer.failed(error.message).line)
        }
    }
}
