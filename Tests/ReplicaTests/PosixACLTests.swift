import Foundation
import Testing

@testable import Replica

/// POSIX ACLs as the kernel hands them to FUSE; the mode rules are ext4's (the conformance
/// area `acl` compares whole sequences with ext4 on real mounts).
struct PosixACLTests {
    private func acl(_ entries: [(PosixACL.Tag, UInt16, UInt32)]) -> PosixACL {
        var data = Data([2, 0, 0, 0])
        for (tag, permissions, id) in entries {
            data.append(contentsOf: [UInt8(tag.rawValue & 0xFF), UInt8(tag.rawValue >> 8), UInt8(permissions), 0])
            data.append(contentsOf: withUnsafeBytes(of: id.littleEndian) { Array($0) })
        }
        return PosixACL(data)!
    }

    @Test("the kernel's form round-trips; malformed or incomplete lists are refused")
    func coding() {
        let list = acl([(.userObject, 6, .max), (.user, 7, 1000), (.groupObject, 4, .max), (.mask, 6, .max), (.other, 0, .max)])
        #expect(PosixACL(list.data) == list)
        #expect(PosixACL(Data([2, 0, 0, 0, 1])) == nil)  // not whole entries
        #expect(PosixACL(Data([1, 0, 0, 0])) == nil)  // another version
        #expect(PosixACL(Data([2, 0, 0, 0, 0x40, 0, 7, 0, 0, 0, 0, 0])) == nil)  // unknown tag
        #expect(PosixACL(acl([(.userObject, 6, .max), (.other, 0, .max), (.groupObject, 4, .max)]).data.prefix(12)) == nil)
    }

    @Test("mode from an ACL (the mask's bits for the group), chmod into an ACL")
    func modes() {
        let list = acl([(.userObject, 6, .max), (.user, 7, 1000), (.groupObject, 4, .max), (.mask, 6, .max), (.other, 0, .max)])
        #expect(list.applied(to: 0o4777) == 0o4660)
        #expect(!list.isEquivalentToMode)
        let changed = list.changingMode(to: 0o751)
        #expect(changed.entries.map(\.permissions) == [7, 7, 4, 5, 1])  // named entries stay; the mask moves
        let plain = acl([(.userObject, 7, .max), (.groupObject, 5, .max), (.other, 4, .max)])
        #expect(plain.isEquivalentToMode && plain.applied(to: 0) == 0o754)
        #expect(plain.changingMode(to: 0o640).entries.map(\.permissions) == [6, 4, 0])
    }

    @Test("a default ACL masks a new item's mode and becomes its access ACL, as posix_acl_create does")
    func inheritance() {
        let inherited = acl([(.userObject, 7, .max), (.user, 7, 1000), (.groupObject, 5, .max), (.mask, 7, .max), (.other, 0, .max)])
        let (mode, access) = inherited.inherited(mode: 0o666)
        #expect(mode == 0o660)
        #expect(access?.entries.map(\.permissions) == [6, 7, 5, 6, 0])
        // Without named entries the mode says it all: no access ACL.
        let (plainMode, plainAccess) = acl([(.userObject, 7, .max), (.groupObject, 5, .max), (.other, 5, .max)]).inherited(mode: 0o777)
        #expect(plainMode == 0o755 && plainAccess == nil)
    }
}
