import CFuse3
import ContainerFormat
import Foundation

/// The libfuse callback table. Each callback copies its C arguments into Swift values and
/// calls the `FuseFileSystem` method of the same name. Defined in a library (nonisolated)
/// context: callbacks run on libfuse's worker threads.
enum FuseOperations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, connection in
            guard let connection else { return }
            // POSIX ACLs: the kernel checks access by them and caches them, and no longer
            // applies the umask (a folder's default ACL replaces it: `FuseFileSystem.umask`).
            let acl = Unmanaged<FuseFileSystem>.fromOpaque(userdata!).takeUnretainedValue().options.acl
            if acl, connection.pointee.capable & UInt32(FUSE_CAP_POSIX_ACL) != 0 {
                connection.pointee.want |= UInt32(FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK)
            }
            // Large requests: fewer round trips for sequential I/O. Writes one page under
            // 1 MiB: libfuse splices a request into a pipe (its bytes never copied through
            // our memory) only if the pipe holds max_write plus a header page, and pipes
            // stop at 1 MiB (fs.pipe-max-size) without CAP_SYS_RESOURCE. At 1 MiB every
            // write was read() into a buffer, then copied again by pwrite.
            connection.pointee.max_write = (1 << 20) - 4096
            // The kernel keeps the smaller of this and the device's read-ahead, which
            // `KernelReadAhead` raised as the mount was made (as root).
            connection.pointee.max_readahead = UInt32(KernelReadAhead.kibibytes << 10)
            connection.pointee.max_read = UInt32(FuseMountOptions.maximumRead)
            // Parallel lookups and readdirs in one folder; replies are independent.
            if connection.pointee.capable & UInt32(FUSE_CAP_PARALLEL_DIROPS) != 0 {
                connection.pointee.want |= UInt32(FUSE_CAP_PARALLEL_DIROPS)
            }
            // O_TRUNC arrives with open, not as a separate setattr(size 0) before it: one
            // queued version per save, not an empty one first.
            if connection.pointee.capable & UInt32(FUSE_CAP_ATOMIC_O_TRUNC) != 0 {
                connection.pointee.want |= UInt32(FUSE_CAP_ATOMIC_O_TRUNC)
            }
            // Reads are answered by splicing from the cache file, writes spliced into it.
            for capability in [FUSE_CAP_SPLICE_WRITE, FUSE_CAP_SPLICE_MOVE, FUSE_CAP_SPLICE_READ]
            where connection.pointee.capable & UInt32(capability) != 0 {
                connection.pointee.want |= UInt32(capability)
            }
            // Page cache invalidation is explicit (remote changes), not on every mtime change.
            connection.pointee.want &= ~UInt32(FUSE_CAP_AUTO_INVAL_DATA)
        }
        ops.lookup = { req, parent, name in
            let name = itemName(name)
            fileSystem(req).lookup(Request(req!, "lookup"), parent, name)
        }
        ops.forget = { req, inode, count in
            fileSystem(req).forget(inode, count)
            fuse_reply_none(req)
        }
        ops.forget_multi = { req, count, list in
            let fs = fileSystem(req)
            for index in 0..<count {
                fs.forget(list![index].ino, list![index].nlookup)
            }
            fuse_reply_none(req)
        }
        ops.getattr = { req, inode, _ in
            fileSystem(req).getattr(Request(req!, "getattr"), inode)
        }
        ops.setattr = { req, inode, attributes, toSet, _ in
            fileSystem(req).setattr(Request(req!, "setattr"), inode, attributes!.pointee, toSet)
        }
        ops.readlink = { req, inode in
            fileSystem(req).readlink(Request(req!, "readlink"), inode)
        }
        ops.mknod = { req, parent, name, mode, device in
            let name = itemName(name)
            fileSystem(req).mknod(Request(req!, "mknod"), parent, name, mode, UInt64(device))
        }
        ops.mkdir = { req, parent, name, mode in
            let name = itemName(name)
            fileSystem(req).mkdir(Request(req!, "mkdir"), parent, name, mode)
        }
        ops.unlink = { req, parent, name in
            let name = itemName(name)
            fileSystem(req).unlink(Request(req!, "unlink"), parent, name)
        }
        ops.rmdir = { req, parent, name in
            let name = itemName(name)
            fileSystem(req).rmdir(Request(req!, "rmdir"), parent, name)
        }
        ops.symlink = { req, target, parent, name in
            let (target, name) = (itemName(target), itemName(name))
            fileSystem(req).symlink(Request(req!, "symlink"), target, parent, name)
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            let (name, newName) = (itemName(name), itemName(newName))
            fileSystem(req).rename(Request(req!, "rename"), parent, name, newParent, newName, flags)
        }
        ops.link = { req, inode, newParent, newName in
            let newName = itemName(newName)
            fileSystem(req).link(Request(req!, "link"), inode, newParent, newName)
        }
        ops.open = { req, inode, info in
            fileSystem(req).open(Request(req!, "open"), inode, info!.pointee)
        }
        ops.create = { req, parent, name, mode, info in
            let name = itemName(name)
            fileSystem(req).create(Request(req!, "create"), parent, name, mode, info!.pointee)
        }
        ops.read = { req, _, size, offset, info in
            fileSystem(req).read(Request(req!, "read"), info!.pointee.fh, size, Int(offset))
        }
        ops.write_buf = { req, _, source, offset, info in
            fileSystem(req).write(Request(req!, "write"), info!.pointee.fh, source!, Int(offset))
        }
        ops.copy_file_range = { req, _, offsetIn, infoIn, _, offsetOut, infoOut, length, _ in
            fileSystem(req).copyFileRange(
                Request(req!, "copy_file_range"), infoIn!.pointee.fh, Int(offsetIn), infoOut!.pointee.fh, Int(offsetOut),
                length)
        }
        ops.lseek = { req, _, offset, whence, info in
            fileSystem(req).lseek(Request(req!, "lseek"), info!.pointee.fh, Int(offset), whence)
        }
        ops.fallocate = { req, _, mode, offset, length, info in
            fileSystem(req).fallocate(Request(req!, "fallocate"), info!.pointee.fh, mode, Int(offset), Int(length))
        }
        ops.flush = { req, _, info in
            fileSystem(req).flush(Request(req!, "flush"), info!.pointee.fh)
        }
        ops.release = { req, _, info in
            fileSystem(req).release(Request(req!, "release"), info!.pointee.fh)
        }
        ops.fsync = { req, _, _, info in
            fileSystem(req).fsync(Request(req!, "fsync"), info!.pointee.fh)
        }
        ops.opendir = { req, inode, info in
            fileSystem(req).opendir(Request(req!, "opendir"), inode, info!.pointee)
        }
        ops.readdir = { req, inode, size, offset, info in
            fileSystem(req).readdir(Request(req!, "readdir"), inode, info!.pointee.fh, size, Int(offset), plus: false)
        }
        ops.readdirplus = { req, inode, size, offset, info in
            fileSystem(req).readdir(Request(req!, "readdirplus"), inode, info!.pointee.fh, size, Int(offset), plus: true)
        }
        ops.releasedir = { req, _, info in
            fileSystem(req).releasedir(Request(req!, "releasedir"), info!.pointee.fh)
        }
        ops.fsyncdir = { req, _, _, _ in
            fuse_reply_err(req, 0)  // every metadata change is already in the durable queue
        }
        ops.statfs = { req, _ in
            fileSystem(req).statfs(Request(req!, "statfs"))
        }
        ops.setxattr = { req, inode, name, value, size, flags in
            guard let name = utf8(name, req, orAnswer: EILSEQ) else { return }
            let data = size == 0 ? Data() : Data(bytes: value!, count: size)
            fileSystem(req).setxattr(Request(req!, "setxattr"), inode, name, data, flags)
        }
        ops.getxattr = { req, inode, name, size in
            guard let name = utf8(name, req, orAnswer: ENODATA) else { return }
            fileSystem(req).getxattr(Request(req!, "getxattr"), inode, name, size)
        }
        ops.listxattr = { req, inode, size in
            fileSystem(req).listxattr(Request(req!, "listxattr"), inode, size)
        }
        ops.removexattr = { req, inode, name in
            guard let name = utf8(name, req, orAnswer: ENODATA) else { return }
            fileSystem(req).removexattr(Request(req!, "removexattr"), inode, name)
        }
        return ops
    }
}

/// A name (or symlink target) from the kernel: its bytes, whatever they are, as the string
/// that stands for them (`NameBytes`; decoding them as UTF-8 would replace bytes that are not
/// with U+FFFD, and two different names would become one).
private func itemName(_ raw: UnsafePointer<CChar>?) -> String {
    guard let raw else { return "" }
    return NameBytes.string(UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
}

/// An extended attribute's name as a `String`, or nil after answering `errno` (ENODATA for
/// one that cannot exist, EILSEQ for one that would be made): attribute names are UTF-8.
private func utf8(_ raw: UnsafePointer<CChar>?, _ request: fuse_req_t?, orAnswer errno: Int32) -> String? {
    if let raw, let string = String(validatingCString: raw) { return string }
    fuse_reply_err(request, errno)
    return nil
}

/// The filesystem a request belongs to (the session's userdata). A free function: C
/// callbacks cannot capture anything, not even a type.
private func fileSystem(_ request: fuse_req_t?) -> FuseFileSystem {
    Unmanaged<FuseFileSystem>.fromOpaque(fuse_req_userdata(request)!).takeUnretainedValue()
}
