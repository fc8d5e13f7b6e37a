import ContainerFormat
import Foundation
import Testing

@testable import Replica

/// `chown` in one hold of the state lock (`Replica.giveAway`): the new owner, and what a file
/// given away loses as on Linux (set-user-id, set-group-id with group execute, a capability).
struct GiveAwayTests {
    private static let capability = Data([1, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])

    @Test("a file given away takes the owner decided and loses its set-id bits and capability")
    func givenAwayLosesPrivileges() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let id = try a.makeFile("tool", in: .root, mode: 0o6755).id
        try a.setUserAttribute(FileCapabilities.attribute, of: id, to: Self.capability)
        // Not executable by its group: the set-group-id bit means mandatory locking and stays.
        let locked = try a.makeFile("locked", in: .root, mode: 0o2745).id
        var seen: [ItemAttributes] = []
        let given = try a.giveAway(id) { current in
            seen.append(current)
            return Owner(uid: 1000, gid: 100)
        }
        #expect(seen.map(\.mode) == [0o6755])
        #expect(given.owner == Owner(uid: 1000, gid: 100))
        #expect(given.mode == 0o755)
        #expect(given == (try a.attributes(of: id)))
        #expect(try a.userAttribute(FileCapabilities.attribute, of: id) == nil)
        #expect(try a.giveAway(locked) { _ in Owner(uid: 7, gid: 7) }.mode == 0o2745)
        await a.stop()
    }

    @Test("a refused chown changes nothing")
    func refusedChangesNothing() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let id = try a.makeFile("tool", in: .root, mode: 0o4755).id
        #expect(throws: ReplicaError.notPermitted("no")) {
            _ = try a.giveAway(id) { _ throws(ReplicaError) in throw .notPermitted("no") }
        }
        let after = try a.attributes(of: id)
        #expect(after.mode == 0o4755)
        #expect(after.owner == .root)
        #expect(throws: ReplicaError.notFound) { _ = try a.giveAway(ItemID("nothere")) { _ in .root } }
        await a.stop()
    }

    @Test("a file being written keeps its new owner and mode for its close")
    func fileBeingWritten() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let (_, file) = try a.makeFileInMemory("new", in: .root, mode: 0o4750)
        #expect(Data("x".utf8).withUnsafeBytes { a.writeInMemory(file.id, offset: 0, bytes: $0) })
        let given = try a.giveAway(file.id) { _ in Owner(uid: 5, gid: 6) }
        #expect(given.owner == Owner(uid: 5, gid: 6))
        #expect(given.mode == 0o750)
        #expect(a.closeInMemory(file))
        let closed = try a.attributes(of: file.id)
        #expect(closed.owner == Owner(uid: 5, gid: 6))
        #expect(closed.mode == 0o750)
        #expect(closed.size == 1)
        await a.stop()
    }
}
