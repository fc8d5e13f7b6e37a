import CFuse3
import Foundation

/// The libfuse callback table. Each callback copies its C arguments into Swift values and
/// calls the `FuseFileSystem` method of the same name. Defined in a library (nonisolated)
/// context: callbacks run on libfuse's worker threads.
enum FuseOperations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { _, connection in
            guard let connection else { return }
            // Large requests: fewer round trips for sequential I/O. Writes one page under
            // 1 MiB: libfuse splices a request into a pipe (its bytes never copied through
            // our memory) only if the pipe holds max_write plus a header page, and pipes
            // stop at 1 MiB (fs.pipe-max-size) without CAP_SYS_RESOURCE. At 1 MiB every
            // write was read() into a buffer, then copied again by pwrite.
            connection.pointee.max_write = (1 << 20) - 4096
            connection.pointee.max_readahead = 1 << 20
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
            fileSystem(req).lookup(Request(req!, "lookup"), parent, String(cString: name!))
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
        ops.mknod = { req, parent, name, mode, _ in
            fileSystem(req).mknod(Request(req!, "mknod"), parent, String(cString: name!), mode)
        }
        ops.mkdir = { req, parent, name, mode in
            fileSystem(req).mkdir(Request(req!, "mkdir"), parent, String(cString: name!), mode)
        }
        ops.unlink = { req, parent, name in
            fileSystem(req).unlink(Request(req!, "unlink"), parent, String(cString: name!))
        }
        ops.rmdir = { req, parent, name in
            fileSystem(req).rmdir(Request(req!, "rmdir"), parent, String(cString: name!))
        }
        ops.symlink = { req, target, parent, name in
            fileSystem(req).symlink(Request(req!, "symlink"), String(cString: target!), parent, String(cString: name!))
        }
        ops.rename = { req, parent, name, newParent, newName, flags in
            fileSystem(req).rename(
                Request(req!, "rename"), parent, String(cString: name!), newParent, String(cString: newName!), flags)
        }
        ops.link = { req, _, _, _ in
            fileSystem(req).link(Request(req!, "link"))
        }
        ops.open = { req, inode, info in
            fileSystem(req).open(Request(req!, "open"), inode, info!.pointee)
        }
        ops.create = { req, parent, name, mode, info in
            fileSystem(req).create(Request(req!, "create"), parent, String(cString: name!), mode, info!.pointee)
        }
        ops.read = { req, _, size, offset, info in
            fileSystem(req).read(Request(req!, "read"), info!.pointee.fh, size, Int(offset))
        }
        ops.write_buf = { req, _, source, offset, info in
            fileSystem(req).write(Request(req!, "write"), info!.pointee.fh, source!, Int(offset))
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
            let data = size == 0 ? Data() : Data(bytes: value!, count: size)
            fileSystem(req).setxattr(Request(req!, "setxattr"), inode, String(cString: name!), data, flags)
        }
        ops.getxattr = { req, inode, name, size in
            fileSystem(req).getxattr(Request(req!, "getxattr"), inode, String(cString: name!), size)
        }
        ops.listxattr = { req, inode, size in
            fileSystem(req).listxattr(Request(req!, "listxattr"), inode, size)
        }
        ops.removexattr = { req, inode, name in
            fileSystem(req).removexattr(Request(req!, "removexattr"), inode, String(cString: name!))
        }
        return ops
    }
}

/// The filesystem a request belongs to (the session's userdata). A free function: C
/// callbacks cannot capture anything, not even a type.
private func fileSystem(_ request: fuse_req_t?) -> FuseFileSystem {
    Unmanaged<FuseFileSystem>.fromOpaque(fuse_req_userdata(request)!).takeUnretainedValue()
}
