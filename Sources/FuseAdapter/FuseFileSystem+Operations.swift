import ContainerFormat
import Foundation
import FuseKernel
import Replica

/// One method per FUSE operation: copy the arguments, call the replica, answer.
extension FuseFileSystem {
    func lookup(_ request: Request, _ parent: UInt64, _ name: String) {
        answer(request) {
            // File handles (`open_by_handle_at`, NFS): the kernel finds a node it no longer
            // holds by looking up "." in it, and its folder by "..". Node ids are
            // `NodeNumbers`', stable across mounts and never reused.
            if name == "." || name == ".." {
                let item = try id(parent)
                return request.entry(try namedEntry(of: name == "." || item == .root ? item : try replica.parent(of: item)))
            }
            guard NameBytes.count(name) <= ItemName.maximumBytes else { return request.error(ENAMETOOLONG) }
            let attributes = try replica.lookup(name, in: try id(parent))
            request.entry(entry(attributes, parent: parent, name: name))
        }
    }

    /// The root's entry under `name` in the folder `parent` (`mount --all`'s top folder),
    /// counted as one lookup.
    func rootEntry(parent: UInt64, name: String) throws(ReplicaError) -> Entry {
        entry(try replica.attributes(of: .root), parent: parent, name: name)
    }

    /// The root's entry, not yet counted (`countLookup` once the kernel has it).
    func uncountedRootEntry() throws(ReplicaError) -> Entry {
        uncountedEntry(try replica.attributes(of: .root))
    }

    func countLookup(_ entry: Entry, parent: UInt64, name: String) {
        inodes.remember(entry.node, parent: parent, name: name)
    }

    /// The entry of `item` under its own name in its own folder, counted as one lookup.
    private func namedEntry(of item: ItemID) throws(ReplicaError) -> Entry {
        let attributes = try replica.attributes(of: item)
        guard item != .root else { return entry(attributes, parent: rootNode, name: ".") }
        return entry(attributes, parent: node(try replica.parent(of: item)), name: try replica.name(of: item))
    }

    func getattr(_ request: Request, _ inode: UInt64) {
        answer(request) {
            request.attributes(stat(of: try replica.attributes(of: try id(inode)), node: inode), timeout: attributeTimeout)
        }
    }

    /// Sizes may need a download first (on a task); modes, times and owners are answered on
    /// the worker's thread (tar and cp -a set them on every file).
    func setattr(_ request: Request, _ inode: UInt64, _ change: AttributeChange) {
        guard change.has(AttributeChange.size) else {
            return answer(request) { try setOtherAttributes(request, inode, change) }
        }
        answerLater(request) { [self] in
            _ = try await replica.truncate(try id(inode), to: UInt64(max(0, change.values.st_size)))
            try setOtherAttributes(request, inode, change)
        }
    }

