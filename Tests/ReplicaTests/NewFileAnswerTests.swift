import ContainerFormat
import Foundation
import Synchronization
import Testing

@testable import Replica

/// A new file kept in memory is answered once its create is decided, before it is queued
/// (`Replica.NewFileAnswer`): what the answer says must be what the replica shows after.
struct NewFileAnswerTests {
    @Test("the early answer shows what the replica shows of the new file after its create")
    func earlyAnswerMatchesTheItem() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        // A setgid folder: the file takes the folder's group, not the creator's.
        let folder = try a.makeFolder("d", in: .root, mode: 0o2775, owner: Owner(uid: 1000, gid: 50)).id
        let answered = Mutex<[ItemAttributes]>([])
        for (index, mode) in [UInt32(0o644), 0o600, 0o4755, 0o2755].enumerated() {
            let owner = Owner(uid: 1000 + UInt32(index), gid: 100)
            let (attributes, file) = try a.makeFileInMemory("f\(index)", in: folder, mode: mode, owner: owner) {
                attributes, _ in answered.withLock { $0.append(attributes) }
            }
            let early = try #require(answered.withLock { $0.last })
            #expect(early == attributes)
            #expect(early == (try a.attributes(of: file.id)), "mode \(String(mode, radix: 8))")
            #expect(early.owner == Owner(uid: owner.uid, gid: 50))
            #expect(a.closeInMemory(file))
        }
        #expect(answered.withLock { $0.count } == 4)
        await a.stop()
    }

    @Test("a create that fails is not answered")
    func failedCreateIsNotAnswered() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        _ = try a.makeFile("taken", in: .root, mode: 0o644)
        let answers = Atomic(0)
        #expect(throws: ReplicaError.exists) {
            _ = try a.makeFileInMemory("taken", in: .root, mode: 0o644) { _, _ in answers.add(1, ordering: .relaxed) }
        }
        #expect(throws: ReplicaError.self) {
            _ = try a.makeFileInMemory("x", in: ItemID("nothere"), mode: 0o644) { _, _ in
                answers.add(1, ordering: .relaxed)
            }
        }
        #expect(answers.load(ordering: .relaxed) == 0)
        await a.stop()
    }
}
