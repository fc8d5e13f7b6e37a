import CFuseKernel
import Glibc

/// The bytes of a name (or symlink target, or attribute name) as the kernel sent them,
/// without the NUL: names are bytes, not text, on Linux.
public typealias KernelName = [UInt8]

/// Who asked: from every request's header.
public struct Caller: Sendable, Equatable {
    public var uid: UInt32
    public var gid: UInt32
    /// 0 for the kernel's own requests (a forget, a read-ahead).
    public var pid: pid_t
}

/// What `setattr` changes: a `stat` carrying the new values and the `FATTR_*` bits saying
/// which of them to set.
public struct AttributeChange: Sendable {
    public var values: stat
    public var fields: UInt32
    /// The open file the change came through (`ftruncate`), if any.
    public var handle: UInt64?
    /// A truncation by a caller without CAP_FSETID: set-id bits go (with
    /// `Capabilities.handleKillPrivilegesV2`).
    public var killsPrivileges = false

    public static let mode = UInt32(FATTR_MODE)
    public static let uid = UInt32(FATTR_UID)
    public static let gid = UInt32(FATTR_GID)
    public static let size = UInt32(FATTR_SIZE)
    public static let atime = UInt32(FATTR_ATIME)
    public static let mtime = UInt32(FATTR_MTIME)
    public static let atimeNow = UInt32(FATTR_ATIME_NOW)
    public static let mtimeNow = UInt32(FATTR_MTIME_NOW)
    public static let ctime = UInt32(FATTR_CTIME)
    /// The fields `setattr` acts on; the others (handle, lock owner) only qualify them.
    static let acted = mode | uid | gid | size | atime | mtime | atimeNow | mtimeNow | ctime

    public func has(_ field: UInt32) -> Bool { fields & field != 0 }
}

/// One request from the kernel, decoded into typed values. Node ids are the kernel's names
/// for inodes (1 is the root); handles are what `open`, `create` and `opendir` answered.
public enum Operation {
    case lookup(parent: UInt64, name: KernelName)
    /// Lookups the kernel no longer holds (`FORGET` and `BATCH_FORGET`); never answered.
    case forget([(node: UInt64, count: UInt64)])
    case getattr(node: UInt64)
    case setattr(node: UInt64, AttributeChange)
    case readlink(node: UInt64)
    case symlink(parent: UInt64, name: KernelName, target: KernelName)
    case mknod(parent: UInt64, name: KernelName, mode: UInt32, device: UInt32, umask: UInt32)
    case mkdir(parent: UInt64, name: KernelName, mode: UInt32, umask: UInt32)
    case unlink(parent: UInt64, name: KernelName)
    case rmdir(parent: UInt64, name: KernelName)
    case rename(parent: UInt64, name: KernelName, newParent: UInt64, newName: KernelName, flags: UInt32)
    case link(node: UInt64, newParent: UInt64, newName: KernelName)
    /// `killsPrivileges`: an O_TRUNC open by a caller without CAP_FSETID (set-id bits go).
    case open(node: UInt64, flags: Int32, killsPrivileges: Bool)
    case create(parent: UInt64, name: KernelName, mode: UInt32, umask: UInt32, flags: Int32)
    /// `open(folder, O_TMPFILE)`: a file with no name, answered as `create` is.
    case tmpfile(parent: UInt64, mode: UInt32, umask: UInt32, flags: Int32)
    case read(node: UInt64, handle: UInt64, offset: UInt64, size: Int)
    /// The bytes are the receiving worker's buffer: valid only while the request is served
    /// (`KernelFileSystem.serve` returns).
    /// `killsPrivileges`: a write by a caller without CAP_FSETID (set-id bits go).
    case write(node: UInt64, handle: UInt64, offset: UInt64, bytes: UnsafeRawBufferPointer, killsPrivileges: Bool)
    case flush(node: UInt64, handle: UInt64)
    case release(node: UInt64, handle: UInt64)
    case fsync(node: UInt64, handle: UInt64)
    case opendir(node: UInt64, flags: Int32)
    case readdir(node: UInt64, handle: UInt64, offset: UInt64, size: Int, plus: Bool)
    case releasedir(node: UInt64, handle: UInt64)
    case fsyncdir(node: UInt64, handle: UInt64)
    case statfs(node: UInt64)
    case setxattr(node: UInt64, name: KernelName, value: [UInt8], flags: Int32)
    case getxattr(node: UInt64, name: KernelName, size: Int)
    case listxattr(node: UInt64, size: Int)
    case removexattr(node: UInt64, name: KernelName)
    case lseek(node: UInt64, handle: UInt64, offset: Int64, whence: Int32)
    case fallocate(node: UInt64, handle: UInt64, mode: Int32, offset: UInt64, length: UInt64)
    case copyFileRange(
        sourceNode: UInt64, sourceHandle: UInt64, sourceOffset: UInt64, targetNode: UInt64, targetHandle: UInt64,
        targetOffset: UInt64, length: UInt64)
    /// The session's own: the handshake, a caller giving up on a request, the end.
    case initialize(KernelInit)
    case interrupt(unique: UInt64)
    case destroy
    /// A request this filesystem does not serve (answered ENOSYS: the kernel then stops
    /// asking, or does the work itself, as for locks and `access`).
    case unsupported(opcode: UInt32)
}

/// What the kernel offers in `FUSE_INIT`.
public struct KernelInit: Sendable, Equatable {
    public var major: UInt32
    public var minor: UInt32
    public var maxReadahead: UInt32
    /// `flags`, and `flags2` as bits 32..63 when the kernel set `FUSE_INIT_EXT`.
    public var flags: UInt64
}

/// A request's header (`fuse_in_header`) and its decoded body.
public struct IncomingRequest {
    public var unique: UInt64
    public var opcode: UInt32
    public var caller: Caller
    public var operation: Operation
}

/// Why a request could not be decoded: the kernel sent fewer bytes than its kind needs.
public struct MalformedRequest: Error, Equatable {
    public var opcode: UInt32
    public var unique: UInt64
}
