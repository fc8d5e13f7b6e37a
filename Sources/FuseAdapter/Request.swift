import CFuse3
import ContainerFormat
import Foundation
import Logging
import Replica
import Synchronization

/// One kernel request, answered exactly once through this type (the only place that calls
/// `fuse_reply_*`). A request that is dropped without an answer gets `EIO` and a log line,
/// so no kernel caller ever hangs.
final class Request: @unchecked Sendable {
    // SAFETY: `fuse_req_t` may be answered from any thread, once; `answered` guards that.
    private let raw: fuse_req_t
    private let answered = Atomic<Bool>(false)
    let operation: StaticString

    init(_ raw: fuse_req_t, _ operation: StaticString) {
        self.raw = raw
        self.operation = operation
    }

    deinit {
        if !answered.load(ordering: .acquiring) {
            FuseLog.logger.error("\(operation) was not answered; replying EIO")
            fuse_reply_err(raw, EIO)
        }
    }

    private func claim() -> Bool {
        let (exchanged, _) = answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
        if !exchanged { FuseLog.logger.error("\(operation) answered twice; the second answer is dropped") }
        return exchanged
    }

    var context: fuse_ctx { fuse_req_ctx(raw).pointee }

    /// The calling process's user and group.
    var caller: Owner {
        let context = context
        return Owner(uid: context.uid, gid: context.gid)
    }

    /// The calling process's id (0 for the kernel's own requests).
    var callerPID: pid_t { context.pid }

    /// The calling process's umask.
    var umask: UInt32 { context.umask }

    /// Whether the calling process has `gid` among its supplementary groups.
    func callerBelongs(to gid: UInt32) -> Bool {
        var groups = [gid_t](repeating: 0, count: 256)
        let count = fuse_req_getgroups(raw, Int32(groups.count), &groups)
        return count > 0 && groups.prefix(Int(min(count, Int32(groups.count)))).contains(gid)
    }

    func error(_ code: Int32) {
        guard claim() else { return }
        fuse_reply_err(raw, code)
    }

    func error(_ error: any Error) {
        self.error(FuseErrno.code(for: error, in: operation))
    }

    func ok() { error(0) }

    func entry(_ entry: fuse_entry_param) {
        guard claim() else { return }
        var entry = entry
        fuse_reply_entry(raw, &entry)
    }

    func create(_ entry: fuse_entry_param, _ info: fuse_file_info) {
        guard claim() else { return }
        var entry = entry
        var info = info
        fuse_reply_create(raw, &entry, &info)
    }

    func attributes(_ attributes: stat, timeout: Double) {
        guard claim() else { return }
        var attributes = attributes
        fuse_reply_attr(raw, &attributes, timeout)
    }

    func readlink(_ target: String) {
        guard claim() else { return }
        withNameBytes(target) { bytes, _ in _ = fuse_reply_readlink(raw, bytes) }
    }

    func open(_ info: fuse_file_info) {
        guard claim() else { return }
        var info = info
        fuse_reply_open(raw, &info)
    }

    func seeked(to offset: UInt64) {
        guard claim() else { return }
        fuse_reply_lseek(raw, off_t(offset))
    }

    func written(_ count: Int) {
        guard claim() else { return }
        fuse_reply_write(raw, count)
    }

    func buffer(_ data: Data) {
        guard claim() else { return }
        data.withUnsafeBytes { bytes in
            _ = fuse_reply_buf(raw, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
    }

    /// Answers a read with bytes of a file: libfuse splices them from the file to the
    /// kernel when it can, so they are never copied through this process.
    func data(_ bytes: CachedBytes) {
        guard claim() else { return }
        var vector = fuse_bufvec()
        vector.count = 1
        vector.buf.size = bytes.count
        vector.buf.flags = fuse_buf_flags(rawValue: FUSE_BUF_IS_FD.rawValue | FUSE_BUF_FD_SEEK.rawValue)
        vector.buf.fd = bytes.fd
        vector.buf.pos = off_t(bytes.offset)
        _ = fuse_reply_data(raw, &vector, FUSE_BUF_SPLICE_MOVE)
    }

    func buffer(_ bytes: UnsafeRawBufferPointer) {
        guard claim() else { return }
        _ = fuse_reply_buf(raw, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
    }

    func xattrSize(_ size: Int) {
        guard claim() else { return }
        fuse_reply_xattr(raw, size)
    }

    func statfs(_ info: statvfs) {
        guard claim() else { return }
        var info = info
        fuse_reply_statfs(raw, &info)
    }

    /// Fills a directory listing buffer (`fuse_add_direntry_plus` needs the request).
    func addDirectoryEntryPlus(
        _ buffer: UnsafeMutablePointer<CChar>, _ remaining: Int, _ name: String,
        _ entry: inout fuse_entry_param, _ nextOffset: Int
    ) -> Int {
        withNameBytes(name) { bytes, _ in fuse_add_direntry_plus(raw, buffer, remaining, bytes, &entry, off_t(nextOffset)) }
    }

    func addDirectoryEntry(
        _ buffer: UnsafeMutablePointer<CChar>, _ remaining: Int, _ name: String, _ attributes: inout stat,
        _ nextOffset: Int
    ) -> Int {
        withNameBytes(name) { bytes, _ in fuse_add_direntry(raw, buffer, remaining, bytes, &attributes, off_t(nextOffset)) }
    }
}

/// Runs `body` with the bytes `name` stands for (`NameBytes`), NUL-terminated, and their count.
func withNameBytes<Result>(_ name: String, _ body: (UnsafePointer<CChar>, Int) -> Result) -> Result {
    var bytes = NameBytes.bytes(name)
    let count = bytes.count
    bytes.append(0)
    return bytes.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress!, count) }
    }
}

/// The adapter's logger (the C callbacks have no other way to reach one).
enum FuseLog {
    static let shared = Mutex(Logger(label: "icloudfs.fuse"))
    static var logger: Logger { shared.withLock { $0 } }
}
