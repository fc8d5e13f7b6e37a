import ContainerFormat
import Foundation
import Testing
import TestSupport

/// Devices making random changes and pushing them in random interleavings through one
/// journal (put-if-absent semantics: a push fails when the device is behind).
struct Simulation {
    struct Device {
        var state: DeviceView
        /// The journal's tree as far as this device read it (the replica's sync engine's).
        var synced = Tree()
        var nextLocalID: Int64 = 1
        var inFlight: Batch?
        let name: String
    }

    var journal: [Commit] = []
    var devices: [Device]
    var random: SeededRandom
    var step = 0
    /// Every content token ever written, and those a device replaced or deleted while
    /// seeing them (those may legitimately be gone).
    var written: Set<String> = []
    var replacedWhileSeen: Set<String> = []
    var tokenOfHash: [ChunkHash: String] = [:]

    init(devices count: Int, seed: UInt64) {
        random = SeededRandom(seed: seed)
        devices = (0..<count).map { Device(state: DeviceView(device: "dev\($0)", synced: Tree()), name: "dev\($0)") }
    }

    mutating func token() -> (String, Content) {
        step += 1
        let token = "t\(step)"
        let data = Data(token.utf8)
        let hash = ChunkHash(of: data)
        tokenOfHash[hash] = token
        written.insert(token)
        return (token, Content(size: UInt64(data.count), chunks: [ChunkRef(hash: hash, size: UInt32(data.count))]))
    }

    func tokens(in item: Item) -> [String] {
        item.chunks.compactMap { tokenOfHash[$0.hash] }
    }

    mutating func randomLocalChange(_ d: Int) {
        let view = devices[d].state.view
        let live = view.allItems.filter { !$0.deleted && $0.id != .root }
        let folders = [ItemID.root] + live.filter { $0.kind == .folder }.map(\.id)
        let files = live.filter { $0.kind == .file }
        var ops: [(ItemOperation, BaseVersion?)] = []
        let names = ["a.txt", "b.txt", "c", "notes.md", "x"]
        let time = Timestamp(seconds: 1_700_000_000 + Int64(step))
        switch Int.random(in: 0..<10, using: &random) {
        case 0...2:
            let (_, content) = token()
            ops = [(.create(.init(
                id: ItemID("i\(step)-\(d)"), parent: folders.randomElement(using: &random)!,
                name: names.randomElement(using: &random)!, kind: .file, mode: 0o644, mtime: time,
                content: content)), nil)]
        case 3:
            step += 1
            ops = [(.create(.init(
                id: ItemID("f\(step)-\(d)"), parent: folders.randomElement(using: &random)!,
                name: ["dir", "Documents"].randomElement(using: &random)!, kind: .folder, mode: 0o755,
                mtime: time)), nil)]
        case 4...6:
            guard let target = files.randomElement(using: &random) else { return }
            replacedWhileSeen.formUnion(tokens(in: target))
            let (_, content) = token()
            ops = [(.update(.init(id: target.id, base: 0, content: content, mtime: time)), devices[d].state.base(of: target.id))]
        case 7:
            guard let target = live.randomElement(using: &random) else { return }
            let parent = folders.randomElement(using: &random)!
            ops = [(.move(.init(id: target.id, base: 0, parent: parent, name: names.randomElement(using: &random)!)),
                    devices[d].state.base(of: target.id))]
        default:
            guard let target = live.randomElement(using: &random) else { return }
            // Like `rm -r`: everything the device sees below, deepest first, then the item.
            var order: [Item] = []
            func collect(_ item: Item) {
                for child in view.children(of: item.id) { collect(child) }
                order.append(item)
            }
            collect(target)
            for item in order {
                replacedWhileSeen.formUnion(tokens(in: item))
                ops.append((.delete(.init(id: item.id, base: 0)), devices[d].state.base(of: item.id)))
            }
        }
        let change = devices[d].state.makeChange(localID: devices[d].nextLocalID, time: time, ops)
        devices[d].nextLocalID += 1
        devices[d].state.append(change)
    }

    mutating func pull(_ d: Int) {
        let from = Int(devices[d].synced.head)
        guard from < journal.count else { return }
        let entries = (from..<journal.count).map { (seq: UInt64($0 + 1), commit: Optional(journal[$0])) }
        let folded = devices[d].synced.fold(entries, ourBatch: devices[d].inFlight)
        let outcome = devices[d].state.land(folded, on: devices[d].synced, ourBatch: devices[d].inFlight)
        if outcome.landedBatch { devices[d].inFlight = nil }
    }

