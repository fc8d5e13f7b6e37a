import CFuseKernel
import Testing

@testable import FuseKernel

#if canImport(Glibc)
import Glibc
#endif

/// Requests as the kernel writes them, decoded into typed values.
struct DecoderTests {
    /// A request: the header, then `body`.
    static func message(_ opcode: fuse_opcode, node: UInt64 = 1, unique: UInt64 = 9, _ body: [UInt8] = []) -> [UInt8] {
        var header = fuse_in_header()
        header.len = UInt32(40 + body.count)
        header.opcode = opcode.rawValue
        header.unique = unique
        header.nodeid = node
        header.uid = 1000
        header.gid = 100
        header.pid = 4321
        return withUnsafeBytes(of: header) { Array($0) } + body
    }

    static func bytes<Value>(_ value: Value) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    static func decode(_ message: [UInt8]) throws -> IncomingRequest {
        try message.withUnsafeBytes { try RequestDecoder.decode($0) }
    }

    @Test func lookupCarriesTheCallerAndTheNameBytes() throws {
        let request = try Self.decode(Self.message(FUSE_LOOKUP, node: 5, Array("caf\u{e9}".utf8) + [0]))
        #expect(request.unique == 9)
        #expect(request.caller == Caller(uid: 1000, gid: 100, pid: 4321))
        guard case .lookup(let parent, let name) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(parent == 5)
        #expect(name == Array("caf\u{e9}".utf8))
    }

    @Test func renameTwoCarriesBothNamesAndFlags() throws {
        var arguments = fuse_rename2_in()
        arguments.newdir = 7
        arguments.flags = 2
        let request = try Self.decode(Self.message(FUSE_RENAME2, node: 3, Self.bytes(arguments) + Array("a\0bb\0".utf8)))
        guard case .rename(let parent, let name, let newParent, let newName, let flags) = request.operation else {
            Issue.record("\(request.operation)")
            return
        }
        #expect((parent, name, newParent, newName, flags) == (3, Array("a".utf8), 7, Array("bb".utf8), 2))
    }

    @Test func symlinkNamesComeBeforeTheTarget() throws {
        let request = try Self.decode(Self.message(FUSE_SYMLINK, node: 1, Array("link\0/some/target\0".utf8)))
        guard case .symlink(_, let name, let target) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(name == Array("link".utf8))
        #expect(target == Array("/some/target".utf8))
    }

    /// `O_TMPFILE` (`__O_TMPFILE | O_DIRECTORY`: a macro Swift does not import).
    static let tmpfileFlag: Int32 = 0o20_200_000

    @Test func tmpfileCarriesTheArgumentsOfACreate() throws {
        var arguments = fuse_create_in()
        arguments.flags = UInt32(O_RDWR | Self.tmpfileFlag)
        arguments.mode = 0o100640
        arguments.umask = 0o022
        let request = try Self.decode(Self.message(FUSE_TMPFILE, node: 4, Self.bytes(arguments) + Array("/\0".utf8)))
        guard case .tmpfile(let parent, let mode, let umask, let flags) = request.operation else {
            Issue.record("\(request.operation)")
            return
        }
        #expect((parent, mode, umask, flags) == (4, 0o100640, 0o022, O_RDWR | Self.tmpfileFlag))
    }

    @Test func writeCarriesItsBytesAfterTheArguments() throws {
        var arguments = fuse_write_in()
        arguments.fh = 11
        arguments.offset = 4096
        arguments.size = 3
        arguments.write_flags = UInt32(FUSE_WRITE_KILL_SUIDGID)
        let request = try Self.decode(Self.message(FUSE_WRITE, node: 8, Self.bytes(arguments) + [1, 2, 3]))
        guard case .write(let node, let handle, let offset, let bytes, let kills) = request.operation else {
            Issue.record("\(request.operation)")
            return
        }
        #expect((node, handle, offset) == (8, 11, 4096))
        #expect(Array(bytes) == [1, 2, 3])
        #expect(kills)
    }

    @Test func setattrKeepsOnlyTheFieldsItActsOn() throws {
        var arguments = fuse_setattr_in()
        arguments.valid = UInt32(FATTR_MODE | FATTR_FH | FATTR_LOCKOWNER | FATTR_MTIME | FATTR_KILL_SUIDGID)
        arguments.fh = 4
        arguments.mode = 0o600
        arguments.mtime = 100
        arguments.mtimensec = 5
        let request = try Self.decode(Self.message(FUSE_SETATTR, node: 2, Self.bytes(arguments)))
        guard case .setattr(_, let change) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(change.fields == AttributeChange.mode | AttributeChange.mtime)
        #expect(change.handle == 4)
        #expect(change.killsPrivileges)
        #expect(change.values.st_mode == 0o600)
        #expect(change.values.st_mtim.tv_sec == 100 && change.values.st_mtim.tv_nsec == 5)
    }

