import FuseKernel
import ContainerFormat
import Foundation
import Replica
import Synchronization
import SyncAttributes

/// `getxattr`, `listxattr`, `setxattr`, `removexattr`: the `user.icloud.*` sync attributes
/// (computed, docs/SEMANTICS.md "Sync state") and the attributes programs set (`user.*`, `trusted.*`,
/// `security.*`, and POSIX ACLs with `-o acl`: stored and synced).
extension FuseFileSystem {
    /// Attributes that are actions: writing them does something (`SyncAttribute`).
    static let actions: Set<SyncAttribute> = [.download, .evict, .isPinned, .sync, .restore, .undelete]

    /// Whether this mount keeps attribute `name`. SELinux labels are not: SELinux labels a
    /// FUSE mount as a whole, never per file, and saying ENOTSUP for them (and for ACLs
    /// without `-o acl`) lets `ls -l` stop asking after the first file (with ENODATA it
    /// asked twice per file, two round trips each: W4 in Scripts/bench).
    func keeps(_ name: String) -> Bool {
        if name.hasPrefix("system.posix_acl_") { return options.acl && AttributeName.isStored(name) }
        return name != "security.selinux" && AttributeName.isStored(name)
    }

    func getxattr(_ request: Request, _ inode: UInt64, _ name: String, _ size: Int) {
        if name == OpenVFSData.name { return getOpenVFSData(request, inode, size) }
        let attribute = SyncAttribute(name: name)
        guard SyncAttribute.isReserved(name) || keeps(name) else { return request.error(ENOTSUP) }
        // Asked by the kernel before the first write to each file: no lock while no item has one.
        if name == FileCapabilities.attribute, !FileCapabilities.mayExist { return request.error(ENODATA) }
        if attribute == .storeUsage, inode == rootNode {
            // Lists the store: not on a FUSE worker.
            return answerLater(request) { [replica] in
                let value = FormatCoding.encode(try await replica.storeUsage())
                if size == 0 { return request.xattrSize(value.count) }
                guard size >= value.count else { return request.error(ERANGE) }
                request.reply(bytes: Array(value))
            }
        }
        answer(request) {
            let item = try id(inode)
            let value: Data?
            if attribute == .cacheUsage, item == .root {
                let usage = replica.cacheUsage()
                value = Data("\(usage.total) \(usage.unevictable) \(replica.configuration.cacheSize)".utf8)
            } else if attribute == .kernel, item == .root {
                value = Data(kernelSummary.utf8)
            } else if attribute == .cacheFolder, item == .root {
                value = Data(replica.configuration.cacheDirectory.utf8)
            } else if attribute == .policy, item == .root {
                let policy = replica.retentionPolicy
                value = Data("versions=\(policy.versions) deleted=\(policy.deleted) grace=\(policy.grace)".utf8)
            } else if attribute == .versions {
                value = FormatCoding.encode(try replica.versions(of: item))
            } else if attribute == .conflictCopies {
                let names = replica.conflictCopyNames(of: item)
                value = names.isEmpty ? nil : Data(names.joined(separator: "\n").utf8)
            } else if attribute == .itemIdentifier {
                value = Data(item.rawValue.utf8)
            } else if attribute == .isUploaded {
                value = Data(SyncAttributeValue.flag(try replica.isUploaded(item)).utf8)
            } else if let attribute {
                value = try replica.syncState(of: item).attributes.first { $0.attribute == attribute }.map { Data($0.value.utf8) }
            } else if SyncAttribute.isReserved(name) {
                value = nil
            } else {
                value = try replica.userAttribute(name, of: item)
            }
            guard let value else { return request.error(ENODATA) }
            if size == 0 { return request.xattrSize(value.count) }
            guard size >= value.count else { return request.error(ERANGE) }
            request.reply(bytes: Array(value))
        }
    }