    private func setOtherAttributes(_ request: Request, _ inode: UInt64, _ change: AttributeChange) throws {
        let item = try id(inode)
        if change.killsPrivileges { try replica.dropSetIDBits(item) }
        let new = change.values
        var mode: UInt32?
        var mtime: Timestamp?
        if change.has(AttributeChange.mode) { mode = new.st_mode & 0o7777 }
        if change.has(AttributeChange.mtimeNow) {
            mtime = Timestamp.now()
        } else if change.has(AttributeChange.mtime) {
            mtime = Timestamp(clamping: Int64(new.st_mtim.tv_sec), nanoseconds: UInt32(clamping: new.st_mtim.tv_nsec))
        }
        var atime: Timestamp?
        if change.has(AttributeChange.atimeNow) {
            atime = Timestamp.now()
        } else if change.has(AttributeChange.atime) {
            atime = Timestamp(clamping: Int64(new.st_atim.tv_sec), nanoseconds: UInt32(clamping: new.st_atim.tv_nsec))
        }
        // The attributes after a chown, if nothing after it changes them (no second look).
        var givenAway: ItemAttributes?
        if change.has(AttributeChange.uid | AttributeChange.gid) {
            // Read before the replica's lock is held (a file of /proc); only a caller other
            // than root setting a group needs it.
            let callerBelongs =
                request.caller.uid != 0 && change.has(AttributeChange.gid) && request.callerBelongs(to: new.st_gid)
            // One hold: the check, the new owner, and (as Linux) the set-id bits a file
            // given away loses.
            givenAway = try replica.giveAway(item) { [self] current throws(ReplicaError) in
                let shown = shownOwner(of: current)
                let wanted = Owner(
                    uid: change.has(AttributeChange.uid) ? new.st_uid : shown.uid,
                    gid: change.has(AttributeChange.gid) ? new.st_gid : shown.gid)
                guard mayChangeOwner(from: shown, to: wanted, request.caller, callerBelongs: callerBelongs) else {
                    throw .notPermitted("only root gives an item away, and an owner only to its own groups")
                }
                // With uid= or gid= given, the stored value of that one stays as it was.
                return Owner(
                    uid: options.uid == nil ? wanted.uid : current.owner.uid,
                    gid: options.gid == nil ? wanted.gid : current.owner.gid)
            }
        }
        // A setattr of nothing is the kernel moving only the change time (`chown(f, -1, -1)`
        // on Linux; it sends the time itself only with a writeback cache).
        let ctime =
            change.has(AttributeChange.ctime)
            ? Timestamp(clamping: Int64(new.st_ctim.tv_sec), nanoseconds: UInt32(clamping: new.st_ctim.tv_nsec))
            : change.fields == 0 ? Timestamp.now() : nil
        let attributes =
            mode != nil || mtime != nil || atime != nil || ctime != nil
            ? try replica.setAttributes(item, mode: mode, mtime: mtime, atime: atime, ctime: ctime)
            : try givenAway ?? replica.attributes(of: item)
        // Setting times looks at the local copy first (`Replica.setAttributes`).
        let refreshed = mtime != nil || ctime != nil
        request.attributes(stat(of: attributes, node: inode, refreshed: refreshed), timeout: attributeTimeout)
    }

    /// `chown`'s rules (the kernel applies them too with `default_permissions`): root
    /// changes anything; an item's owner may keep its user and set the group to one it
    /// belongs to (`callerBelongs`: to the group asked for, among its supplementary groups).
    private func mayChangeOwner(from shown: Owner, to wanted: Owner, _ caller: Caller, callerBelongs: Bool) -> Bool {
        if caller.uid == 0 { return true }
        guard caller.uid == shown.uid, wanted.uid == shown.uid else { return false }
        return wanted.gid == shown.gid || wanted.gid == caller.gid || callerBelongs
    }

    func readlink(_ request: Request, _ inode: UInt64) {
        answer(request) { request.reply(bytes: NameBytes.bytes(try replica.readLink(try id(inode)))) }
    }

    func mkdir(_ request: Request, _ parent: UInt64, _ name: String, _ mode: UInt32, umask given: UInt32) {
        answer(request) {
            let attributes = try replica.makeFolder(
                name, in: try id(parent), mode: mode & 0o7777, owner: request.owner, umask: umask(given))
            request.entry(entry(attributes, parent: parent, name: name))
        }
    }

