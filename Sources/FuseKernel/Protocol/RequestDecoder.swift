import CFuseKernel
import Glibc

/// Decodes what one `read` of `/dev/fuse` returned: `fuse_in_header`, then the body its
/// opcode names (linux/fuse.h). Pure: the unit tests feed it bytes.
public enum RequestDecoder {
    public static let headerSize = MemoryLayout<fuse_in_header>.size

    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(MalformedRequest) -> IncomingRequest {
        guard bytes.count >= headerSize else { throw MalformedRequest(opcode: 0, unique: 0) }
        let header = bytes.loadUnaligned(as: fuse_in_header.self)
        var body = Body(
            bytes: UnsafeRawBufferPointer(rebasing: bytes[headerSize..<min(bytes.count, Int(header.len))]),
            malformed: MalformedRequest(opcode: header.opcode, unique: header.unique))
        let node = header.nodeid
        let operation: Operation
        switch fuse_opcode(header.opcode) {
        case FUSE_LOOKUP: operation = .lookup(parent: node, name: try body.name())
        case FUSE_FORGET:
            let forget = try body.take(fuse_forget_in.self)
            operation = .forget([(node, forget.nlookup)])
        case FUSE_BATCH_FORGET:
            let batch = try body.take(fuse_batch_forget_in.self)
            var list: [(node: UInt64, count: UInt64)] = []
            list.reserveCapacity(Int(batch.count))
            for _ in 0..<batch.count {
                let one = try body.take(fuse_forget_one.self)
                list.append((one.nodeid, one.nlookup))
            }
            operation = .forget(list)
        case FUSE_GETATTR: operation = .getattr(node: node)
        case FUSE_SETATTR: operation = .setattr(node: node, try attributeChange(body.take(fuse_setattr_in.self)))
        case FUSE_READLINK: operation = .readlink(node: node)
        case FUSE_SYMLINK:
            // The new name first, then the target.
            let name = try body.name()
            operation = .symlink(parent: node, name: name, target: try body.name())
        case FUSE_MKNOD:
            let arguments = try body.take(fuse_mknod_in.self)
            operation = .mknod(
                parent: node, name: try body.name(), mode: arguments.mode, device: arguments.rdev, umask: arguments.umask)
        case FUSE_MKDIR:
            let arguments = try body.take(fuse_mkdir_in.self)
            operation = .mkdir(parent: node, name: try body.name(), mode: arguments.mode, umask: arguments.umask)
        case FUSE_UNLINK: operation = .unlink(parent: node, name: try body.name())
        case FUSE_RMDIR: operation = .rmdir(parent: node, name: try body.name())
        case FUSE_RENAME:
            let arguments = try body.take(fuse_rename_in.self)
            let name = try body.name()
            operation = .rename(parent: node, name: name, newParent: arguments.newdir, newName: try body.name(), flags: 0)
        case FUSE_RENAME2:
            let arguments = try body.take(fuse_rename2_in.self)
            let name = try body.name()
            operation = .rename(
                parent: node, name: name, newParent: arguments.newdir, newName: try body.name(), flags: arguments.flags)
        case FUSE_LINK:
            let arguments = try body.take(fuse_link_in.self)
            operation = .link(node: arguments.oldnodeid, newParent: node, newName: try body.name())
        case FUSE_OPEN:
            let arguments = try body.take(fuse_open_in.self)
            operation = .open(
                node: node, flags: Int32(bitPattern: arguments.flags),
                killsPrivileges: arguments.open_flags & UInt32(FUSE_OPEN_KILL_SUIDGID) != 0)
        case FUSE_CREATE:
            let arguments = try body.take(fuse_create_in.self)
            operation = .create(
                parent: node, name: try body.name(), mode: arguments.mode, umask: arguments.umask,
                flags: Int32(bitPattern: arguments.flags))
        case FUSE_TMPFILE:
            // The kernel sends the arguments of a create, and "/" as the name.
            let arguments = try body.take(fuse_create_in.self)
            operation = .tmpfile(
                parent: node, mode: arguments.mode, umask: arguments.umask, flags: Int32(bitPattern: arguments.flags))
        case FUSE_READ:
            let arguments = try body.take(fuse_read_in.self)
            operation = .read(node: node, handle: arguments.fh, offset: arguments.offset, size: Int(arguments.size))
        case FUSE_WRITE:
            let arguments = try body.take(fuse_write_in.self)
            operation = .write(
                node: node, handle: arguments.fh, offset: arguments.offset, bytes: try body.rest(Int(arguments.size)),
                killsPrivileges: arguments.write_flags & UInt32(FUSE_WRITE_KILL_SUIDGID) != 0)
        case FUSE_FLUSH: operation = .flush(node: node, handle: try body.take(fuse_flush_in.self).fh)
        case FUSE_RELEASE: operation = .release(node: node, handle: try body.take(fuse_release_in.self).fh)
        case FUSE_FSYNC: operation = .fsync(node: node, handle: try body.take(fuse_fsync_in.self).fh)
        case FUSE_OPENDIR: operation = .opendir(node: node, flags: Int32(bitPattern: try body.take(fuse_open_in.self).flags))
        case FUSE_READDIR, FUSE_READDIRPLUS:
            let arguments = try body.take(fuse_read_in.self)
            operation = .readdir(
                node: node, handle: arguments.fh, offset: arguments.offset, size: Int(arguments.size),
                plus: header.opcode == FUSE_READDIRPLUS.rawValue)
        case FUSE_RELEASEDIR: operation = .releasedir(node: node, handle: try body.take(fuse_release_in.self).fh)
        case FUSE_FSYNCDIR: operation = .fsyncdir(node: node, handle: try body.take(fuse_fsync_in.self).fh)
        case FUSE_STATFS: operation = .statfs(node: node)
        case FUSE_SETXATTR:
            // Without FUSE_SETXATTR_EXT (never asked for) the arguments are the short form.
            let size = try body.take(UInt32.self)
            let flags = try body.take(UInt32.self)
            let name = try body.name()
            operation = .setxattr(node: node, name: name, value: Array(try body.rest(Int(size))), flags: Int32(bitPattern: flags))
        case FUSE_GETXATTR:
            let arguments = try body.take(fuse_getxattr_in.self)
            operation = .getxattr(node: node, name: try body.name(), size: Int(arguments.size))
        case FUSE_LISTXATTR: operation = .listxattr(node: node, size: Int(try body.take(fuse_getxattr_in.self).size))
        case FUSE_REMOVEXATTR: operation = .removexattr(node: node, name: try body.name())
        case FUSE_LSEEK:
            let arguments = try body.take(fuse_lseek_in.self)
            operation = .lseek(
                node: node, handle: arguments.fh, offset: Int64(bitPattern: arguments.offset),
                whence: Int32(bitPattern: arguments.whence))
        case FUSE_FALLOCATE:
            let arguments = try body.take(fuse_fallocate_in.self)
            operation = .fallocate(
                node: node, handle: arguments.fh, mode: Int32(bitPattern: arguments.mode), offset: arguments.offset,
                length: arguments.length)
        case FUSE_COPY_FILE_RANGE:
            let arguments = try body.take(fuse_copy_file_range_in.self)
            operation = .copyFileRange(
                sourceNode: node, sourceHandle: arguments.fh_in, sourceOffset: arguments.off_in,
                targetNode: arguments.nodeid_out, targetHandle: arguments.fh_out, targetOffset: arguments.off_out,
                length: arguments.len)
        case FUSE_INIT:
            let arguments = try body.take(fuse_init_in.self)
            var flags = UInt64(arguments.flags)
            if arguments.flags & UInt32(FUSE_INIT_EXT) != 0 { flags |= UInt64(arguments.flags2) << 32 }
            operation = .initialize(
                KernelInit(major: arguments.major, minor: arguments.minor, maxReadahead: arguments.max_readahead, flags: flags))
        case FUSE_INTERRUPT: operation = .interrupt(unique: try body.take(fuse_interrupt_in.self).unique)
        case FUSE_DESTROY: operation = .destroy
        default: operation = .unsupported(opcode: header.opcode)
        }
        return IncomingRequest(
            unique: header.unique, opcode: header.opcode,
            caller: Caller(uid: header.uid, gid: header.gid, pid: pid_t(bitPattern: header.pid)), operation: operation)
    }

