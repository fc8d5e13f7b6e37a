import ContainerFormat
import Foundation
@testable import Replica
import Synchronization
import Testing

/// The list of cache files made ahead (`NewContentFiles`): cut down to what is not recorded,
/// without forgetting a file that may still need removing.
struct NewContentFilesTests {
    @Test("a long list keeps only the ids nothing recorded whose files exist, after recording what is queued")
    func trimKeepsOnlyUnrecordedFiles() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("spares-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let listPath = "\(folder)/spares"
        let recorded = Mutex<Set<ItemID>>([])
        let flushes = Atomic<Int>(0)
        let files = NewContentFiles(listPath: listPath) { "\(folder)/\($0.rawValue)" }
        files.start(
            unrecorded: { ids in recorded.withLock { recorded in ids.filter { !recorded.contains($0) } } },
            recordQueued: { flushes.add(1, ordering: .relaxed) })
        // Take files past the list's limit, recording all but a few and removing one.
        var taken: [ItemID] = []
        let deadline = Date().addingTimeInterval(30)
        while taken.count < NewContentFiles.listLimit + NewContentFiles.kept {
            try #require(Date() < deadline, "no files made ahead")
            guard let (id, fd) = files.take() else {
                Thread.sleep(forTimeInterval: 0.001)  // the next round is being made
                continue
            }
            try fd.close()
            taken.append(id)
        }
        let unrecorded = Array(taken.suffix(3))
        recorded.withLock { $0.formUnion(taken.dropLast(3)) }
        unlink("\(folder)/\(unrecorded[0].rawValue)")  // its create failed: the file went
        // The next rounds trim the list. (Waited for by time, not by a count of takes: under
        // the load of the whole suite a round can take longer than a hundred tries.)
        var listed: Set<String> = []
        var reads = 0
        let trimDeadline = Date().addingTimeInterval(30)
        while Date() < trimDeadline {
            guard files.take() != nil else {
                Thread.sleep(forTimeInterval: 0.001)
                continue
            }
            listed = Set(try String(contentsOfFile: listPath, encoding: .utf8).split(separator: "\n").map(String.init))
            reads += 1
            if listed.count < NewContentFiles.listLimit { break }
        }
        files.stop()
        try #require(reads > 0, "no file was made ahead after the long list")
        #expect(listed.count < NewContentFiles.listLimit, "the list was never trimmed")
        #expect(flushes.load(ordering: .relaxed) > 0, "what was queued was not recorded before the trim")
        #expect(!listed.contains(unrecorded[0].rawValue), "an id whose file is gone stays listed")
        #expect(listed.isSuperset(of: unrecorded.dropFirst().map(\.rawValue)), "an unrecorded id left the list")
        #expect(listed.isDisjoint(with: taken.dropLast(3).map(\.rawValue)), "a recorded id stays listed")
    }
}