    /// Regular files, and special files as metadata (the kernel checked who may make a
    /// device; it serves FIFOs, sockets and devices itself, so their I/O never comes here).
    func mknod(_ request: Request, _ parent: UInt64, _ name: String, _ mode: UInt32, _ device: UInt64, umask given: UInt32) {
        let kind: ItemKind
        switch mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFIFO: kind = .fifo
        case S_IFSOCK: kind = .socket
        case S_IFCHR: kind = .characterDevice
        case S_IFBLK: kind = .blockDevice
        default: return request.error(EINVAL)
        }
        answer(request) {
            let folder = try id(parent)
            let attributes =
                kind == .file
                ? try replica.makeFile(name, in: folder, mode: mode & 0o7777, owner: request.owner, umask: umask(given))
                : try replica.makeSpecial(
                    name, in: folder, kind: kind, mode: mode & 0o7777, device: device, owner: request.owner,
                    umask: umask(given))
            request.entry(entry(attributes, parent: parent, name: name))
        }
    }

    /// The caller's umask when the kernel left it to us (`-o acl`), else nil.
    private func umask(_ given: UInt32) -> UInt32? {
        options.acl ? given : nil
    }

    func symlink(_ request: Request, _ target: String, _ parent: UInt64, _ name: String) {
        answer(request) {
            let attributes = try replica.makeSymlink(name, in: try id(parent), target: target, owner: request.owner)
            request.entry(entry(attributes, parent: parent, name: name))
        }
    }

    func unlink(_ request: Request, _ parent: UInt64, _ name: String) {
        answer(request) {
            try replica.remove(name, in: try id(parent))
            request.ok()
        }
    }

    func rmdir(_ request: Request, _ parent: UInt64, _ name: String) {
        answer(request) {
            try replica.removeFolder(name, in: try id(parent))
            request.ok()
        }
    }

    func rename(
        _ request: Request, _ parent: UInt64, _ name: String, _ newParent: UInt64, _ newName: String,
        _ flags: UInt32
    ) {
        // RENAME_WHITEOUT (overlayfs) would leave a whiteout device in the source's place; it
        // is refused, so callers know, rather than ignored.
        guard flags & ~(FuseFileSystem.renameNoReplace | FuseFileSystem.renameExchange) == 0 else {
            return request.error(EINVAL)
        }
        if flags & FuseFileSystem.renameExchange != 0 {
            return answer(request) {
                try replica.exchange(name, in: try id(parent), with: newName, in: try id(newParent))
                request.ok()
            }
        }
        answer(request) {
            try replica.rename(
                name, in: try id(parent), to: newName, in: try id(newParent),
                noReplace: flags & FuseFileSystem.renameNoReplace != 0)
            request.ok()
        }
    }

    func link(_ request: Request, _ inode: UInt64, _ newParent: UInt64, _ newName: String) {
        answer(request) {
            let attributes = try replica.makeLink(to: try id(inode), named: newName, in: try id(newParent))
            request.entry(entry(attributes, parent: newParent, name: newName))
        }
    }

    // Operations that need no download are answered on libfuse's thread: a small file's
    // create, write, flush and release cost no hop to a task.
    func create(_ request: Request, _ parent: UInt64, _ name: String, _ mode: UInt32, umask given: UInt32, _ flags: Int32) {
        let creator = request.caller.pid
        // Likely small (the process has been making small files): kept in memory, written
        // through us, no cache file (docs/ARCHITECTURE.md, "The path of a small file").
        if bursts.withLock({ $0.expectsSmall(creator, at: .now) }), replica.takesFilesInMemory {
            return answer(request) {
                // Answered as soon as the create is decided, under the replica's lock: nothing
                // here may call the replica (`NewFileAnswer`).
                _ = try replica.makeFileInMemory(
                    name, in: try id(parent), mode: mode & 0o7777, owner: request.owner, umask: umask(given)
                ) { [self] attributes, file in
                    let created = entry(attributes, parent: parent, name: name, fresh: true)
                    let mode = passthroughs.open(node(attributes.id), file: -1, wanted: false)
                    let handle = files.insert(
                        OpenHandle(file: file, node: node(attributes.id), mode: mode, creator: creator, madeInMemory: true))
                    request.created(created, openReply(handle, mode))
                }
            }
        }
        answer(request) {
            let (attributes, file) = try replica.makeFileForWriting(
                name, in: try id(parent), mode: mode & 0o7777, owner: request.owner, umask: umask(given))
            // Worked out before the kernel may write: a written file's attributes are read
            // from its local copy, which is empty yet (no second open and fstat of it).
            let created = entry(attributes, parent: parent, name: name)
            // A new file: its writes are the kernel's (passthrough), all of it is new anyway.
            let mode = passthroughs.open(node(attributes.id), file: file.descriptor, wanted: true)
            try startOutsideWrites(file, node(attributes.id), mode, created: true)
            let handle = files.insert(OpenHandle(file: file, node: node(attributes.id), mode: mode, creator: creator))
            request.created(created, openReply(handle, mode))
        }
    }

    /// `O_TMPFILE`: a file with no name until `link` gives it one (`linkat`).
    func makeTemporaryFile(_ request: Request, _ parent: UInt64, _ mode: UInt32, umask given: UInt32) {
        answer(request) {
            let file = try replica.makeAnonymousFile(
                in: try id(parent), mode: mode & 0o7777, owner: request.owner, umask: umask(given))
            var attributes = try replica.attributes(of: file.id)
            // The kernel takes one link away from what it is told (`d_tmpfile`): 0 shows.
            attributes.linkCount = 1
            let created = entry(attributes, parent: parent, name: "")
            let mode = passthroughs.open(node(attributes.id), file: file.descriptor, wanted: true)
            try startOutsideWrites(file, node(attributes.id), mode, created: true)
            let handle = files.insert(OpenHandle(file: file, node: node(attributes.id), mode: mode))
            request.created(created, openReply(handle, mode))
        }
    }

    func open(_ request: Request, _ inode: UInt64, _ flags: Int32, killsPrivileges: Bool) {
        let access = flags & O_ACCMODE
        let writable = access == O_WRONLY || access == O_RDWR
        let truncate = flags & O_TRUNC != 0 && writable
        if flags & O_TRUNC != 0 && !writable {
            // Linux truncates on O_TRUNC whatever the access mode (the kernel checked the
            // permission to write).
            return answerLater(request) { [self] in
                let id = try id(inode)
                _ = try await replica.truncate(id, to: 0)
                if killsPrivileges { try replica.dropSetIDBits(id) }
                reply(request, opening: try await replica.open(id, write: false, truncate: false), flags, inode: inode)
            }
        }
        // A thumbnailer or indexer reading a placeholder would download it (`-o nohydrate`).
        if !writable, let id = try? id(inode), replica.completeCopySize(of: id) == nil,
            hydration.refuses(request.caller.pid)
        {
            return request.error(EPERM)
        }
        guard replica.needsDownloadToOpen(write: writable, truncate: truncate) else {
            return answer(request) {
                let id = try id(inode)
                let file = try replica.openWithoutDownload(id, write: writable, truncate: truncate)
                if killsPrivileges { try replica.dropSetIDBits(id) }
                if kernel.contentChangedRecently(inode) { kernel.invalidateInodeAndWait(inode) }
                reply(request, opening: file, flags, inode: inode)
            }
        }
        answerLater(request) { [self] in
            let id = try id(inode)
            let file = try await replica.open(id, write: writable, truncate: truncate)
            if killsPrivileges { try replica.dropSetIDBits(id) }
            if kernel.contentChangedRecently(inode) { await kernel.invalidateInode(inode) }
            reply(request, opening: file, flags, inode: inode)
        }
    }

    private func reply(_ request: Request, opening file: OpenFile, _ flags: Int32, inode: UInt64) {
        if flags & O_ACCMODE != O_WRONLY { noteRead(file.id, inode: inode, isFolder: false) }
        // Reads of a complete local copy are the kernel's own (passthrough): no request per
        // read, one page cache. So are writes that replace or extend a file (O_TRUNC,
        // O_APPEND up to a size a commit chunks whole in a moment): the replica takes the copy
        // as it is at each commit. Other writes go through the daemon, which records what
        // changed for incremental chunking; unless the file is in passthrough mode already,
        // where the kernel takes every open.
        // A set-id file is never passthrough, for reading either: its writes must stay the
        // daemon's, which clears the bits on a write (the kernel would not tell it of a
        // passthrough one), and a node with a passthrough reader gets passthrough writers.
        // (The set-id question last: it costs an attributes lookup, needless for a placeholder.)
        let wanted =
            (replica.completeCopySize(of: file.id).map { size in
                !file.writable || flags & O_TRUNC != 0
                    || (flags & O_APPEND != 0 && size <= Replica.largestFileQueuedWhileWrittenOutside)
            } ?? false) && !hasSetIDBits(file.id)
        let mode = passthroughs.open(inode, file: file.descriptor, wanted: wanted)
        do {
            try startOutsideWrites(file, inode, mode)
        } catch {
            return request.error(error)
        }
        let handle = files.insert(OpenHandle(file: file, node: inode, mode: mode))
        // The kernel's cached pages stay valid between opens: remote changes invalidate
        // them. Just after one, a lookup or listing answered before it may have left the old
        // size in the kernel (it raced the invalidation): the caller dropped it before this.
        request.opened(openReply(handle, mode))
    }

    /// A file opened for writing in passthrough mode: the replica is told before the kernel
    /// may write (`Replica.beginOutsideWrites`). On failure the open is undone.
    private func startOutsideWrites(
        _ file: OpenFile, _ inode: UInt64, _ mode: PassthroughFiles.Mode, created: Bool = false
    ) throws(ReplicaError) {
        guard case .passthrough = mode, file.writable else { return }
        do {
            try replica.beginOutsideWrites(file, created: created)
        } catch {
            passthroughs.release(inode, mode)
            replica.closeSoon(file)
            throw error
        }
        passthroughs.beginWriting(inode)
    }

    private func hasSetIDBits(_ item: ItemID) -> Bool {
        ((try? replica.attributes(of: item).mode) ?? 0) & (S_ISUID | S_ISGID) != 0
    }

    private func openReply(_ handle: UInt64, _ mode: PassthroughFiles.Mode) -> OpenReply {
        switch mode {
        case .cached: OpenReply(handle: handle, flags: .keepCache)
        case .passthrough(let backingID): OpenReply(handle: handle, flags: .passthrough, backingID: backingID)
        }
    }

    func read(_ request: Request, _ handle: UInt64, _ size: Int, _ offset: Int) {
        guard let file = fileOnDisk(handle, request) else { return }
        // Present bytes (most reads) are answered here; a download waits on a task.
        do {
            if let bytes = try replica.readableIfPresent(file, offset: UInt64(offset), count: size) {
                return request.data(bytes)
            }
        } catch {
            return request.error(error)
        }
        answerLater(request) { [replica] in
            request.data(try await replica.readable(file, offset: UInt64(offset), count: size))
        }
    }

    /// The bytes are the worker's buffer: written into the local file before this returns.
    func write(_ request: Request, _ handle: UInt64, _ bytes: UnsafeRawBufferPointer, _ offset: Int, killsPrivileges: Bool) {
        guard let open = files.get(handle) else { return request.error(EBADF) }
        if open.isInMemory, !killsPrivileges, replica.writeInMemory(open.file.id, offset: UInt64(offset), bytes: bytes) {
            return request.written(bytes.count)
        }
        guard let file = fileOnDisk(handle, request) else { return }
        answer(request) {
            let count = try replica.write(file, offset: UInt64(offset), count: bytes.count) { fd in
                var done = 0
                while done < bytes.count {
                    let wrote = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
                    if wrote < 0 {
                        if errno == EINTR { continue }
                        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                    }
                    done += wrote
                }
                return done
            }
            // The kernel's cached mode would show the bits until it times out.
            if killsPrivileges, try replica.dropSetIDBits(file.id) { kernel.invalidateAttributes(open.node) }
            request.written(count)
        }
    }

    /// `copy_file_range`: copied between the two local files inside the kernel (without it,
    /// the kernel falls back to reads and writes through FUSE, a round trip per 128 KiB).
    func copyFileRange(
        _ request: Request, _ sourceHandle: UInt64, _ sourceOffset: Int, _ targetHandle: UInt64, _ targetOffset: Int,
        _ count: Int
    ) {
        guard let source = fileOnDisk(sourceHandle, request), let target = fileOnDisk(targetHandle, request) else { return }
        answerLater(request) { [replica] in
            request.written(
                try await replica.copyRange(
                    from: source, at: UInt64(sourceOffset), to: target, at: UInt64(targetOffset), count: count))
        }
    }

    /// `lseek` with `SEEK_DATA` or `SEEK_HOLE` (the kernel answers the other kinds itself).
    func lseek(_ request: Request, _ handle: UInt64, _ offset: Int, _ whence: Int32) {
        guard let file = fileOnDisk(handle, request) else { return }
        guard whence == SeekKind.data || whence == SeekKind.hole else { return request.error(EINVAL) }
        // As ext4 and lseek(2): no data or hole lies before the start.
        guard offset >= 0 else { return request.error(ENXIO) }
        answer(request) {
            guard let found = try replica.seek(file, from: UInt64(offset), toData: whence == SeekKind.data) else {
                return request.error(ENXIO)
            }
            request.seeked(to: found)
        }
    }

    /// `fallocate`: reserving space (with or without growing the file), punching a hole,
    /// zeroing a range. Collapsing or inserting a range is not offered (EOPNOTSUPP).
    func fallocate(_ request: Request, _ handle: UInt64, _ mode: Int32, _ offset: Int, _ length: Int) {
        guard let file = fileOnDisk(handle, request) else { return }
        let keepSize = mode & FallocateFlags.keepSize != 0
        let allocation: Replica.Allocation
        switch mode & ~FallocateFlags.keepSize {
        case 0: allocation = .reserve(keepSize: keepSize)
        case FallocateFlags.punchHole where keepSize: allocation = .punchHole
        case FallocateFlags.zeroRange: allocation = .zero(keepSize: keepSize)
        default: return request.error(EOPNOTSUPP)
        }
        answerLater(request) { [replica] in
            try await replica.allocate(file, at: UInt64(offset), count: UInt64(length), allocation)
            request.ok()
        }
    }

    func fsync(_ request: Request, _ handle: UInt64) {
        guard let file = fileOnDisk(handle, request) else { return }
        answer(request) {
            try replica.sync(file)
            request.ok()
        }
    }

    /// The open file of `handle` for anything but a write in order: a new file kept in memory
    /// gets its cache file first (`Replica.moveOutOfMemory`). Nil when answered with an error.
    private func fileOnDisk(_ handle: UInt64, _ request: Request) -> OpenFile? {
        guard var open = files.get(handle) else {
            request.error(EBADF)
            return nil
        }
        guard open.isInMemory else { return open.file }
        do {
            guard let moved = try replica.moveOutOfMemory(open.file.id) else { return open.file }
            open.file = moved
            files.replace(handle, with: open)
            return moved
        } catch {
            request.error(error)
            return nil
        }
    }

    func release(_ request: Request, _ handle: UInt64) {
        guard let open = files.remove(handle) else { return request.error(EBADF) }
        if open.madeInMemory { return releaseMadeInMemory(request, open) }
        if case .passthrough = open.mode, open.file.writable {
            // The replica takes the copy as it is before `stat` stops asking it to.
            replica.endOutsideWrites(open.file)
            passthroughs.endWriting(open.node)
            // Pages the kernel cached for daemon-served opens before are stale now.
            if passthroughs.takeCachedPages(open.node) { kernel.run { [kernel] in kernel.invalidateInodeNow(open.node) } }
        }
        let keptOlderVersion = replica.keepsOlderVersionForOpens(open.file.id)
        passthroughs.release(open.node, open.mode)
        // The kernel cached pages and the size of the version kept for the opens: the next
        // open must read the current one.
        if keptOlderVersion { kernel.invalidateInodeAndWait(open.node) }
        if let creator = open.creator { noteNewFileClosed(creator, open.file) }
        request.ok()
        // After the answer (nobody waits for a release): a small written file is queued on
        // this thread, the next request served by another worker meanwhile.
        replica.closeSoon(open.file)
    }

    /// `release` of a new file's handle that kept it in memory: its bytes go to the staging
    /// log, or, moved out meanwhile, the cache file it went on with is closed as any.
    private func releaseMadeInMemory(_ request: Request, _ open: OpenHandle) {
        passthroughs.release(open.node, open.mode)
        request.ok()
        let id = open.file.id
        if open.isInMemory, replica.closeInMemory(open.file) {
            if let creator = open.creator { bursts.withLock { $0.closed(creator, small: true, at: .now) } }
            return
        }
        if let creator = open.creator { bursts.withLock { $0.closed(creator, small: false, at: .now) } }
        // Moved out before (`fileOnDisk`, another open), or now (the log could not take it).
        let moved = (try? replica.moveOutOfMemory(id)) ?? nil
        let file = replica.movedOutOfMemory(id) ?? moved ?? (open.isInMemory ? nil : open.file)
        if let file { replica.closeSoon(file) }
    }

    /// A new file this process made through the kernel was closed: small or not, for the
    /// next create's guess.
    private func noteNewFileClosed(_ creator: Int32, _ file: OpenFile) {
        var info = Glibc.stat()
        let small = fstat(file.descriptor, &info) == 0 && info.st_size <= Replica.largestFileInMemory
        bursts.withLock { $0.closed(creator, small: small, at: .now) }
    }

    func opendir(_ request: Request, _ inode: UInt64) {
        answer(request) {
            let listing = try listing(of: inode)
            noteRead(listing.folderID, inode: inode, isFolder: true)
            replica.folderOpened(listing.folderID)
            request.opened(OpenReply(handle: listings.insert(listing)))
        }
    }

    /// A read moves the access time as the mount's rule says; the kernel's cached
    /// attributes go, so that `stat` right after shows it.
    private func noteRead(_ id: ItemID, inode: UInt64, isFolder: Bool) {
        if replica.noteRead(id, isFolder: isFolder) { kernel.invalidateAttributes(inode) }
    }

    /// A folder's listing as of now: `.`, `..`, then its children.
    private func listing(of inode: UInt64) throws(ReplicaError) -> FolderListing {
        let folder = try id(inode)
        let entries = try replica.list(folder)
        let parentInode = folder == .root ? rootParent : node(try replica.parent(of: folder))
        return FolderListing(folderID: folder, folder: inode, parent: parentInode, entries: entries)
    }

    func readdir(_ request: Request, _ parent: UInt64, _ handle: UInt64, _ size: Int, _ offset: Int, plus: Bool) {
        guard var listing = listings.get(handle) else { return request.error(EBADF) }
        // Offset 0 after the listing was read is `rewinddir` (or a seek to the start): POSIX
        // has it show the folder as it is now, as a new `opendir` would.
        if offset == 0 && listing.wasRead {
            do {
                listing = try self.listing(of: parent)
            } catch ReplicaError.notFound {
                // Removed since: it lists nothing, as a removed folder does on ext4.
                return request.reply(bytes: [])
            } catch {
                return request.error(error)
            }
        }
        if !listing.wasRead {
            listing.wasRead = true
            listings.replace(handle, with: listing)
        }
        let folder = try? id(parent)
        // The offset is the caller's (`lseek` on the folder): anything past the end lists nothing.
        guard offset >= 0, offset < listing.count else { return request.reply(bytes: []) }
        var buffer = DirectoryBuffer(capacity: size)
        for index in offset..<listing.count {
            let added: Bool
            if let dot = listing.dotEntry(at: index) {
                // `.` and `..` are never looked up from a listing (the kernel skips them in
                // readdirplus): node id 0 in the entry, no lookup counted.
                let name = Array(dot.name.utf8)
                added =
                    plus
                    ? buffer.addPlus(entry: nil, name: name, inode: dot.inode, mode: S_IFDIR, nextOffset: UInt64(index + 1))
                    : buffer.add(name: name, inode: dot.inode, mode: S_IFDIR, nextOffset: UInt64(index + 1))
            } else {
                let item = listing.entry(at: index)
                // Attributes as of now, not of opendir: the kernel caches them, and a remote
                // change invalidated since must not be undone by an old listing. A name gone
                // since is left out.
                guard let folder, let attributes = replica.currentAttributes(of: item, in: folder) else { continue }
                let name = NameBytes.bytes(item.name)
                let entry = uncountedEntry(attributes)
                if plus {
                    added = buffer.addPlus(
                        entry: entry, name: name, inode: entry.node, mode: entry.attributes.st_mode,
                        nextOffset: UInt64(index + 1))
                    // An entry that does not fit was not handed out: no lookup to count.
                    if added { inodes.remember(entry.node, parent: parent, name: item.name) }
                } else {
                    added = buffer.add(
                        name: name, inode: entry.node, mode: entry.attributes.st_mode, nextOffset: UInt64(index + 1))
                }
            }
            if !added { break }
        }
        request.reply(buffer)
    }

    func releasedir(_ request: Request, _ handle: UInt64) {
        if let listing = listings.remove(handle) { replica.folderClosed(listing.folderID) }
        request.ok()
    }

    func statfs(_ request: Request) {
        var info = statvfs()
        // Space is that of the cache's disk: where new content lands first.
        if statvfs(replica.configuration.cacheDirectory, &info) != 0 { info = statvfs() }
        info.f_namemax = 255
        request.statfs(info)
    }
}

extension FuseFileSystem {
    /// `renameat2` flags (linux/fs.h), which Glibc's module does not export.
    static let renameNoReplace: UInt32 = 1 << 0
    static let renameExchange: UInt32 = 1 << 1
}

/// The mode bits of `fallocate(2)` (linux/falloc.h).
private enum FallocateFlags {
    static let keepSize: Int32 = 0x01
    static let punchHole: Int32 = 0x02
    static let zeroRange: Int32 = 0x10
}

/// `lseek`'s `SEEK_DATA` and `SEEK_HOLE` (declared by Glibc only under _GNU_SOURCE).
private enum SeekKind {
    static let data: Int32 = 3
    static let hole: Int32 = 4
}
