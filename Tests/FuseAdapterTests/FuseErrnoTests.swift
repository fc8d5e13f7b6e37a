import BlobStore
import ContainerFormat
import Foundation
import Logging
import SystemPackage
import Testing

@testable import FuseAdapter
@testable import Replica

#if canImport(Glibc)
import Glibc
#endif

/// The one mapping from the replica's errors to the errno values programs see.
struct FuseErrnoTests {
    init() {
        // The mapping logs each error it maps; the test needs none of it.
        FuseLog.shared.withLock { $0 = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() } }
    }

    static let longName = String(repeating: "n", count: ItemName.maximumBytes + 1)

    /// Every case of `ReplicaError`, with the errno a program must get for it.
    static let cases: [(ReplicaError, Int32)] = [
        (.notFound, ENOENT),
        (.exists, EEXIST),
        (.notEmpty, ENOTEMPTY),
        (.notAFolder, ENOTDIR),
        (.isAFolder, EISDIR),
        // The replica's own words for a name too long, and for other bad names.
        (.invalidName(ItemName.problem(with: longName)!), ENAMETOOLONG),
        (.invalidName(ItemName.problem(with: "")!), EINVAL),
        (.invalidName(ItemName.problem(with: "..")!), EINVAL),
        (.invalidName(ItemName.problem(with: "a/b")!), EINVAL),
        (.invalidArgument("offset past the end"), EINVAL),
        (.busy("open"), EBUSY),
        (.notSupported("fifo"), ENOTSUP),
        (.notPermitted("chown"), EPERM),
        (.contentNotUploaded("the device that wrote this file has not finished uploading it"), ETIMEDOUT),
        // A full cache disk is not an I/O error: programs can free space and go on.
        (.local("cache disk full", errno: ENOSPC), ENOSPC),
        (.local("quota", errno: EDQUOT), EDQUOT),
        (.local("file size limit", errno: EFBIG), EFBIG),
        (.local("cannot read the cache file"), EIO),
        (.identityMismatch("another container"), EIO),
        (.contentLost("queued bytes lost"), EIO),
        (.store(.unavailable("network down")), EIO),
        (.store(.notFound("chunks/ab/abcd")), EIO),
        (.store(.permissionDenied("403")), EIO),
        (.format(.corruptChunk(hash: "abcd")), EIO),
        (.format(.malformed(what: "journal entry 3", why: "truncated")), EIO),
    ]

    @Test("each replica error reaches programs as its own errno", arguments: cases)
    func replicaErrors(error: ReplicaError, errno expected: Int32) {
        #expect(FuseErrno.code(for: error, in: "test") == expected, "\(error)")
    }

    @Test("a name too long is ENAMETOOLONG only when that is the reason; other invalid names are EINVAL")
    func nameTooLongOnlyForLength() throws {
        let atLimit = String(repeating: "n", count: ItemName.maximumBytes)
        #expect(ItemName.problem(with: atLimit) == nil)
        // Four bytes per character in UTF-8: 64 of them are 256 bytes.
        let wide = String(repeating: "\u{1F600}", count: 64)
        let problem = try #require(ItemName.problem(with: wide))
        #expect(FuseErrno.code(for: ReplicaError.invalidName(problem), in: "test") == ENAMETOOLONG)
        #expect(FuseErrno.code(for: ReplicaError.invalidName("name contains NUL"), in: "test") == EINVAL)
    }

    @Test("errors that are not the replica's (a raw store error, a system error) are EIO, never their own code")
    func foreignErrorsAreEIO() {
        #expect(FuseErrno.code(for: StoreError.notFound("k"), in: "test") == EIO)
        #expect(FuseErrno.code(for: StoreError.alreadyExists("k"), in: "test") == EIO)
        #expect(FuseErrno.code(for: POSIXError(.ENOENT), in: "test") == EIO)
        #expect(FuseErrno.code(for: Errno.noSpace, in: "test") == EIO)
        #expect(FuseErrno.code(for: CocoaError(.fileNoSuchFile), in: "test") == EIO)
    }

    @Test("a system error wrapped by the replica keeps ENOSPC, EDQUOT and EFBIG; any other becomes EIO")
    func wrappedSystemErrors() {
        let kept: [(any Error, Int32)] = [
            (Errno.noSpace, ENOSPC), (POSIXError(.EDQUOT), EDQUOT), (Errno.fileTooLarge, EFBIG),
        ]
        for (error, expected) in kept {
            #expect(FuseErrno.code(for: ReplicaError.wrapping(error), in: "test") == expected, "\(error)")
        }
        let lost: [any Error] = [Errno.noSuchFileOrDirectory, Errno.permissionDenied, POSIXError(.EACCES), CocoaError(.fileReadUnknown)]
        for error in lost {
            #expect(FuseErrno.code(for: ReplicaError.wrapping(error), in: "test") == EIO, "\(error)")
        }
        // A replica or store error wrapped stays what it was.
        #expect(FuseErrno.code(for: ReplicaError.wrapping(ReplicaError.notEmpty), in: "test") == ENOTEMPTY)
        #expect(FuseErrno.code(for: ReplicaError.wrapping(StoreError.unavailable("down")), in: "test") == EIO)
    }
}
