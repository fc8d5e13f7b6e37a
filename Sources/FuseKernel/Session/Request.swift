import CFuseKernel
import Glibc
import SystemPackage
import Logging
import Synchronization

/// One kernel request, answered exactly once through this type. A request dropped without
/// an answer gets `EIO` and a log line, so no kernel caller ever hangs; a second answer is
/// dropped with a log line.
public final class Request: Sendable {
    private let channel: KernelChannel
    private let unique: UInt64
    private let answered = Atomic<Bool>(false)
    public let caller: Caller
    /// The request's kind, for log lines ("lookup", "read").
    public let operation: String

    init(channel: KernelChannel, unique: UInt64, opcode: UInt32, caller: Caller) {
        self.channel = channel
        self.unique = unique
        self.caller = caller
        operation = OpcodeNames.name(of: opcode)
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            KernelLog.logger.error("\(operation) was not answered; replying EIO")
            send(error: EIO, [])
        }
    }

    private func claim() -> Bool {
        let (exchanged, _) = answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
        if !exchanged { KernelLog.logger.error("\(operation) answered twice; the second answer is dropped") }
        return exchanged
    }

    /// Whether the calling process has `gid` among its supplementary groups (from
    /// /proc/PID/task/PID/status, as the kernel does not send them).
    public func callerBelongs(to gid: UInt32) -> Bool {
        SupplementaryGroups.of(caller.pid).contains(gid)
    }

    public func error(_ code: Int32) {
        guard claim() else { return }
        send(error: code, [])
    }

    public func ok() { error(0) }

    /// Answers with `body`'s bytes (a `fuse_*_out` structure).
    public func reply<Body>(_ body: Body) {
        guard claim() else { return }
        withUnsafeBytes(of: body) { send(error: 0, [$0]) }
    }

    /// Answers with two structures back to back (`create`: entry, then open).
    public func reply<First, Second>(_ first: First, _ second: Second) {
        guard claim() else { return }
        withUnsafeBytes(of: first) { first in withUnsafeBytes(of: second) { send(error: 0, [first, $0]) } }
    }

    /// Answers with `bytes` as they are (a read, a link target, an attribute's value).
    public func reply(bytes: UnsafeRawBufferPointer) {
        guard claim() else { return }
        send(error: 0, [bytes])
    }

    public func reply(_ directory: DirectoryBuffer) {
        guard claim() else { return }
        directory.withBytes { send(error: 0, [$0]) }
    }

    /// Answers a read with up to `count` bytes of `file` at `offset` (fewer at its end).
    public func reply(file: Int32, offset: UInt64, count: Int) {
        guard claim() else { return }
        ReadBuffers.shared.with(count) { buffer in answerRead(into: buffer, file: file, offset: offset, count: count) }
    }

    private func answerRead(into buffer: UnsafeMutableRawBufferPointer, file: Int32, offset: UInt64, count: Int) {
        var done = 0
        while done < count {
            let got = pread(file, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            if got > 0 {
                done += got
            } else if got == 0 {
                break
            } else if errno != EINTR {
                return send(error: errno, [])
            }
        }
        send(error: 0, [UnsafeRawBufferPointer(rebasing: buffer[..<done])])
    }

    private func send(error: Int32, _ pieces: [UnsafeRawBufferPointer]) {
        var header = fuse_out_header()
        header.len = UInt32(MemoryLayout<fuse_out_header>.size + pieces.reduce(0) { $0 + $1.count })
        header.error = -error
        header.unique = unique
        withUnsafeBytes(of: header) { header in
            var vectors = [iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count)]
            for piece in pieces where piece.count > 0 {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: piece.baseAddress), iov_len: piece.count))
            }
            vectors.withUnsafeBufferPointer { vectors in
                let failure = channel.send(vectors)
                if failure != 0 && failure != ENOENT {
                    KernelLog.logger.error("\(operation): the kernel refused the answer: \(Errno(rawValue: failure))")
                }
            }
        }
    }
}

/// Buffers for read replies, kept for the next read: a new 1 MiB buffer per read costs an
/// `mmap`, page faults and a `munmap` (glibc maps blocks that large on their own).
final class ReadBuffers: Sendable {
    static let shared = ReadBuffers()
    static let size = 1 << 20
    /// Enough for every worker and a few reads waiting on downloads at once.
    static let kept = 24

    private struct Buffer: @unchecked Sendable {
        // SAFETY: a buffer belongs to one caller at a time: taken from the list, given back.
        let bytes: UnsafeMutableRawBufferPointer
    }

    private let free = Mutex<[Buffer]>([])

    /// Runs `body` with a buffer of at least `count` bytes.
    func with(_ count: Int, _ body: (UnsafeMutableRawBufferPointer) -> Void) {
        guard count <= Self.size else {
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 4096)
            defer { buffer.deallocate() }
            return body(buffer)
        }
        let buffer =
            free.withLock { $0.popLast() }
            ?? Buffer(bytes: UnsafeMutableRawBufferPointer.allocate(byteCount: Self.size, alignment: 4096))
        body(buffer.bytes)
        let kept = free.withLock { free in
            guard free.count < Self.kept else { return false }
            free.append(buffer)
            return true
        }
        if !kept { buffer.bytes.deallocate() }
    }
}

/// The supplementary groups of a process, as the kernel lists them in its status file.
enum SupplementaryGroups {
    static func of(_ pid: pid_t) -> [UInt32] {
        guard pid > 0 else { return [] }
        let fd = open("/proc/\(pid)/task/\(pid)/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return [] }
        let text = String(decoding: bytes[..<count], as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return [] }
        return line.dropFirst("Groups:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).compactMap { UInt32($0) }
    }
}

/// The kernel layer's logger.
public enum KernelLog {
    static let shared = Mutex(Logger(label: "icloudfs.kernel"))
    public static var logger: Logger { shared.withLock { $0 } }
}

/// Names of opcodes, for log lines.
enum OpcodeNames {
    static func name(of opcode: UInt32) -> String {
        switch fuse_opcode(opcode) {
        case FUSE_LOOKUP: "lookup"
        case FUSE_GETATTR: "getattr"
        case FUSE_SETATTR: "setattr"
        case FUSE_READLINK: "readlink"
        case FUSE_SYMLINK: "symlink"
        case FUSE_MKNOD: "mknod"
        case FUSE_MKDIR: "mkdir"
        case FUSE_UNLINK: "unlink"
        case FUSE_RMDIR: "rmdir"
        case FUSE_RENAME, FUSE_RENAME2: "rename"
        case FUSE_LINK: "link"
        case FUSE_OPEN: "open"
        case FUSE_READ: "read"
        case FUSE_WRITE: "write"
        case FUSE_STATFS: "statfs"
        case FUSE_RELEASE: "release"
        case FUSE_FSYNC: "fsync"
        case FUSE_SETXATTR: "setxattr"
        case FUSE_GETXATTR: "getxattr"
        case FUSE_LISTXATTR: "listxattr"
        case FUSE_REMOVEXATTR: "removexattr"
        case FUSE_FLUSH: "flush"
        case FUSE_INIT: "init"
        case FUSE_OPENDIR: "opendir"
        case FUSE_READDIR: "readdir"
        case FUSE_READDIRPLUS: "readdirplus"
        case FUSE_RELEASEDIR: "releasedir"
        case FUSE_FSYNCDIR: "fsyncdir"
        case FUSE_CREATE: "create"
        case FUSE_LSEEK: "lseek"
        case FUSE_FALLOCATE: "fallocate"
        case FUSE_COPY_FILE_RANGE: "copy_file_range"
        default: "opcode \(opcode)"
        }
    }
}
