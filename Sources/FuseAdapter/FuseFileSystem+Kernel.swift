import ContainerFormat
import Foundation
import FuseKernel

/// The kernel layer's side: the connection's settings, and each decoded request handed to
/// the method of the same name.
extension FuseFileSystem {
    public func connect(_ offered: KernelInit) -> ConnectionSettings {
        connected(offered)
        return Self.settings(offered, options)
    }

    /// Takes up what the kernel agreed to at `FUSE_INIT` (under `mount --all`, once per
    /// container, also for containers added later).
    func connected(_ offered: KernelInit) {
        // Reads of complete local copies served by the kernel itself (`PassthroughFiles`).
        // Its backing files need CAP_SYS_ADMIN: a mount by a user is refused the first and
        // serves reads itself from then on.
        let passthrough = Self.passthrough(offered, options)
        passthroughs.enable(
            passthrough,
            refusal: passthrough ? nil : options.passthrough ? "the kernel does not offer it" : "turned off (-o nopassthrough)")
    }

    private static func passthrough(_ offered: KernelInit, _ options: FuseMountOptions) -> Bool {
        Capabilities(rawValue: offered.flags).contains(.passthrough) && options.passthrough
    }

    /// The connection's settings for `options`, given what the kernel offers.
    static func settings(_ offered: KernelInit, _ options: FuseMountOptions) -> ConnectionSettings {
        var settings = ConnectionSettings()
        settings.capabilities = [
            .asyncRead, .bigWrites, .maxPages, .asyncDirectIO,
            // Parallel lookups and readdirs in one folder; replies are independent.
            .parallelDirectoryOperations,
            // O_TRUNC arrives with open, not as a separate setattr(size 0) before it: one
            // queued version per save, not an empty one first.
            .atomicTruncate,
            // Listings carry attributes: `ls -l` costs no lookup per name.
            .readdirPlus, .readdirPlusAuto,
            // File handles that outlive the kernel's cache and the mount (`lookup` of "."
            // and ".."): `open_by_handle_at`, and exports over NFS.
            .exportSupport,
        ]
        // POSIX ACLs: the kernel checks access by them and caches them, and no longer
        // applies the umask (a folder's default ACL replaces it: `FuseFileSystem.umask`).
        if options.acl { settings.capabilities.formUnion([.posixACL, .dontMask]) }
        if passthrough(offered, options) { settings.capabilities.insert(.passthrough) }
        // The kernel keeps the smaller of this and the device's read-ahead, which
        // `KernelReadAhead` raised as the mount was made (as root).
        settings.maxReadahead = UInt32(KernelReadAhead.kibibytes << 10)
        // Large requests: fewer round trips for sequential I/O.
        settings.maxWrite = 1 << 20
        // Set-id bits are cleared here on a write, truncation or chown, as the kernel says
        // (`Replica.dropSetIDBits`): without it the kernel asks for `security.capability` before
        // every write (a round trip each: passthrough writes too).
        settings.capabilities.insert(.handleKillPrivilegesV2)
        // Page cache invalidation is explicit (remote changes), not on every mtime change:
        // FUSE_AUTO_INVAL_DATA is not asked for.
        return settings
    }

    public func forget(_ node: UInt64, _ count: UInt64) {
        if inodes.forget(node, count) { passthroughs.forget(node) }
    }

    public func serve(_ request: Request, _ operation: FuseKernel.Operation) {
        switch operation {
        case .lookup(let parent, let name): lookup(request, parent, itemName(name))
        case .getattr(let node): getattr(request, node)
        case .setattr(let node, let change): setattr(request, node, change)
        case .readlink(let node): readlink(request, node)
        case .symlink(let parent, let name, let target): symlink(request, itemName(target), parent, itemName(name))
        case .mknod(let parent, let name, let mode, let device, let umask):
            mknod(request, parent, itemName(name), mode, UInt64(device), umask: umask)
        case .mkdir(let parent, let name, let mode, let umask): mkdir(request, parent, itemName(name), mode, umask: umask)
        case .unlink(let parent, let name): unlink(request, parent, itemName(name))
        case .rmdir(let parent, let name): rmdir(request, parent, itemName(name))
        case .rename(let parent, let name, let newParent, let newName, let flags):
            rename(request, parent, itemName(name), newParent, itemName(newName), flags)
        case .link(let node, let newParent, let newName): link(request, node, newParent, itemName(newName))
        case .open(let node, let flags, let killsPrivileges): open(request, node, flags, killsPrivileges: killsPrivileges)
        case .create(let parent, let name, let mode, let umask, let flags):
            create(request, parent, itemName(name), mode, umask: umask, flags)
        case .tmpfile(let parent, let mode, let umask, _):
            makeTemporaryFile(request, parent, mode, umask: umask)
        case .read(_, let handle, let offset, let size): read(request, handle, size, Int(offset))
        case .write(_, let handle, let offset, let bytes, let killsPrivileges):
            write(request, handle, bytes, Int(offset), killsPrivileges: killsPrivileges)
        // Not wanted: the kernel then sends no more (one round trip less per `close`; its
        // writes and their errors are the kernel's own with passthrough and the writeback
        // cache). The release queues the closed file.
        case .flush: request.error(ENOSYS)
        case .release(_, let handle): release(request, handle)
        case .fsync(_, let handle): fsync(request, handle)
        case .opendir(let node, _): opendir(request, node)
        case .readdir(let node, let handle, let offset, let size, let plus):
            readdir(request, node, handle, size, Int(offset), plus: plus)
        case .releasedir(_, let handle): releasedir(request, handle)
        case .fsyncdir: request.ok()  // every metadata change is already in the durable queue
        case .statfs: statfs(request)
        case .setxattr(let node, let name, let value, let flags):
            guard let name = NameBytes.utf8String(name) else { return request.error(EILSEQ) }
            setxattr(request, node, name, Data(value), flags)
        case .getxattr(let node, let name, let size):
            guard let name = NameBytes.utf8String(name) else { return request.error(ENODATA) }
            getxattr(request, node, name, size)
        case .listxattr(let node, let size): listxattr(request, node, size)
        case .removexattr(let node, let name):
            guard let name = NameBytes.utf8String(name) else { return request.error(ENODATA) }
            removexattr(request, node, name)
        case .lseek(_, let handle, let offset, let whence): lseek(request, handle, Int(offset), whence)
        case .fallocate(_, let handle, let mode, let offset, let length):
            fallocate(request, handle, mode, Int(offset), Int(length))
        case .copyFileRange(_, let sourceHandle, let sourceOffset, _, let targetHandle, let targetOffset, let length):
            copyFileRange(request, sourceHandle, Int(sourceOffset), targetHandle, Int(targetOffset), Int(length))
        case .forget, .initialize, .interrupt, .destroy, .unsupported:
            // The session's own (or not served): the kernel then stops asking or does the
            // work itself (locks, `access`).
            request.error(ENOSYS)
        }
    }
}

/// A name (or symlink target) from the kernel: its bytes, whatever they are, as the string
/// that stands for them (`NameBytes`; decoding them as UTF-8 would replace bytes that are not
/// with U+FFFD, and two different names would become one).
private func itemName(_ bytes: KernelName) -> String {
    NameBytes.string(bytes)
}
