import Foundation
import Testing

@testable import ContainerFormat

/// Queued local changes are stored as protobuf (those queued as JSON by earlier versions are
/// rewritten by the state database's migration: StateDatabaseTests).
struct LocalChangeCodingTests {
    private let chunks = (0..<3).map { ChunkRef(hash: ChunkHash(of: Data("chunk \($0)".utf8)), size: UInt32(100 + $0)) }

    /// Every kind of operation, with every optional field both set and absent.
    private var changes: [LocalChange] {
        var pendingCreate = ItemOperation.Create(
            id: ItemID("a"), parent: ItemID("folder"), name: "n \"é\u{1F600}", kind: .file, mode: 0o640,
            mtime: Timestamp(seconds: -7, nanoseconds: 999_999_999), content: Content(size: 303, chunks: chunks),
            xattrs: ["user.x": Data([0, 255]), "user.b": Data()])
        pendingCreate.contentPending = true
        pendingCreate.owner = Owner(uid: 1000, gid: 0)
        var pendingUpdate = ItemOperation.Update(
            id: ItemID("a"), base: 9, content: Content(size: 303, chunks: chunks), mode: 0o600,
            mtime: Timestamp(seconds: 5, nanoseconds: 1), xattrs: [:])
        pendingUpdate.contentPending = false
        pendingUpdate.owner = Owner(uid: 0, gid: 4_000_000_000)
        return [
            LocalChange(localID: 1, time: Timestamp(seconds: 1_700_000_000, nanoseconds: 5), ops: [.create(pendingCreate)]),
            LocalChange(
                localID: 2, time: .zero,
                ops: [
                    .create(.init(id: ItemID("l"), parent: .root, name: "link", kind: .symlink, mode: 0o777, mtime: .zero, target: "../x")),
                    .create(.init(id: ItemID("d"), parent: .root, name: "dir", kind: .folder, mode: 0o755, mtime: .zero)),
                    .create(.init(id: ItemID("p"), parent: .root, name: "pipe", kind: .fifo, mode: 0o600, mtime: .zero)),
                    .create(.init(id: ItemID("c"), parent: .root, name: "null", kind: .characterDevice, mode: 0o666, mtime: .zero, device: 259)),
                    .create(.init(id: ItemID("h"), parent: ItemID("d"), name: "again", kind: .hardLink, mode: 0, mtime: .zero, linkedItem: ItemID("p"))),
                    .update(pendingUpdate),
                    .update(.init(id: ItemID("a"), base: 0, mtime: Timestamp(seconds: 3))),
                    .update(.init(id: ItemID("a"), base: 4, content: .empty)),
                    .move(.init(id: ItemID("a"), base: 10, parent: ItemID("d"), name: "moved")),
                    .delete(.init(id: ItemID("l"), base: 0)),
                ],
                dependencies: [2: 1, 6: 1]),
        ]
    }

    @Test("a queued change's protobuf form restores every field")
    func roundTrip() throws {
        for change in changes {
            let data = LocalChangeCoding.encode(change)
            #expect(data.first != UInt8(ascii: "{"))
            #expect(try LocalChangeCoding.decode(data) == change)
        }
    }

    @Test("a journal entry reads back equal to the commit written, as JSON and as protobuf (a device applies its own entries without reading them back)")
    func commitRoundTrip() throws {
        let ops = changes.flatMap(\.ops)
        for uploaded: [UInt64] in [[], [3, 7]] {
            var commit = Commit(
                commitID: "c", device: "dév", deviceID: "d", time: Timestamp(seconds: 1_700_000_000, nanoseconds: 5),
                ops: ops, uploaded: uploaded)
            if uploaded.isEmpty {
                commit.policy = RetentionPolicy(versions: 60, deleted: 0, grace: 7)
                commit.expire = Expiry(versionsBefore: Timestamp(seconds: 9, nanoseconds: 1), deletedBefore: .zero)
                let pack = Pack([(ChunkHash(of: Data("a".utf8)), Data("a".utf8)), (ChunkHash(of: Data("bc".utf8)), Data("bc".utf8))])
                commit.packs = [PackRecord(id: pack.id, chunks: pack.chunks)]
            }
            let json = JournalCoding.encode(commit, as: .json)
            let binary = JournalCoding.encode(commit, as: .binary)
            #expect(json.first == UInt8(ascii: "{") && binary.first != UInt8(ascii: "{"))
            #expect(try JournalCoding.decode(json) == commit)
            #expect(try JournalCoding.decode(binary) == commit)
            #expect(binary.count * 2 < json.count)
        }
    }

    @Test("a protobuf journal entry keeps the operations that decode and counts the others; a truncated one is an error")
    func binaryEntryWithABadOperation() throws {
        let good = changes[0].ops[0]
        var message = JournalEntryMessage()
        message.format = 5
        message.commit = "c"
        message.ops = [OperationMessage(good), OperationMessage(), OperationMessage(good)]
        message.ops[2].create.content.chunkSizes.append(1)
        let commit = try JournalCoding.decode(try message.serializedBytes())
        #expect(commit.ops == [good])
        #expect(commit.droppedOperations == 2)

        var data = JournalCoding.encode(Commit(commitID: "c", device: "d", deviceID: "d", time: .zero, ops: [good]), as: .binary)
        data.removeLast(5)
        #expect(throws: (any Error).self) { try JournalCoding.decode(data) }
    }

    @Test("a malformed queued change is an error")
    func malformed() throws {
        var data = LocalChangeCoding.encode(changes[1])
        data.removeLast(3)
        #expect(throws: (any Error).self) { try LocalChangeCoding.decode(data) }

        var empty = LocalChangeMessage()
        empty.ops = [OperationMessage()]
        #expect(throws: LocalChangeCodingError.self) { try LocalChangeCoding.decode(try empty.serializedBytes()) }

        var badContent = LocalChangeMessage()
        badContent.ops = [OperationMessage(changes[0].ops[0])]
        badContent.ops[0].create.content.chunkSizes.append(1)
        #expect(throws: LocalChangeCodingError.self) { try LocalChangeCoding.decode(try badContent.serializedBytes()) }

        var badDependency = LocalChangeMessage()
        badDependency.dependencies = [-1: 3]
        #expect(throws: LocalChangeCodingError.self) { try LocalChangeCoding.decode(try badDependency.serializedBytes()) }
    }
}
