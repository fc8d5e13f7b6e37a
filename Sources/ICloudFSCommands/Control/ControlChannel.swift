import ContainerFormat
import Foundation
import Replica
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How the commands talk to a mount's daemon, beyond the `user.icloud.*` attributes: a Unix
/// socket, `control.sock` in the cache folder (so only the cache's owner reaches it). A
/// command connects, sends one request line and reads answer lines until the daemon closes
/// the connection (or, following changes, until either side hangs up).
enum ControlChannel {
    static func socketPath(cache: String) -> String { "\(cache)/control.sock" }

    /// Runs `body` with the address of `control.sock` in `cache`, named through an open
    /// descriptor of the folder (`/proc/self/fd/N/control.sock`): a socket's path may not be
    /// longer than 107 bytes, and a cache folder's often is.
    static func withAddress<T>(cache: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) throws -> T {
        let folder = open(cache, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw ExitMessage("cannot open \(cache): \(String(cString: strerror(errno)))") }
        defer { close(folder) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array("/proc/self/fd/\(folder)/control.sock".utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    static func json(_ value: some Encodable) -> String { String(decoding: FormatCoding.encode(value), as: UTF8.self) }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) -> T? {
        try? FormatCoding.decode(type, from: Data(text.utf8))
    }

    /// What a command asks.
    enum Request: Equatable {
        /// The deleted items kept (at or below a path of the mount): one `result`.
        case deleted(under: String?)
        /// A collection of the container: `step`s, then a `result` or `failed`.
        case collect(dryRun: Bool)
        /// Remote changes as they arrive: a `change` each, for as long as the command listens.
        case changes
        /// The key-value store (`icloudfs kv`). Keys and values travel as JSON, so a key may
        /// hold any character. get: a `result` with the value, or `null`; list: a `result`
        /// with them all; set and remove: a `result` or `failed`; watch: a `change` per
        /// change other devices make, for as long as the command listens.
        case keyValueGet(String)
        case keyValueList
        case keyValueSet([String: KeyValue])
        case keyValueRemove([String])
        case keyValueWatch
        /// A metadata query: an `item` per item found (its JSON, or only its path as a JSON
        /// string), then a `result` with their count; live, then a `change` per item added,
        /// changed or removed, for as long as the command listens.
        case query(QueryRequest)
        /// The container at a glance (`ContainerSummary`, as the result).
        case summary
        /// Everything in the store (`icloudfs sync --wait`): a `result`, `true` once it is,
        /// `false` if the milliseconds given pass first.
        case uploaded(milliseconds: Int)

        /// One line: the request's name, and a tab and its argument where it has one.
        var line: String {
            switch self {
            case .deleted(let path): "deleted" + (path.map { "\t\($0)" } ?? "")
            case .collect(let dryRun): dryRun ? "collect\tdry" : "collect"
            case .changes: "changes"
            case .keyValueGet(let key): "kv-get\t" + ControlChannel.json(key)
            case .keyValueList: "kv-list"
            case .keyValueSet(let values): "kv-set\t" + ControlChannel.json(values)
            case .keyValueRemove(let keys): "kv-rm\t" + ControlChannel.json(keys)
            case .keyValueWatch: "kv-watch"
            case .query(let request): "query\t" + ControlChannel.json(request)
            case .summary: "summary"
            case .uploaded(let milliseconds): "uploaded\t\(milliseconds)"
            }
        }

        init?(line: String) {
            let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            switch parts[0] {
            case "deleted": self = .deleted(under: parts.count > 1 ? parts[1] : nil)
            case "collect" where parts.count == 1 || parts[1] == "dry": self = .collect(dryRun: parts.count > 1)
            case "changes" where parts.count == 1: self = .changes
            case "kv-list" where parts.count == 1: self = .keyValueList
            case "kv-watch" where parts.count == 1: self = .keyValueWatch
            case "summary" where parts.count == 1: self = .summary
            case "kv-get" where parts.count == 2:
                guard let key = ControlChannel.decode(String.self, parts[1]) else { return nil }
                self = .keyValueGet(key)
            case "kv-set" where parts.count == 2:
                guard let values = ControlChannel.decode([String: KeyValue].self, parts[1]) else { return nil }
                self = .keyValueSet(values)
            case "query" where parts.count == 2:
                guard let request = ControlChannel.decode(QueryRequest.self, parts[1]) else { return nil }
                self = .query(request)
            case "uploaded" where parts.count == 2:
                guard let milliseconds = Int(parts[1]), milliseconds >= 0 else { return nil }
                self = .uploaded(milliseconds: milliseconds)
            case "kv-rm" where parts.count == 2:
                guard let keys = ControlChannel.decode([String].self, parts[1]) else { return nil }
                self = .keyValueRemove(keys)
            default: return nil
            }
        }
    }

    /// One line of an answer: a kind, a space, and its text (JSON for `result` and `change`).
    enum Answer: Equatable {
        case result(Data)
        case step(String)
        case failed(String)
        case change(Data)
        /// One item of a query's result, as the request asked.
        case item(String)

        var line: String {
            switch self {
            case .result(let json): "result " + String(decoding: json, as: UTF8.self)
            case .step(let text): "step " + text.replacingOccurrences(of: "\n", with: " ")
            case .failed(let message): "failed " + message.replacingOccurrences(of: "\n", with: " ")
            case .change(let json): "change " + String(decoding: json, as: UTF8.self)
            case .item(let text): "item " + text
            }
        }

        init?(line: String) {
            guard let space = line.firstIndex(of: " ") else { return nil }
            let text = String(line[line.index(after: space)...])
            switch line[..<space] {
            case "result": self = .result(Data(text.utf8))
            case "step": self = .step(text)
            case "failed": self = .failed(text)
            case "change": self = .change(Data(text.utf8))
            case "item": self = .item(text)
            default: return nil
            }
        }
    }
}

/// One end of a connection: whole lines out, lines in. Writes never raise SIGPIPE.
final class ControlConnection: Sendable {
    private let descriptor: Int32
    /// Bytes read and not yet handed out as lines; whether a newline may be among them.
    private let buffer = Mutex((bytes: Data(), start: 0, mayHoldLine: false))

    init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { close(descriptor) }

    /// Sends `line` and a newline; false once the other end has gone. `wait: false` gives up
    /// rather than wait for a reader that does not read (the sync loop must never block).
    @discardableResult
    func send(_ line: String, wait: Bool = true) -> Bool {
        let bytes = Array((line + "\n").utf8)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | (wait ? 0 : Int32(MSG_DONTWAIT)))
            }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }

