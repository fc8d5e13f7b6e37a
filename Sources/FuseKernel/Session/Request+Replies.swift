import CFuseKernel
import Glibc

/// The typed answers, each encoded as linux/fuse.h lays it out.
extension Request {
    public func entry(_ entry: Entry) {
        reply(ReplyEncoder.entry(entry))
    }

    public func created(_ entry: Entry, _ open: OpenReply) {
        reply(ReplyEncoder.entry(entry), ReplyEncoder.open(open))
    }

    public func attributes(_ attributes: stat, timeout: Double) {
        reply(ReplyEncoder.attributes(attributes, timeout: timeout))
    }

    public func opened(_ open: OpenReply) {
        reply(ReplyEncoder.open(open))
    }

    public func written(_ count: Int) {
        var out = fuse_write_out()
        out.size = UInt32(clamping: count)
        reply(out)
    }

    public func seeked(to offset: UInt64) {
        var out = fuse_lseek_out()
        out.offset = offset
        reply(out)
    }

    /// The size an attribute value or list would take (a `getxattr` or `listxattr` of size 0).
    public func xattrSize(_ size: Int) {
        var out = fuse_getxattr_out()
        out.size = UInt32(clamping: size)
        reply(out)
    }

    public func statfs(_ info: statvfs) {
        reply(ReplyEncoder.statfs(info))
    }

    public func reply(bytes: [UInt8]) {
        bytes.withUnsafeBytes { reply(bytes: $0) }
    }
}