    private static func attributeChange(_ arguments: fuse_setattr_in) -> AttributeChange {
        var values = stat()
        values.st_mode = arguments.mode
        values.st_uid = arguments.uid
        values.st_gid = arguments.gid
        values.st_size = Int(Int64(bitPattern: arguments.size))
        values.st_atim = timespec(tv_sec: Int(Int64(bitPattern: arguments.atime)), tv_nsec: Int(arguments.atimensec))
        values.st_mtim = timespec(tv_sec: Int(Int64(bitPattern: arguments.mtime)), tv_nsec: Int(arguments.mtimensec))
        values.st_ctim = timespec(tv_sec: Int(Int64(bitPattern: arguments.ctime)), tv_nsec: Int(arguments.ctimensec))
        return AttributeChange(
            values: values, fields: arguments.valid & AttributeChange.acted,
            handle: arguments.valid & UInt32(FATTR_FH) != 0 ? arguments.fh : nil,
            killsPrivileges: arguments.valid & UInt32(FATTR_KILL_SUIDGID) != 0)
    }

    /// The body after the header, read front to back.
    private struct Body {
        var bytes: UnsafeRawBufferPointer
        let malformed: MalformedRequest

        mutating func take<Value>(_: Value.Type) throws(MalformedRequest) -> Value {
            let size = MemoryLayout<Value>.size
            guard bytes.count >= size else { throw malformed }
            defer { bytes = UnsafeRawBufferPointer(rebasing: bytes[size...]) }
            return bytes.loadUnaligned(as: Value.self)
        }

        /// A NUL-terminated name.
        mutating func name() throws(MalformedRequest) -> KernelName {
            guard let end = bytes.firstIndex(of: 0) else { throw malformed }
            defer { bytes = UnsafeRawBufferPointer(rebasing: bytes[(end + 1)...]) }
            return Array(bytes[..<end])
        }

        /// The next `count` bytes, not copied.
        mutating func rest(_ count: Int) throws(MalformedRequest) -> UnsafeRawBufferPointer {
            guard bytes.count >= count else { throw malformed }
            defer { bytes = UnsafeRawBufferPointer(rebasing: bytes[count...]) }
            return UnsafeRawBufferPointer(rebasing: bytes[..<count])
        }
    }
}
