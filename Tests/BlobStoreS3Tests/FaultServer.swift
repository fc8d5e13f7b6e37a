import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers from a script, one entry per request,
/// so that tests can make an S3 endpoint fail exactly as they want: a status with a body,
/// or a connection dropped after the request arrived (its answer is lost).
final class FaultServer: Sendable {
    enum Answer: Sendable {
        case status(Int, body: String = "", headers: [String: String] = [:])
        /// Reads the whole request, then closes the connection without answering.
        case drop
    }

    struct Received: Sendable {
        var method: String
        var target: String
        var headers: [String: String]
        var body: Data
    }

    let port: UInt16
    private let listener: Int32
    private let script: Mutex<[Answer]>
    private let log = Mutex<[Received]>([])
    /// Open connections (nil once stopped): `stop` ends them too. A client pools connections
    /// by host and port; one left open would be reused by a later test whose server got the
    /// same port, and answered from this server's exhausted script.
    private let connections = Mutex<Set<Int32>?>([])

    var received: [Received] { log.withLock { $0 } }
    var endpoint: String { "http://127.0.0.1:\(port)" }

    init(_ answers: [Answer]) throws {
        script = Mutex(answers)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = UInt16(bigEndian: address.sin_port)
        listener = fd
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// A port on which nothing listens (bound, then closed at once).
    static func closedPort() throws -> UInt16 {
        let server = try FaultServer([])
        server.stop()
        return server.port
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        // Under the lock: a connection still in the set is not closed yet (no reused fd).
        connections.withLock { connections in
            for connection in connections ?? [] { shutdown(connection, Int32(SHUT_RDWR)) }
            connections = nil
        }
    }

    private func acceptLoop() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            let accepted = connections.withLock { $0?.insert(connection) != nil }
            guard accepted else {
                close(connection)
                return
            }
            let thread = Thread { [self] in serve(connection) }
            thread.start()
        }
    }

    private func serve(_ connection: Int32) {
        defer {
            _ = connections.withLock { $0?.remove(connection) }
            close(connection)
        }
        var buffer = Data()
        while let request = readRequest(connection, &buffer) {
            log.withLock { $0.append(request) }
            let answer = script.withLock { $0.isEmpty ? Answer.status(500, body: "script exhausted") : $0.removeFirst() }
            switch answer {
            case .drop:
                return
            case .status(let code, let body, let headers):
                var head = "HTTP/1.1 \(code) Scripted\r\nContent-Length: \(body.utf8.count)\r\n"
                for (name, value) in headers { head += "\(name): \(value)\r\n" }
                let bytes = Data((head + "\r\n").utf8) + (request.method == "HEAD" ? Data() : Data(body.utf8))
                _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    private func readRequest(_ connection: Int32, _ buffer: inout Data) -> Received? {
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil {
            guard receive(connection, &buffer) else { return nil }
        }
        let headEnd = buffer.range(of: separator)!
        let lines = String(decoding: buffer[..<headEnd.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        var rest = Data(buffer[headEnd.upperBound...])
        while rest.count < length {
            guard receive(connection, &rest) else { return nil }
        }
        buffer = Data(rest[(rest.startIndex + length)...])
        return Received(
            method: String(requestLine[0]), target: requestLine.count > 1 ? String(requestLine[1]) : "",
            headers: headers, body: Data(rest.prefix(length)))
    }

    private func receive(_ connection: Int32, _ buffer: inout Data) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(connection, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }
}
