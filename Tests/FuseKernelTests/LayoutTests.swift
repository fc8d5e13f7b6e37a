import CFuseKernel
import Testing

@testable import FuseKernel

#if canImport(Glibc)
import Glibc
#endif

/// The protocol's structures as the kernel lays them out (linux/fuse.h): a wrong size is a
/// mount that answers garbage.
struct LayoutTests {
    @Test func headerSizesMatchTheKernelHeader() {
        #expect(MemoryLayout<fuse_in_header>.size == 40)
        #expect(MemoryLayout<fuse_out_header>.size == 16)
        #expect(MemoryLayout<fuse_entry_out>.size == 128)
        #expect(MemoryLayout<fuse_attr_out>.size == 104)
        #expect(MemoryLayout<fuse_attr>.size == 88)
        #expect(MemoryLayout<fuse_open_out>.size == 16)
        #expect(MemoryLayout<fuse_init_in>.size == 64)
        #expect(MemoryLayout<fuse_init_out>.size == 64)
        #expect(MemoryLayout<fuse_dirent>.size == 24)
        #expect(MemoryLayout<fuse_setattr_in>.size == 88)
        #expect(MemoryLayout<fuse_read_in>.size == 40)
        #expect(MemoryLayout<fuse_write_in>.size == 40)
        #expect(MemoryLayout<fuse_write_out>.size == 8)
        #expect(MemoryLayout<fuse_statfs_out>.size == 80)
        #expect(MemoryLayout<fuse_notify_inval_inode_out>.size == 24)
        #expect(MemoryLayout<fuse_notify_inval_entry_out>.size == 16)
        #expect(MemoryLayout<fuse_notify_delete_out>.size == 24)
        #expect(MemoryLayout<icloudfs_fuse_backing_map>.size == 16)
    }

    @Test func backingIDIsAtOffsetTwelveOfTheOpenReply() {
        let out = ReplyEncoder.open(OpenReply(handle: 0x0102_0304_0506_0708, flags: .passthrough, backingID: 7))
        withUnsafeBytes(of: out) { bytes in
            #expect(bytes.load(fromByteOffset: 0, as: UInt64.self) == 0x0102_0304_0506_0708)
            #expect(bytes.load(fromByteOffset: 8, as: UInt32.self) == 0x80)
            #expect(bytes.load(fromByteOffset: 12, as: Int32.self) == 7)
        }
    }

    @Test func maxStackDepthFollowsFlags2InTheInitReply() {
        #expect(MemoryLayout<fuse_init_out>.offset(of: \.flags2) == 32)
        #expect(MemoryLayout<fuse_init_out>.offset(of: \.unused) == 36)  // max_stack_depth since 7.40
        #expect(Capabilities.passthrough.rawValue == 1 << 37)
    }

    @Test func entryCarriesTimeoutsAsSecondsAndNanoseconds() {
        var attributes = stat()
        attributes.st_ino = 42
        attributes.st_mode = S_IFREG | 0o644
        attributes.st_size = 5
        attributes.st_mtim = timespec(tv_sec: 1_700_000_000, tv_nsec: 123)
        let out = ReplyEncoder.entry(
            Entry(node: 42, generation: 1, attributes: attributes, entryTimeout: 1.5, attributeTimeout: 0))
        #expect(out.nodeid == 42)
        #expect(out.generation == 1)
        #expect(out.entry_valid == 1 && out.entry_valid_nsec == 500_000_000)
        #expect(out.attr_valid == 0 && out.attr_valid_nsec == 0)
        #expect(out.attr.ino == 42 && out.attr.size == 5 && out.attr.mode == S_IFREG | 0o644)
        #expect(out.attr.mtime == 1_700_000_000 && out.attr.mtimensec == 123)
    }
}