    @Test func batchForgetListsEveryNode() throws {
        var batch = fuse_batch_forget_in()
        batch.count = 2
        var first = fuse_forget_one()
        first.nodeid = 5
        first.nlookup = 3
        var second = fuse_forget_one()
        second.nodeid = 6
        second.nlookup = 1
        let request = try Self.decode(
            Self.message(FUSE_BATCH_FORGET, node: 0, Self.bytes(batch) + Self.bytes(first) + Self.bytes(second)))
        guard case .forget(let list) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(list.map(\.node) == [5, 6])
        #expect(list.map(\.count) == [3, 1])
    }

    @Test func initJoinsFlagsTwoAboveBitThirtyTwo() throws {
        var arguments = fuse_init_in()
        arguments.major = 7
        arguments.minor = 45
        arguments.flags = UInt32(FUSE_INIT_EXT) | UInt32(FUSE_ASYNC_READ)
        arguments.flags2 = 1 << 5
        let request = try Self.decode(Self.message(FUSE_INIT, node: 0, Self.bytes(arguments)))
        guard case .initialize(let offered) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(offered.minor == 45)
        #expect(Capabilities(rawValue: offered.flags).contains(.passthrough))
        #expect(Capabilities(rawValue: offered.flags).contains(.asyncRead))
    }

    @Test func setxattrTakesTheShortArgumentsThenNameThenValue() throws {
        let body = Self.bytes(UInt32(3)) + Self.bytes(UInt32(1)) + Array("user.x\0".utf8) + [7, 8, 9]
        let request = try Self.decode(Self.message(FUSE_SETXATTR, node: 4, body))
        guard case .setxattr(_, let name, let value, let flags) = request.operation else {
            Issue.record("\(request.operation)")
            return
        }
        #expect(name == Array("user.x".utf8))
        #expect(value == [7, 8, 9])
        #expect(flags == 1)
    }

    @Test func aTruncatedRequestIsMalformedNotACrash() {
        var arguments = fuse_write_in()
        arguments.size = 100
        // Says 100 bytes follow; 3 do.
        let message = Self.message(FUSE_WRITE, unique: 77, Self.bytes(arguments) + [1, 2, 3])
        #expect(throws: MalformedRequest(opcode: FUSE_WRITE.rawValue, unique: 77)) { try Self.decode(message) }
        #expect(throws: MalformedRequest(opcode: FUSE_LOOKUP.rawValue, unique: 9)) {
            try Self.decode(Self.message(FUSE_LOOKUP, Array("no-terminator".utf8)))
        }
        #expect(throws: MalformedRequest.self) { try Self.decode([1, 2, 3]) }
    }

    @Test func unknownOpcodesAreUnsupported() throws {
        let request = try Self.decode(Self.message(fuse_opcode(rawValue: 52)))
        guard case .unsupported(let opcode) = request.operation else { Issue.record("\(request.operation)"); return }
        #expect(opcode == 52)
    }
}

/// Listings as the kernel reads them: records padded to 8 bytes, cut where the next one
/// would not fit.
struct DirectoryBufferTests {
    @Test func recordsArePaddedAndStopWhenFull() {
        var buffer = DirectoryBuffer(capacity: 64)
        let first = buffer.add(name: Array(".".utf8), inode: 1, mode: S_IFDIR, nextOffset: 1)
        let second = buffer.add(name: Array("name".utf8), inode: 9, mode: S_IFREG, nextOffset: 2)
        // 24 + 1 -> 32, 24 + 4 -> 32: full.
        let third = buffer.add(name: Array("x".utf8), inode: 10, mode: S_IFREG, nextOffset: 3)
        #expect(first && second && !third)
        buffer.withBytes { bytes in
            #expect(bytes.count == 64)
            #expect(bytes.load(fromByteOffset: 32, as: UInt64.self) == 9)
            #expect(bytes.load(fromByteOffset: 40, as: UInt64.self) == 2)
            #expect(bytes.load(fromByteOffset: 48, as: UInt32.self) == 4)
            #expect(bytes.load(fromByteOffset: 52, as: UInt32.self) == S_IFREG >> 12)
            #expect(Array(bytes[56..<60]) == Array("name".utf8))
        }
    }

    @Test func plusRecordsLeadWithTheEntryAndDotsHaveNodeZero() {
        var buffer = DirectoryBuffer(capacity: 4096)
        let added = buffer.addPlus(entry: nil, name: Array("..".utf8), inode: 3, mode: S_IFDIR, nextOffset: 2)
        #expect(added)
        buffer.withBytes { bytes in
            #expect(bytes.count == 128 + 24 + 8)
            #expect(bytes.load(fromByteOffset: 0, as: UInt64.self) == 0)  // nodeid: not looked up
            #expect(bytes.load(fromByteOffset: 128, as: UInt64.self) == 3)  // dirent ino
        }
    }
}
