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
