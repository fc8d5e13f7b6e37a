import ContainerFormat
import Foundation
import Replica
import Testing
import TestSupport

/// Three real replicas over one directory store: random local changes through the replica
/// API, pushes and pulls in random interleavings; then all settle.
struct ReplicaConvergenceTests {
    /// Three fixed seeds and one new each run (`ICLOUDFS_TEST_SEED=N` replays it); each run
    /// prints its seed first.
    static let seeds: [UInt64] = [
        7, 21, 1001,
        ProcessInfo.processInfo.environment["ICLOUDFS_TEST_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max),
    ]

    /// POSIX refusals the random steps run into (a name taken, a folder not empty, a path
    /// another device's change removed): part of the game. Anything else is a failure.
    static func isRefusal(_ error: ReplicaError) -> Bool {
        switch error {
        case .notFound, .exists, .notEmpty, .notAFolder, .isAFolder: true
        default: false
        }
    }

    /// Every file as `path: content`, folders as `path/`.
    func listing(_ replica: Replica, _ path: String = "") async throws -> [String] {
        var lines: [String] = []
        for entry in try replica.list(try replica.id(path)) {
            let child = path.isEmpty ? entry.name : "\(path)/\(entry.name)"
            if try replica.attributes(of: entry.id).kind == .folder {
                lines.append(child + "/")
                lines += try await listing(replica, child)
            } else {
                lines.append(child + ": " + String(decoding: try await replica.readFile(child), as: UTF8.self))
            }
        }
        return lines
    }

    func files(_ replica: Replica, _ path: String = "") throws -> [(path: String, isFolder: Bool)] {
        var found: [(String, Bool)] = []
        for entry in try replica.list(try replica.id(path)) {
            let child = path.isEmpty ? entry.name : "\(path)/\(entry.name)"
            let isFolder = try replica.attributes(of: entry.id).kind == .folder
            found.append((child, isFolder))
            if isFolder { found += try files(replica, child) }
        }
        return found
    }

    @Test("three replicas converge and keep every written version", arguments: seeds)
    func converge(seed: UInt64) async throws {
        print("converge: seed \(seed) (replay with ICLOUDFS_TEST_SEED=\(seed))")
        let devices = Devices()
        defer { devices.remove() }
        var random = SeededRandom(seed: seed)
        var replicas: [Replica] = []
        for name in ["r0", "r1", "r2"] { replicas.append(try await devices.open(name)) }
        var written: Set<String> = []
        var replacedWhileSeen: Set<String> = []
        let names = ["a.txt", "b.txt", "notes", "x"]

        for step in 0..<150 {
            let r = replicas[Int.random(in: 0..<3, using: &random)]
            let entries = try files(r)
            let folders = [""] + entries.filter(\.isFolder).map(\.path)
            let plain = entries.filter { !$0.isFolder }.map(\.path)
            func inFolder(_ folder: String, _ name: String) -> String { folder.isEmpty ? name : "\(folder)/\(name)" }
            do {
                switch Int.random(in: 0..<12, using: &random) {
                case 0...2:
                    let path = inFolder(folders.randomElement(using: &random)!, names.randomElement(using: &random)!)
                    if entries.contains(where: { $0.path == path }) { continue }
                    let token = "s\(seed)-\(step)"
                    try await r.writeFile(path, Data(token.utf8))
                    written.insert(token)
                case 3:
                    let path = inFolder(folders.randomElement(using: &random)!, ["dir", "Documents"].randomElement(using: &random)!)
                    if entries.contains(where: { $0.path == path }) { continue }
                    let parts = path.split(separator: "/").map(String.init)
                    _ = try r.makeFolder(parts.last!, in: try r.id(parts.dropLast().joined(separator: "/")), mode: 0o755)
                case 4...6:
                    guard let path = plain.randomElement(using: &random) else { continue }
                    replacedWhileSeen.insert(String(decoding: try await r.readFile(path), as: UTF8.self))
                    let token = "s\(seed)-\(step)"
                    try await r.writeFile(path, Data(token.utf8))
                    written.insert(token)
                case 7:
                    guard let entry = entries.randomElement(using: &random) else { continue }
                    let to = folders.randomElement(using: &random)!
                    if to == entry.path || to.hasPrefix(entry.path + "/") { continue }
                    let parts = entry.path.split(separator: "/").map(String.init)
                    let newName = names.randomElement(using: &random)!
                    if let existing = entries.first(where: { $0.path == inFolder(to, newName) }), !existing.isFolder, !entry.isFolder {
                        replacedWhileSeen.insert(String(decoding: try await r.readFile(existing.path), as: UTF8.self))
                    }
                    try r.rename(parts.last!, in: try r.id(parts.dropLast().joined(separator: "/")), to: newName, in: try r.id(to))
                case 8:
                    guard let path = plain.randomElement(using: &random) else { continue }
                    replacedWhileSeen.insert(String(decoding: try await r.readFile(path), as: UTF8.self))
                    let parts = path.split(separator: "/").map(String.init)
                    try r.remove(parts.last!, in: try r.id(parts.dropLast().joined(separator: "/")))
                case 9:
                    guard let folder = folders.dropFirst().randomElement(using: &random) else { continue }
                    let parts = folder.split(separator: "/").map(String.init)
                    try r.removeFolder(parts.last!, in: try r.id(parts.dropLast().joined(separator: "/")))
                case 10:
                    try await r.push()
                default:
                    try await r.pull()
                }
            } catch let error as ReplicaError where Self.isRefusal(error) {
                // A refusal changes nothing: the next step goes on.
            } catch {
                Issue.record("seed \(seed), step \(step): unexpected \(error)")
            }
        }
        for _ in 0..<2 {
            for r in replicas { try await r.push() }
        }
        for r in replicas { try await r.pull() }
        let reference = try await listing(replicas[0])
        for (index, r) in replicas.enumerated() {
            #expect(r.pendingChangeCount == 0)
            #expect(try await listing(r) == reference, "seed \(seed): replica \(index) differs")
        }
        let present = Set(reference.compactMap { $0.split(separator: ": ", maxSplits: 1).dropFirst().first.map(String.init) })
        let lost = written.subtracting(replacedWhileSeen).subtracting(present)
        #expect(lost.isEmpty, "seed \(seed): lost \(lost.sorted())")
        print("seed \(seed): \(reference.count) entries, \(reference.filter { $0.contains("conflicted copy") }.count) conflict copies")
    }
}
