import Foundation

/// A POSIX access control list in the form the kernel hands a FUSE filesystem as the
/// attributes `system.posix_acl_access` and `system.posix_acl_default`: a 4-byte version
/// (2), then one 8-byte entry per rule (tag, permissions, user or group id; little-endian).
/// With `-o acl` the kernel checks access by them; the filesystem keeps them and the mode
/// in step, as ext4 does (`chmod` changes the ACL; an ACL changes the mode; a folder's
/// default ACL is inherited by what is made in it).
struct PosixACL: Equatable, Sendable {
    static let accessAttribute = "system.posix_acl_access"
    static let defaultAttribute = "system.posix_acl_default"

    enum Tag: UInt16 {
        case userObject = 0x01, user = 0x02, groupObject = 0x04, group = 0x08, mask = 0x10, other = 0x20
    }

    struct Entry: Equatable, Sendable {
        var tag: Tag
        /// rwx as 3 bits.
        var permissions: UInt16
        var id: UInt32
    }

    var entries: [Entry]

    private static let version: UInt32 = 2
    private static let undefinedID: UInt32 = .max

    /// nil when `data` is not an ACL of this form (stored values are untrusted), or lacks an
    /// owner, group-owner or other entry.
    init?(_ data: Data) {
        let bytes = [UInt8](data)
        guard bytes.count >= 4, (bytes.count - 4) % 8 == 0, Self.little32(bytes, 0) == Self.version else { return nil }
        var entries: [Entry] = []
        for offset in stride(from: 4, to: bytes.count, by: 8) {
            guard let tag = Tag(rawValue: UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8) else { return nil }
            let permissions = (UInt16(bytes[offset + 2]) | UInt16(bytes[offset + 3]) << 8) & 7
            entries.append(Entry(tag: tag, permissions: permissions, id: Self.little32(bytes, offset + 4)))
        }
        guard [Tag.userObject, .groupObject, .other].allSatisfy({ tag in entries.contains { $0.tag == tag } }) else {
            return nil
        }
        self.entries = entries
    }

    var data: Data {
        var data = Data()
        func append(_ value: UInt32, bytes: Int) {
            for shift in stride(from: 0, to: bytes * 8, by: 8) { data.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        append(Self.version, bytes: 4)
        for entry in entries {
            append(UInt32(entry.tag.rawValue), bytes: 2)
            append(UInt32(entry.permissions), bytes: 2)
            append(entry.id, bytes: 4)
        }
        return data
    }

    /// Only the owner, group-owner and other entries: the mode says all of it, and ext4
    /// keeps no ACL then.
    var isEquivalentToMode: Bool {
        entries.allSatisfy { $0.tag == .userObject || $0.tag == .groupObject || $0.tag == .other }
    }

    /// `mode` with its permission bits as the ACL sets them (the group bits are the mask's,
    /// when there is one); set-id and sticky bits stay.
    func applied(to mode: UInt32) -> UInt32 {
        func bits(_ tag: Tag) -> UInt32? { entries.first { $0.tag == tag }.map { UInt32($0.permissions) } }
        let group = bits(.mask) ?? bits(.groupObject) ?? 0
        return mode & ~0o777 | (bits(.userObject) ?? 0) << 6 | group << 3 | (bits(.other) ?? 0)
    }

    /// After `chmod` to `mode`: the owner and other entries, and the mask (or, without one,
    /// the group-owner entry) take the mode's bits.
    func changingMode(to mode: UInt32) -> PosixACL {
        var acl = self
        let hasMask = entries.contains { $0.tag == .mask }
        for index in acl.entries.indices {
            switch acl.entries[index].tag {
            case .userObject: acl.entries[index].permissions = UInt16(mode >> 6 & 7)
            case .other: acl.entries[index].permissions = UInt16(mode & 7)
            case .mask: acl.entries[index].permissions = UInt16(mode >> 3 & 7)
            case .groupObject where !hasMask: acl.entries[index].permissions = UInt16(mode >> 3 & 7)
            default: break
            }
        }
        return acl
    }

    /// What an item made with `mode` in a folder with this default ACL gets: its mode masked
    /// by the ACL, and the ACL masked by the mode as its access ACL (nil when the mode says
    /// all of it). The umask does not apply then.
    func inherited(mode: UInt32) -> (mode: UInt32, access: PosixACL?) {
        var acl = self
        var mode = mode
        var groupIndex: Int?
        var maskIndex: Int?
        for index in acl.entries.indices {
            switch acl.entries[index].tag {
            case .userObject:
                acl.entries[index].permissions &= UInt16(mode >> 6 & 7)
                mode &= UInt32(acl.entries[index].permissions) << 6 | ~0o700
            case .other:
                acl.entries[index].permissions &= UInt16(mode & 7)
                mode &= UInt32(acl.entries[index].permissions) | ~0o007
            case .groupObject: groupIndex = index
            case .mask: maskIndex = index
            case .user, .group: break
            }
        }
        if let index = maskIndex ?? groupIndex {
            acl.entries[index].permissions &= UInt16(mode >> 3 & 7)
            mode &= UInt32(acl.entries[index].permissions) << 3 | ~0o070
        }
        return (mode, acl.isEquivalentToMode ? nil : acl)
    }

    private static func little32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << ($1 * 8) }
    }
}
