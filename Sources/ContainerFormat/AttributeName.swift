import Foundation
import Synchronization
import SyncAttributes

/// Which extended attributes items keep and sync: every namespace a program may set on a
/// local disk (format 3; `user.*` only before), but the synthetic `user.icloud.*`.
public enum AttributeName {
    public static func isStored(_ name: String) -> Bool {
        if name.hasPrefix("user.") { return !SyncAttribute.isReserved(name) }
        return name.hasPrefix("trusted.") || name.hasPrefix("security.")
            || name == "system.posix_acl_access" || name == "system.posix_acl_default"
    }
}

/// Whether any item this process has held may carry a file capability
/// (`security.capability`). The kernel asks for it before the first write to every file
/// (FUSE drops an inode's no-security-attributes mark at each attribute reply, a create's
/// too): while none was ever seen, that question is answered without the replica's state
/// lock. Sticky: noted wherever an item gets attributes (`Item`'s init and `xattrs`), never
/// cleared.
public enum FileCapabilities {
    public static let attribute = "security.capability"
    private static let seen = Atomic<Bool>(false)

    public static var mayExist: Bool { seen.load(ordering: .acquiring) }

    static func note(_ xattrs: [String: Data]) {
        guard !xattrs.isEmpty, xattrs[attribute] != nil, !seen.load(ordering: .relaxed) else { return }
        seen.store(true, ordering: .releasing)
    }
}