    func listxattr(_ request: Request, _ inode: UInt64, _ size: Int) {
        answer(request) {
            let item = try id(inode)
            // Linux keeps user.* attributes to files and folders (the kernel answers their
            // getxattr on symlinks and special files with ENODATA itself): listing ours there
            // would make `rsync -X` fail on them.
            let kind = try replica.attributes(of: item).kind
            // The sync state is listed to programs that show attributes, never to those that
            // copy them: `cp -a`, `rsync -X` and `tar --xattrs` wrote it onto copies.
            let listsSyncState = (kind == .file || kind == .folder) && SyncStateReader.isRunning(request.caller.pid)
            let stored = try storedNames(of: item, request)
            let names =
                kind == .file || kind == .folder
                ? (listsSyncState ? try replica.syncState(of: item).attributes.map(\.attribute.name) : []) + stored
                : stored.filter { !$0.hasPrefix("user.") }
            var list = Data()
            for name in names {
                list.append(contentsOf: name.utf8)
                list.append(0)
            }
            if size == 0 { return request.xattrSize(list.count) }
            guard size >= list.count else { return request.error(ERANGE) }
            request.reply(bytes: Array(list))
        }
    }

    /// `user.icloud.kernel`: how the kernel serves this mount.
    /// openVFS's attribute: downloaded is hydrated, downloading hydrating, anything else
    /// dehydrated (a folder by what is below it, as its `isDownloaded`); pinned is always
    /// local, unpinned unspecified (nothing is kept online only on purpose here).
    private func getOpenVFSData(_ request: Request, _ inode: UInt64, _ size: Int) {
        answer(request) {
            let item = try id(inode)
            let attributes = try replica.attributes(of: item)
            guard attributes.kind == .file || attributes.kind == .folder else { return request.error(ENODATA) }
            let sync = try replica.syncState(of: item)
            let data = OpenVFSData(
                etag: "\(attributes.mtime.seconds).\(attributes.mtime.nanoseconds)-\(attributes.size)",
                fileID: item.rawValue, size: attributes.kind == .file ? attributes.size : 0,
                state: sync.isDownloaded ? .hydrated : sync.isDownloading ? .hydrating : .dehydrated,
                pinState: sync.isPinned ? .alwaysLocal : .unspecified
            ).encoded
            if size == 0 { return request.xattrSize(data.count) }
            guard size >= data.count else { return request.error(ERANGE) }
            request.reply(bytes: data)
        }
    }

    private var kernelSummary: String {
        let passthrough = passthroughs.summary
        var words = ["passthrough=\(passthrough.available ? "on" : "off")"]
        if let why = passthrough.refusal { words.append("why=\(why.replacingOccurrences(of: " ", with: "_"))") }
        words.append("passthroughOpens=\(passthrough.passthrough)")
        words.append("cachedOpens=\(passthrough.cached)")
        words.append("refusedOpens=\(hydration.count)")
        for (kind, count) in kernel.requestCounts.sorted(by: { $0.key < $1.key }) {
            words.append("\(kind.replacingOccurrences(of: " ", with: "_"))=\(count)")
        }
        return words.joined(separator: " ")
    }

    /// The stored attributes' names, but `trusted.*` only for root (as ext4 lists them).
    private func storedNames(of item: ItemID, _ request: Request) throws -> [String] {
        try replica.userAttributeNames(of: item).filter { keeps($0) && (!$0.hasPrefix("trusted.") || request.caller.uid == 0) }
    }

    func setxattr(_ request: Request, _ inode: UInt64, _ name: String, _ value: Data, _ flags: Int32) {
        // The mount's own answer, never stored (a copy written back would be stale).
        if name == OpenVFSData.name { return request.error(EPERM) }
        if SyncAttribute(name: name) == .policy {
            return setPolicy(request, inode, value)
        }
        if SyncAttribute.isReserved(name) {
            return act(request, inode, name, value)
        }
        guard keeps(name) else { return request.error(ENOTSUP) }
        answer(request) {
            let item = try id(inode)
            let exists = try replica.userAttribute(name, of: item) != nil
            if flags & XattrFlags.create != 0 && exists { return request.error(EEXIST) }
            if flags & XattrFlags.replace != 0 && !exists { return request.error(ENODATA) }
            try replica.setUserAttribute(name, of: item, to: value)
            request.ok()
        }
    }

