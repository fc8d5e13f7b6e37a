import ContainerFormat
import SystemPackage
import Foundation

/// Names, attributes and the tree: what `lookup`, `getattr`, `readdir`, `mkdir`, `create`,
/// `symlink`, `unlink`, `rmdir`, `rename` and `setattr` need.
extension Replica {
    public func attributes(of id: ItemID) throws(ReplicaError) -> ItemAttributes {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.itemOfOpenHandle(id) else { throw .notFound }
            return attributes(item, &state)
        }
    }

    /// The attributes of what `entry` names now (a hard link's item for a link), if `entry`
    /// is still in `folder`; nil if it moved or went away (a listing taken earlier must not
    /// hand out what changed since).
    public func currentAttributes(of entry: DirectoryEntry, in folder: ItemID) -> ItemAttributes? {
        state.withLock { state in
            guard let child = state.view.child(named: entry.name, in: folder), child.id == entry.id,
                let item = named(child, &state)
            else { return nil }
            return attributes(item, &state)
        }
    }

    public func lookup(_ name: String, in folder: ItemID) throws(ReplicaError) -> ItemAttributes {
        try state.withLock { state throws(ReplicaError) in
            guard let item = named(name, in: folder, &state) else { throw .notFound }
            return attributes(item, &state)
        }
    }

    // The state is passed `inout` here and below, though only read: passed by value from
    // inside `withLock`, the whole state (36 fields) was copied per call.

    /// The live item `name` in `folder` stands for (a hard link's item for a link).
    private func named(_ name: String, in folder: ItemID, _ state: inout ReplicaState) -> Item? {
        guard let child = state.device.view.child(named: name, in: folder) else { return nil }
        return named(child, &state)
    }

    /// The live item a folder's child names (a hard link's item for a link).
    private func named(_ child: Item, _ state: inout ReplicaState) -> Item? {
        guard let resolved = state.device.view.resolved(child) else { return nil }
        return state.liveItem(resolved.id)
    }

    /// The live children of a folder, sorted by name: names and ids, what `opendir` keeps.
    /// `currentAttributes` gives each one's attributes as the listing is read (working them
    /// all out here too was most of an `ls -l` of a large folder).
    public func list(_ folder: ItemID) throws(ReplicaError) -> [DirectoryEntry] {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.liveItem(folder) else { throw .notFound }
            guard item.kind == .folder else { throw .notAFolder }
            return state.view.childEntries(of: folder).map { DirectoryEntry(name: $0.name, id: $0.id) }
        }
    }

    /// `opendir` and `releasedir`: a folder open here keeps answering `fstat` once removed or
    /// replaced by a rename, as a file does.
    public func folderOpened(_ id: ItemID) {
        state.withLock { $0.openFolders[id, default: 0] += 1 }
    }

    public func folderClosed(_ id: ItemID) {
        state.withLock { state in
            let count = (state.openFolders[id] ?? 1) - 1
            state.openFolders[id] = count > 0 ? count : nil
        }
    }

    /// `umask` (here and in `makeFile`, `makeSpecial`): the caller's, when the kernel left
    /// it to the filesystem (`-o acl`): it applies unless the folder has a default ACL,
    /// which then decides the mode. nil: the kernel applied it.
    public func makeFolder(
        _ name: String, in parent: ItemID, mode: UInt32, owner: Owner = .root, umask: UInt32? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        try create(name, in: parent, kind: .folder, mode: mode, target: nil, owner: owner, umask: umask)
    }

    /// A new empty file; its content arrives by `write` and is queued when it is closed.
    public func makeFile(
        _ name: String, in parent: ItemID, mode: UInt32, owner: Owner = .root, umask: UInt32? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        try create(name, in: parent, kind: .file, mode: mode, target: nil, owner: owner, umask: umask)
    }

    /// `create(2)`: a new empty file, opened for writing. Its cache file is one made ahead
    /// (`LocalFiles.openNewContent`), taken before the state lock; the item, its queued
    /// create and its open are then one hold of that lock (`tar x` and `git checkout` make
    /// mostly these, and each lock taken by a create could wait behind the sync's).
    public func makeFileForWriting(
        _ name: String, in parent: ItemID, mode: UInt32, owner: Owner = .root, umask: UInt32? = nil
    ) throws(ReplicaError) -> (attributes: ItemAttributes, file: OpenFile) {
        if let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        let id: ItemID
        let fd: FileDescriptor
        do {
            (id, fd) = try files.openNewContent()
        } catch {
            throw .localFailure("cannot make the cache file of \(name)", error)
        }
        do {
            let attributes = try createOpened(id, name, in: parent, mode: mode, owner: owner, umask: umask)
            return (attributes, OpenFile(id: id, writable: true, fd: fd))
        } catch {
            try? fd.close()
            files.removeContent(id)
            throw error
        }
    }

    /// A new file's item, made with `id` and counted open, for the create that opens it.
    /// `answer`, if given, is called with its attributes once the create is decided (see
    /// `NewFileAnswer`).
    func createOpened(
        _ id: ItemID, _ name: String, in parent: ItemID, mode: UInt32, owner: Owner, umask: UInt32?,
        answer: NewFileAnswer? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        try state.withLock { state throws(ReplicaError) in
            let attributes = try create(
                id, name, in: parent, kind: .file, mode: mode, target: nil, owner: owner, umask: umask, answer: answer,
                &state)
            noteOpened(id, &state)
            return attributes
        }
    }

    /// Called with a new file's attributes as soon as its create is decided (the name free,
    /// the folder writable), in the same hold of the state lock, before the create is queued
    /// and shown in the view: the FUSE reply then waits for none of that (docs/ARCHITECTURE.md,
    /// "The path of a small file"). No one sees the state until the hold ends, so the file is
    /// there for whatever the caller does next. It must not call the replica (the lock is held).
    public typealias NewFileAnswer = (ItemAttributes) -> Void

    public func makeSymlink(
        _ name: String, in parent: ItemID, target: String, owner: Owner = .root
    ) throws(ReplicaError) -> ItemAttributes {
        guard !target.isEmpty, NameBytes.count(target) < 4096, !target.utf8.contains(0) else {
            throw .invalidArgument("a link target must be 1 to 4095 bytes")
        }
        return try create(name, in: parent, kind: .symlink, mode: 0o777, target: target, owner: owner)
    }

    /// A FIFO, socket or device file: a name with a mode, owner and times (and a device
    /// number), never content.
    public func makeSpecial(
        _ name: String, in parent: ItemID, kind: ItemKind, mode: UInt32, device: UInt64, owner: Owner = .root,
        umask: UInt32? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        guard kind.isSpecial else { throw .invalidArgument("not a special file kind: \(kind)") }
        return try create(
            name, in: parent, kind: kind, mode: mode, target: nil, owner: owner,
            device: kind == .characterDevice || kind == .blockDevice ? device : nil, umask: umask)
    }

    /// `link`: one more name for a file, symlink or special file (not a folder: EPERM).
    public func makeLink(to id: ItemID, named name: String, in parent: ItemID) throws(ReplicaError) -> ItemAttributes {
        if let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        if let named = try nameAnonymousFile(id, name, in: parent) { return named }
        return try create(name, in: parent, kind: .hardLink, mode: 0, target: nil, owner: .root, linkedItem: id)
    }

    /// `open(folder, O_TMPFILE)`: a file with no name, open for writing. Nothing is queued
    /// for it unless `makeLink` gives it a name (`linkat`); its last close without one
    /// drops it, as on a local disk.
    public func makeAnonymousFile(
        in parent: ItemID, mode: UInt32, owner: Owner = .root, umask: UInt32? = nil
    ) throws(ReplicaError) -> OpenFile {
        let id = RandomID.makeItemID()
        let fd: FileDescriptor
        do {
            fd = try files.openContent(id, writable: true)
        } catch {
            throw .localFailure("cannot make a cache file for a new file", error)
        }
        do {
            try state.withLock { state throws(ReplicaError) in
                let (mode, owner, xattrs) = try newItemFields(
                    in: parent, kind: .file, mode: mode, owner: owner, umask: umask, &state)
                state.anonymousFiles[id] = Item(
                    id: id, parent: parent, name: "", kind: .file, mode: mode, mtime: Timestamp.now(), xattrs: xattrs,
                    owner: owner == .root ? nil : owner)
                state.content[id] = ContentRecord.empty.with(dirty: true)
                state.openCount[id] = 1
            }
        } catch {
            try? fd.close()
            files.removeContent(id)
            throw error
        }
        return OpenFile(id: id, writable: true, fd: fd)
    }

    /// `linkat` of an `O_TMPFILE` file: its first name makes it an item like any other, its
    /// bytes queued at its next commit (it is open: the close commits).
    private func nameAnonymousFile(_ id: ItemID, _ name: String, in parent: ItemID) throws(ReplicaError) -> ItemAttributes? {
        try state.withLock { state throws(ReplicaError) -> ItemAttributes? in
            guard let file = state.anonymousFiles[id] else { return nil }
            _ = try liveFolder(parent, &state)
            guard state.view.child(named: name, in: parent) == nil else { throw .exists }
            state.anonymousFiles[id] = nil
            if var record = state.content[id], !record.dirty {
                record.dirty = true
                state.content[id] = record
                state.changedSinceClean[id] = nil
                state.dirtyMtime[id] = file.mtime
            }
            let op = ItemOperation.create(.init(
                id: id, parent: parent, name: name, kind: .file, mode: file.mode, mtime: file.mtime,
                xattrs: file.xattrs, owner: file.owner))
            enqueue([(op, nil)], &state, content: [id])
            return attributes(state.liveItem(id)!, &state)
        }
    }

    /// Names of the live conflict copies of `id` (siblings of it).
    public func conflictCopyNames(of id: ItemID) -> [String] {
        state.withLock { state in state.view.conflictCopies(of: id).map(\.name) }
    }

    /// The name of `id` in its folder.
    public func name(of id: ItemID) throws(ReplicaError) -> String {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            return item.name
        }
    }

    /// The folder holding `id`.
    public func parent(of id: ItemID) throws(ReplicaError) -> ItemID {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            return item.parent
        }
    }

    public func readLink(_ id: ItemID) throws(ReplicaError) -> String {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.liveItem(id) else { throw .notFound }
            guard let target = item.target else { throw .invalidArgument("not a symlink") }
            return target
        }
    }

    /// `unlink`: removes a name of a file, symlink or special file (the item goes with its
    /// last name).
    public func remove(_ name: String, in parent: ItemID) throws(ReplicaError) {
        let freed = try state.withLock { state throws(ReplicaError) -> ItemID? in
            guard let child = state.view.child(named: name, in: parent) else { throw .notFound }
            guard child.kind != .folder else { throw .isAFolder }
            guard let item = state.view.resolved(child) else { throw .notFound }
            // The delete is based on the content the name shows (declined if that changed
            // meanwhile and this was its last name).
            let base = state.openedBase[item.id] ?? state.device.base(of: item.id)
            let lastName = state.view.linkCount(of: item.id) <= 1
            if lastName, state.openCount[item.id] != nil { state.unlinkedHere.insert(item.id) }
            // The bytes of a closed file that nothing queued still needs go with its last
            // name: on a full cache disk, `rm` must give the space back at once.
            let freed = lastName && state.content[item.id] != nil && isReclaimable(item.id, state)
            if freed {
                state.content[item.id] = nil
                state.changedSinceClean[item.id] = nil
            }
            enqueue([(.delete(.init(id: child.id, base: 0)), base)], &state, content: freed ? [item.id] : [])
            if !freed { state.noteReclaimCandidates([item.id]) }  // a hard link's item
            return freed ? item.id : nil
        }
        if let freed { files.removeContent(freed) }
    }

    /// Whether the local copy of `id` may go without losing anything: closed, and holding
    /// no chunk that a queued version still has to upload.
    func isReclaimable(_ id: ItemID, _ state: ReplicaState) -> Bool {
        state.openCount[id] == nil && !state.unstaged.holdsBytes(of: id)
    }

    /// `rmdir`: removes an empty folder.
    public func removeFolder(_ name: String, in parent: ItemID) throws(ReplicaError) {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.child(named: name, in: parent) else { throw .notFound }
            guard item.kind == .folder else { throw .notAFolder }
            guard !state.view.hasChildren(item.id) else { throw .notEmpty }
            enqueue([(.delete(.init(id: item.id, base: 0)), state.device.base(of: item.id))], &state)
        }
    }

    /// `rename`: moves an item, replacing what holds the new name as POSIX says (a file
    /// replaces a file, a folder an empty folder), unless `noReplace`.
    public func rename(
        _ name: String, in parent: ItemID, to newName: String, in newParent: ItemID, noReplace: Bool = false
    ) throws(ReplicaError) {
        if let problem = ItemName.problem(with: newName) { throw .invalidName(problem) }
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.child(named: name, in: parent) else { throw .notFound }
            guard let target = state.view.liveItem(newParent) else { throw .notFound }
            guard target.kind == .folder else { throw .notAFolder }
            if item.id == newParent || state.view.isAncestor(item.id, of: newParent) {
                throw .invalidArgument("cannot move a folder inside itself")
            }
            var ops: [(ItemOperation, BaseVersion?)] = []
            let replaced = state.view.child(named: newName, in: newParent)
            let replacedItem = replaced.flatMap(state.view.resolved)
            if let existing = replaced {
                // Two names of one item: POSIX says rename does nothing.
                if existing.id == item.id || replacedItem?.id == state.view.resolved(item)?.id { return }
                if noReplace { throw .exists }
                switch (item.kind == .folder, existing.kind == .folder) {
                case (true, false): throw .notAFolder
                case (false, true): throw .isAFolder
                case (true, true) where state.view.hasChildren(existing.id): throw .notEmpty
                default: break
                }
                // As an unlink: an open file is replaced as the version that was opened (a
                // newer one that arrived since is kept), and its handles' writes are dropped.
                let content = replacedItem?.id ?? existing.id
                ops.append((.delete(.init(id: existing.id, base: 0)), state.openedBase[content] ?? state.device.base(of: content)))
            }
            ops.append((.move(.init(id: item.id, base: 0, parent: newParent, name: newName)), state.device.base(of: item.id)))
            enqueue(ops, &state)
            if let replacedItem, !state.view.isLive(replacedItem.id), state.openCount[replacedItem.id] != nil {
                state.unlinkedHere.insert(replacedItem.id)
            }
        }
    }

    /// `renameat2` with `RENAME_EXCHANGE`: the two names swap their items, atomically (one
    /// queued change of three moves: one item steps aside under a name nothing else uses,
    /// so no move ever meets a taken name when another device folds them).
    public func exchange(_ name: String, in parent: ItemID, with otherName: String, in otherParent: ItemID) throws(ReplicaError) {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.view.child(named: name, in: parent),
                let other = state.view.child(named: otherName, in: otherParent)
            else { throw .notFound }
            guard item.id != other.id else { return }
            // A folder must not end up inside itself.
            if item.id == otherParent || state.view.isAncestor(item.id, of: otherParent)
                || other.id == parent || state.view.isAncestor(other.id, of: parent)
            {
                throw .invalidArgument("cannot move a folder inside itself")
            }
            let aside = ".icloudfs-exchange-\(RandomID.make())"
            enqueue([
                (.move(.init(id: item.id, base: 0, parent: otherParent, name: aside)), state.device.base(of: item.id)),
                (.move(.init(id: other.id, base: 0, parent: parent, name: name)), state.device.base(of: other.id)),
                (.move(.init(id: item.id, base: 0, parent: otherParent, name: otherName)), state.device.base(of: item.id)),
            ], &state)
        }
    }

    /// `chown` as Linux does it, in one hold of the state lock (`tar x` gives away every file
    /// it makes): `decide` gets the item's attributes and returns the owner to store, or
    /// throws to refuse (it runs under the lock: it must not call the replica); then the item
    /// loses what a file given away loses (`dropSetIDBits`). Returns the attributes after.
    public func giveAway(
        _ id: ItemID, decide: (ItemAttributes) throws(ReplicaError) -> Owner
    ) throws(ReplicaError) -> ItemAttributes {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.itemOfOpenHandle(id) else { throw .notFound }
            try setOwner(id, to: try decide(attributes(item, &state)), &state)
            try dropSetIDBits(id, &state)
            return attributes(state.itemOfOpenHandle(id)!, &state)
        }
    }

    /// A new owner and group. On a file being written it is queued with its content at the
    /// next commit, as modes and times are.
    private func setOwner(_ id: ItemID, to owner: Owner, _ state: inout ReplicaState) throws(ReplicaError) {
        guard let item = state.liveOrAnonymousItem(id) else { throw .notFound }
        if state.content[id]?.dirty == true {
            state.dirtyOwner[id] = owner
            state.dirtyCtime[id] = Timestamp.now()
        } else if state.anonymousFiles[id] != nil {
            state.anonymousFiles[id]?.owner = owner == .root ? nil : owner
            state.anonymousFiles[id]?.ctime = Timestamp.now()
        } else if item.ownerOrRoot != owner {
            enqueue([(.update(.init(id: id, base: 0, owner: owner)), nil)], &state)
        }
    }

    /// What Linux does to a file written, truncated or given away by a caller without
    /// CAP_FSETID (the kernel says which, and leaves it to us: `handleKillPrivilegesV2`): the
    /// set-user-id bit goes, the set-group-id bit too if the group may execute it, and so does
    /// a file capability. In one hold of the state lock. Returns whether the mode changed.
    @discardableResult
    public func dropSetIDBits(_ id: ItemID) throws(ReplicaError) -> Bool {
        try state.withLock { state throws(ReplicaError) in try dropSetIDBits(id, &state) }
    }

    @discardableResult
    private func dropSetIDBits(_ id: ItemID, _ state: inout ReplicaState) throws(ReplicaError) -> Bool {
        guard let item = state.itemOfOpenHandle(id) else { throw .notFound }
        // Any kind but a folder, as Linux (a FIFO or device file given away loses them too).
        guard item.kind != .folder, item.kind != .symlink else { return false }
        let mode = item.mode & 0o7777
        var kept = mode & ~UInt32(S_ISUID)
        if kept & UInt32(S_IXGRP) != 0 { kept &= ~UInt32(S_ISGID) }
        if kept != mode { try setAttributes(id, mode: kept, &state) }
        if item.xattrs[FileCapabilities.attribute] != nil {
            try setUserAttribute(FileCapabilities.attribute, of: id, to: nil, &state)
        }
        return kept != mode
    }

    /// `setattr` for mode, modification and access times (sizes go through `truncate`). On
    /// a file being written they are queued with its content at the next commit (`tar x`
    /// sets them on every file before closing it: one queued change, not three). `ctime`:
    /// the change time the kernel gives (any change moves it to now anyway).
    public func setAttributes(
        _ id: ItemID, mode: UInt32? = nil, mtime: Timestamp? = nil, atime: Timestamp? = nil, ctime: Timestamp? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        try state.withLock { state throws(ReplicaError) in
            try setAttributes(id, mode: mode, mtime: mtime, atime: atime, ctime: ctime, &state)
            return attributes(state.itemOfOpenHandle(id)!, &state)
        }
    }

    private func setAttributes(
        _ id: ItemID, mode: UInt32? = nil, mtime: Timestamp? = nil, atime: Timestamp? = nil, ctime: Timestamp? = nil,
        _ state: inout ReplicaState
    ) throws(ReplicaError) {
        // The kernel's writes so far come first: times set now are later than them.
        if mtime != nil || ctime != nil, state.outsideWriters[id] != nil {
            refreshOutsideWritten(id, through: nil, &state)
        }
        guard state.view.liveItem(id) != nil || state.anonymousFiles[id] != nil else { throw .notFound }
        let mode = mode.map { $0 & 0o7777 }
        if atime != nil, state.localAccessTimes.removeValue(forKey: id) != nil {
            database.writeSoon { [database] db in try database.saveAccessTime(id, nil, db) }
        }
        if state.content[id]?.dirty == true {
            if let mtime { state.dirtyMtime[id] = mtime }
            if let mode { state.dirtyMode[id] = mode }
            if let atime { state.dirtyAtime[id] = atime }
            state.dirtyCtime[id] = ctime ?? Timestamp.now()
        } else if var anonymous = state.anonymousFiles[id] {
            anonymous.mode = mode ?? anonymous.mode
            anonymous.mtime = mtime ?? anonymous.mtime
            anonymous.atime = atime ?? anonymous.atime
            anonymous.ctime = ctime ?? Timestamp.now()
            state.anonymousFiles[id] = anonymous
        } else if mode != nil || mtime != nil || atime != nil || ctime != nil {
            var update = ItemOperation.Update(id: id, base: 0, mode: mode, mtime: mtime)
            update.atime = atime
            update.ctime = ctime
            enqueue([(.update(update), nil)], &state)
        }
        // An access ACL follows the new mode (ext4's chmod).
        if let mode, let item = state.view.liveItem(id),
            let acl = item.xattrs[PosixACL.accessAttribute].flatMap(PosixACL.init)
        {
            var xattrs = item.xattrs
            xattrs[PosixACL.accessAttribute] = acl.changingMode(to: mode).data
            enqueue([(.update(.init(id: id, base: 0, xattrs: xattrs)), nil)], &state)
        }
    }

    // MARK: - Stored extended attributes (`AttributeName`: user.* but user.icloud.*, and others)

    public func userAttribute(_ name: String, of id: ItemID) throws(ReplicaError) -> Data? {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.itemOfOpenHandle(id) else { throw .notFound }
            return item.xattrs[name]
        }
    }

    public func userAttributeNames(of id: ItemID) throws(ReplicaError) -> [String] {
        try state.withLock { state throws(ReplicaError) in
            guard let item = state.itemOfOpenHandle(id) else { throw .notFound }
            return item.xattrs.keys.sorted()
        }
    }

    /// Sets (or with nil removes) an attribute; it syncs like content. An access ACL sets
    /// the mode too (and is kept only if the mode cannot say all of it, as on ext4).
    public func setUserAttribute(_ name: String, of id: ItemID, to value: Data?) throws(ReplicaError) {
        guard AttributeName.isStored(name), name.utf8.count <= 255 else {
            throw .notSupported("this attribute cannot be stored")
        }
        try state.withLock { state throws(ReplicaError) in try setUserAttribute(name, of: id, to: value, &state) }
    }

    private func setUserAttribute(
        _ name: String, of id: ItemID, to value: Data?, _ state: inout ReplicaState
    ) throws(ReplicaError) {
        guard let item = state.liveOrAnonymousItem(id) else { throw .notFound }
        var xattrs = item.xattrs
        if value == nil && xattrs[name] == nil { throw .notFound }
        var mode: UInt32?
        if name == PosixACL.accessAttribute, let value {
            guard let acl = PosixACL(value) else { throw .invalidArgument("not a POSIX ACL") }
            mode = acl.applied(to: item.mode)
            xattrs[name] = acl.isEquivalentToMode ? nil : value
        } else {
            xattrs[name] = value
        }
        // A file being written keeps the mode last set on it for its next commit: the
        // ACL's mode replaces that one, or the commit would queue the old mode after it
        // (and `stat` would show the old one until then).
        if let mode, state.dirtyMode[id] != nil { state.dirtyMode[id] = mode }
        if state.anonymousFiles[id] != nil {  // no name yet: kept with it, queued when linked
            state.anonymousFiles[id]?.xattrs = xattrs
            if let mode { state.anonymousFiles[id]?.mode = mode }
            return
        }
        enqueue([(.update(.init(id: id, base: 0, mode: mode, xattrs: xattrs)), nil)], &state)
    }

    // MARK: - Internals

    private func liveFolder(_ id: ItemID, _ state: inout ReplicaState) throws(ReplicaError) -> Item {
        guard let folder = state.device.view.liveItem(id) else { throw .notFound }
        guard folder.kind == .folder else { throw .notAFolder }
        return folder
    }

    /// A new item's mode, owner and ACL in `parent`: a set-group-id folder gives its group
    /// (and, to a folder, the bit); a default ACL replaces the umask.
    private func newItemFields(
        in parent: ItemID, kind: ItemKind, mode: UInt32, owner: Owner, umask: UInt32?, _ state: inout ReplicaState
    ) throws(ReplicaError) -> (mode: UInt32, owner: Owner, xattrs: [String: Data]) {
        let folder = try liveFolder(parent, &state)
        var owner = owner
        var mode = mode & 0o7777
        if folder.mode & UInt32(S_ISGID) != 0 {
            owner.gid = folder.ownerOrRoot.gid
            if kind == .folder { mode |= UInt32(S_ISGID) }
        }
        var xattrs: [String: Data] = [:]
        if let umask {
            if let inherited = folder.xattrs[PosixACL.defaultAttribute].flatMap(PosixACL.init) {
                let (masked, access) = inherited.inherited(mode: mode)
                mode = masked
                xattrs[PosixACL.accessAttribute] = access?.data
                if kind == .folder { xattrs[PosixACL.defaultAttribute] = inherited.data }
            } else {
                mode &= ~umask
            }
        }
        return (mode, owner, xattrs)
    }

    /// `owner`: the creating process's user and group; in a setgid folder, the group is the
    /// folder's, and a new folder is setgid too (as on Linux).
    /// A hard link (`linkedItem`) answers with its item's attributes.
    private func create(
        _ name: String, in parent: ItemID, kind: ItemKind, mode: UInt32, target: String?, owner: Owner,
        device: UInt64? = nil, linkedItem: ItemID? = nil, umask: UInt32? = nil
    ) throws(ReplicaError) -> ItemAttributes {
        if let problem = ItemName.problem(with: name) { throw .invalidName(problem) }
        let id = RandomID.makeItemID()
        return try state.withLock { state throws(ReplicaError) in
            try create(
                id, name, in: parent, kind: kind, mode: mode, target: target, owner: owner, device: device,
                linkedItem: linkedItem, umask: umask, &state)
        }
    }

    /// `create` under the state lock, the new item's id chosen (a valid name given).
    private func create(
        _ id: ItemID, _ name: String, in parent: ItemID, kind: ItemKind, mode: UInt32, target: String?, owner: Owner,
        device: UInt64? = nil, linkedItem: ItemID? = nil, umask: UInt32? = nil, answer: NewFileAnswer? = nil,
        _ state: inout ReplicaState
    ) throws(ReplicaError) -> ItemAttributes {
        if let linkedItem {
            guard let item = state.liveItem(linkedItem) else { throw .notFound }
            guard item.kind.isLinkable else { throw .notPermitted("a folder cannot have another name") }
        }
        let (mode, owner, xattrs) = try newItemFields(in: parent, kind: kind, mode: mode, owner: owner, umask: umask, &state)
        guard state.view.child(named: name, in: parent) == nil else { throw .exists }
        let mtime = Timestamp.now()
        let op = ItemOperation.create(.init(
            id: id, parent: parent, name: name, kind: kind, mode: mode, mtime: mtime,
            target: target, xattrs: xattrs, owner: owner == .root ? nil : owner, device: device,
            linkedItem: linkedItem))
        if kind == .file {
            // Dirty from the start: a new file is opened for writing, and its first write
            // then costs no transaction.
            state.content[id] = ContentRecord.empty.with(dirty: true)
        }
        if let answer {
            precondition(kind == .file && linkedItem == nil, "only a new file is answered early")
            let attributes = ItemAttributes.newFile(id, mode: mode, owner: owner, at: mtime)
            answer(attributes)
            enqueue([(op, nil)], &state, content: [id])
            return attributes
        }
        enqueue([(op, nil)], &state, content: kind == .file ? [id] : [])
        let shown = linkedItem ?? id  // not in the call: an argument with a closure copied the state
        let made = state.liveItem(shown)!
        return attributes(made, &state)
    }

    /// Queues one local change: shown in the view now, recorded in the database a moment
    /// later (`saveChangeSoon`: before any later `write`, and at fsync), or folded into the
    /// item's queued create. The same transaction records the content records of `content`
    /// as they are now.
    func enqueue(_ ops: [(ItemOperation, BaseVersion?)], _ state: inout ReplicaState, content: [ItemID] = []) {
        let now = Timestamp.now()
        // An item's attributes or first content, while its create is still queued: the
        // create carries them (one change per new item).
        if ops.count == 1, case .update(let update) = ops[0].0.stamped(now),
            foldIntoQueuedCreate(update, &state, content: content)
        {
            return
        }
        // Each operation carries when it was made: the item's ctime (and its folder's times)
        // are the same on every device and before and after the change lands.
        let change = state.device.makeChange(localID: state.nextLocalID, time: now, ops.map { ($0.0.stamped(now), $0.1) })
        database.saveChangeSoon(change, isNew: true, content: content.map { ($0, state.content[$0]) })
        state.nextLocalID += 1
        state.device.append(change)
        noteQueued(ops.map { $0.0.itemID }, &state)
    }

    /// After a change is queued (or folded into a queued one): the push waits for the burst
    /// to pause, and the items are looked at by the next reclaim.
    private func noteQueued(_ ids: [ItemID], _ state: inout ReplicaState) {
        state.lastLocalChange = .now
        state.noteReclaimCandidates(ids)
        pushAfterPause()
    }

    /// An update of an item whose create is still queued and not being pushed, folded into
    /// that create (`DeviceView.foldIntoQueuedCreate`): its row is rewritten in place, with
    /// the content records of `content`. False when it cannot be: queue the update as usual.
    private func foldIntoQueuedCreate(_ update: ItemOperation.Update, _ state: inout ReplicaState, content: [ItemID]) -> Bool {
        let frozen = state.inFlight?.localIDs.count ?? 0
        guard let folded = state.device.foldIntoQueuedCreate(update, frozen: frozen) else { return false }
        database.saveChangeSoon(folded, isNew: false, content: content.map { ($0, state.content[$0]) })
        noteQueued([update.id], &state)
        return true
    }

    func attributes(_ item: Item, _ state: inout ReplicaState) -> ItemAttributes {
        var attributes = ItemAttributes(
            id: item.id, kind: item.kind, mode: item.mode,
            // A folder's size is one block, as a small folder's on ext4 (`du` counts it so).
            size: item.kind == .symlink
                ? UInt64(item.target.map(NameBytes.count) ?? 0) : item.kind == .folder ? 4096 : item.size,
            // Names (0 once unlinked while open); a folder's 2 + subfolders, which walkers
            // (find, fts) use to stop looking for subfolders: kept exact.
            mtime: item.mtime, ctime: item.ctime ?? item.mtime,
            atime: state.accessTime(of: item),
            linkCount: UInt32(state.view.linkCount(of: item.id)),
            target: item.target, owner: item.ownerOrRoot, device: item.device ?? 0)
        // A new file written into memory: its size is there until its close.
        if item.kind == .file, state.content[item.id]?.dirty == true, let size = sizeInMemory(item.id) {
            attributes.size = size
        }
        // While written here, the chunk list is the last version's: all of it counts.
        attributes.allocatedSize =
            item.kind == .file && state.content[item.id]?.dirty != true
            ? item.chunks.reduce(0) { $0 + (chunker.isZeroRunChunk($1) ? 0 : UInt64($1.size)) } : attributes.size
        return attributes
    }
}

/// A name in a folder listing, and its item's id (for a hard link, the link's own).
public struct DirectoryEntry: Sendable, Equatable {
    public var name: String
    public var id: ItemID
}