    /// One put-if-absent attempt; false when the device was behind.
    @discardableResult
    mutating func push(_ d: Int) -> Bool {
        guard !devices[d].state.pending.isEmpty else { return true }
        if devices[d].inFlight == nil {
            let ids = devices[d].state.nextBatchIDs(maximumOperations: Int.random(in: 1...6, using: &random))
            devices[d].inFlight = Batch(commitID: "c\(d)-\(ids.first!)", localIDs: ids)
        }
        let seq = devices[d].synced.head + 1
        guard seq == UInt64(journal.count + 1) else { return false }
        journal.append(devices[d].state.commit(for: devices[d].inFlight!, device: devices[d].name, deviceID: "\(d)", seq: seq))
        return true
    }

    mutating func run(steps: Int) {
        for _ in 0..<steps {
            let d = Int.random(in: 0..<devices.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0...2: randomLocalChange(d)
            case 3...4: push(d)
            default: pull(d)
            }
        }
        // Settle: everyone pushes everything and reads everything.
        var rounds = 0
        while devices.contains(where: { !$0.state.pending.isEmpty }) || devices.contains(where: { Int($0.synced.head) < journal.count }) {
            for d in devices.indices {
                pull(d)
                push(d)
                pull(d)
            }
            rounds += 1
            precondition(rounds < 10_000, "did not settle")
        }
    }
}

struct ConvergenceTests {
    /// Fixed seeds, plus random ones (3, or ICLOUDFS_EXTRA_SEEDS for a longer soak), or the
    /// one ICLOUDFS_TEST_SEED names (to replay a printed seed).
    static let seeds: [UInt64] = [1, 2, 3, 42, 1234, 99_991]
        + (ProcessInfo.processInfo.environment["ICLOUDFS_TEST_SEED"].flatMap(UInt64.init).map { [$0] }
            ?? (0..<(Int(ProcessInfo.processInfo.environment["ICLOUDFS_EXTRA_SEEDS"] ?? "") ?? 3)).map { _ in
                UInt64.random(in: 0...UInt64.max)
            })

    @Test("three devices converge to identical trees and no written version is lost", arguments: seeds)
    func converge(seed: UInt64) {
        var simulation = Simulation(devices: 3, seed: seed)
        simulation.run(steps: 600)
        let reference = simulation.devices[0].synced
        for device in simulation.devices {
            #expect(device.synced == reference, "seed \(seed): \(device.name) differs")
            #expect(device.state.view == device.synced, "seed \(seed): \(device.name) view is not the journal's tree")
        }
        let present = Set(reference.allItems.filter { !$0.deleted }.flatMap(simulation.tokens(in:)))
        let lost = simulation.written.subtracting(simulation.replacedWhileSeen).subtracting(present)
        #expect(lost.isEmpty, "seed \(seed): lost \(lost.sorted())")
        #expect(simulation.journal.count > 20, "seed \(seed): too little happened")
        let copies = reference.allItems.filter { !$0.deleted && $0.conflictOf != nil }.count
        print("seed \(seed): \(simulation.journal.count) commits, \(reference.count) items, \(copies) conflict copies")
    }

    @Test("a snapshot restores the same tree")
    func snapshotRoundTrip() throws {
        var simulation = Simulation(devices: 2, seed: 5)
        simulation.run(steps: 300)
        let tree = simulation.devices[0].synced
        let data = SnapshotCoding.encode(Snapshot(of: tree))
        let restored = try SnapshotCoding.decode(data).tree
        #expect(restored == tree)
        #expect(SnapshotCoding.encode(Snapshot(of: restored)) == data)
    }
}

struct BatchTests {
    @Test("a push batch stops at the chunk-reference bound (versions of large files list every chunk), but always holds one change")
    func batchesBoundedByChunks() {
        func change(_ n: Int64, chunks: Int) -> LocalChange {
            let refs = (0..<chunks).map { ChunkRef(hash: ChunkHash(of: Data("\(n)-\($0)".utf8)), size: 1) }
            return LocalChange(localID: n, time: .zero, ops: [.create(.init(
                id: ItemID("file-\(n)"), parent: .root, name: "f\(n)", kind: .file, mode: 0o644, mtime: .zero,
                content: Content(size: UInt64(chunks), chunks: refs)))])
        }
        let view = DeviceView(device: "d", synced: Tree(), pending: (1...5).map { change($0, chunks: 4000) })
        #expect(view.nextBatchIDs(maximumOperations: 1000, maximumChunks: 10_000) == [1, 2])
        #expect(view.nextBatchIDs(maximumOperations: 1000) == [1, 2, 3, 4, 5])
        let huge = DeviceView(device: "d", synced: Tree(), pending: [change(1, chunks: 20_000), change(2, chunks: 1)])
        #expect(huge.nextBatchIDs(maximumOperations: 1000, maximumChunks: 10_000) == [1])
    }
}
