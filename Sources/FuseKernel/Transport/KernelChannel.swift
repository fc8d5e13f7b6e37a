import CFuseKernel
import Glibc
import SystemPackage

/// The one seam between the protocol and its transport: requests in, replies and
/// notifications out, and the passthrough backing files. Today `/dev/fuse` (a ring could
/// take its place: the session sees only this).
public final class KernelChannel: Sendable {
    /// The `/dev/fuse` descriptor of this mount; closed by `close()`.
    public let descriptor: Int32

    public init(descriptor: Int32) {
        self.descriptor = descriptor
    }

    public enum Received {
        case request(Int)
        /// The request was interrupted before we read it, or a signal came: read again.
        case again
        /// The mount is gone: the session ends.
        case ended
    }

    /// Reads one request into `buffer` (which must hold the largest write plus its header).
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> Received {
        let count = read(descriptor, buffer.baseAddress, buffer.count)
        if count > 0 { return .request(count) }
        switch errno {
        case EINTR, EAGAIN, ENOENT: return .again
        default: return .ended  // ENODEV: unmounted
        }
    }

    /// Writes one reply or notification, all its pieces in one `writev` (the kernel takes
    /// a message only whole). Returns 0 or the errno: ENOENT when the caller gave up on the
    /// request (it was interrupted), which is no error of ours.
    @discardableResult
    public func send(_ pieces: UnsafeBufferPointer<iovec>) -> Int32 {
        while true {
            if writev(descriptor, pieces.baseAddress, Int32(pieces.count)) >= 0 { return 0 }
            if errno != EINTR { return errno }
        }
    }

    /// Registers `file` as the backing file of passthrough opens; its id, or the errno
    /// (EPERM without CAP_SYS_ADMIN).
    public func openBacking(_ file: Int32) -> Result<Int32, Errno> {
        let id = icloudfs_fuse_backing_open(descriptor, file)
        return id > 0 ? .success(id) : .failure(Errno(rawValue: errno))
    }

    public func closeBacking(_ id: Int32) {
        _ = icloudfs_fuse_backing_close(descriptor, UInt32(bitPattern: id))
    }

    public func close() {
        _ = Glibc.close(descriptor)
    }
}