    /// The next line, without its newline; nil at the end (or on an error). Lines are at
    /// most 1 GiB (a listing of a million deleted items is about 200 MB).
    func receive() -> String? {
        while true {
            if let line = takeLine() { return line }
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            let full = buffer.withLock { buffer in
                buffer.bytes.append(contentsOf: chunk[..<count])
                // Searched again only once a newline came: a long line is not scanned per chunk.
                if chunk[..<count].contains(UInt8(ascii: "\n")) { buffer.mayHoldLine = true }
                return buffer.bytes.count - (buffer.start - buffer.bytes.startIndex) > 1 << 30
            }
            if full { return nil }
        }
    }

    private func takeLine() -> String? {
        buffer.withLock { buffer -> String? in
            guard buffer.mayHoldLine else { return nil }
            let start = buffer.start - buffer.bytes.startIndex
            let found = buffer.bytes.withUnsafeBytes { raw -> (line: String, end: Int)? in
                let rest = UnsafeRawBufferPointer(rebasing: raw[start...])
                guard let base = rest.baseAddress, let hit = memchr(base, 0x0A, rest.count) else { return nil }
                let length = base.distance(to: UnsafeRawPointer(hit))
                return (String(decoding: UnsafeRawBufferPointer(start: base, count: length), as: UTF8.self), start + length)
            }
            guard let (line, end) = found else {
                buffer.mayHoldLine = false
                return nil
            }
            let newline = buffer.bytes.startIndex + end
            // Lines are taken from the front without moving the rest each time (a query's
            // 100,000 lines would be quadratic); what was taken is dropped now and then.
            buffer.start = newline + 1
            if buffer.start - buffer.bytes.startIndex > 1 << 20 {
                buffer.bytes.removeSubrange(buffer.bytes.startIndex..<buffer.start)
                buffer.start = buffer.bytes.startIndex
            }
            return line
        }
    }

    /// No more lines either way: a reader of this connection sees its end.
    func hangUp() { shutdown(descriptor, Int32(SHUT_RDWR)) }
}

/// What `icloudfs query` asks: the query, whether to follow it, and whether each item comes
/// whole (`details`) or as its path only.
struct QueryRequest: Codable, Equatable {
    var query: MetadataQuery
    var live = false
    var details = false
}

/// One update of a live query: an item that now meets it, changed, or no longer does.
struct QueryChange: Codable, Equatable {
    enum Kind: String, Codable { case added, changed, removed }
    var change: Kind
    var item: MetadataItem
}