    func removexattr(_ request: Request, _ inode: UInt64, _ name: String) {
        if name == OpenVFSData.name { return request.error(EPERM) }
        guard SyncAttribute.isReserved(name) || keeps(name) else { return request.error(ENOTSUP) }
        if SyncAttribute.isReserved(name) {
            // The sync state is reported, not stored: removing it changes nothing and is no
            // error (`rsync -X` removes every attribute its source lacks), except that
            // removing isPinned unpins.
            return answer(request) {
                if SyncAttribute(name: name) == .isPinned { try replica.setPinned(try id(inode), false) }
                request.ok()
            }
        }
        answer(request) {
            do {
                try replica.setUserAttribute(name, of: try id(inode), to: nil)
            } catch ReplicaError.notFound {
                return request.error(ENODATA)
            }
            request.ok()
        }
    }

    /// "versions=SECONDS deleted=SECONDS grace=SECONDS" (any may be left out: it stays) on
    /// the root.
    private func setPolicy(_ request: Request, _ inode: UInt64, _ value: Data) {
        guard inode == rootNode else { return request.error(EINVAL) }
        var policy = replica.retentionPolicy
        for field in String(decoding: value, as: UTF8.self).split(whereSeparator: \.isWhitespace) {
            let parts = field.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let seconds = Int64(parts[1]), seconds >= 0 else { return request.error(EINVAL) }
            switch parts[0] {
            case "versions": policy.versions = seconds
            case "deleted": policy.deleted = seconds
            case "grace": policy.grace = seconds
            default: return request.error(EINVAL)
            }
        }
        answerLater(request) { [replica, policy] in
            try await replica.setRetentionPolicy(policy)
            request.ok()
        }
    }

    private func act(_ request: Request, _ inode: UInt64, _ name: String, _ value: Data) {
        guard let action = SyncAttribute(name: name), Self.actions.contains(action) else {
            // The other user.icloud.* attributes report state; they cannot be written.
            return request.error(EPERM)
        }
        answer(request) {
            let item = try id(inode)
            switch action {
            case .download:
                replica.startDownload(item)
            case .sync:
                replica.syncSoon()
            case .restore:
                let lines = value.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
                guard let seq = UInt64(String(decoding: lines[0], as: UTF8.self)) else { return request.error(EINVAL) }
                let name = lines.count > 1 ? NameBytes.string(lines[1]) : nil
                try replica.restore(item, version: seq, as: name)
                // The kernel may hold pages of the version replaced.
                if name == nil { kernel.invalidateInodeAndWait(inode) }
            case .undelete:
                guard item == .root else { return request.error(EINVAL) }
                let lines = value.split(separator: UInt8(ascii: "\n"), maxSplits: 1, omittingEmptySubsequences: false)
                let first = String(decoding: lines[0], as: UTF8.self)
                _ = try replica.undelete(ItemID(first), as: lines.count > 1 ? NameBytes.string(lines[1]) : nil)
            case .evict:
                try replica.evict(item)
            case .isPinned:
                switch String(decoding: value, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) {
                case "1": try replica.setPinned(item, true)
                case "0": try replica.setPinned(item, false)
                default: return request.error(EINVAL)
                }
            default:
                return request.error(EPERM)  // not in `actions`
            }
            request.ok()
        }
    }
}

/// `setxattr`'s flags (sys/xattr.h).
private enum XattrFlags {
    static let create: Int32 = 1
    static let replace: Int32 = 2
}
