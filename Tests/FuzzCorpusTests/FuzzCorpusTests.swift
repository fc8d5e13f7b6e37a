import Foundation
import FuzzTargets
import Testing

/// Inputs the fuzzers kept (and the seeds they started from) stay harmless.
struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus").path

    /// Inputs each target's folder held when this was written (2,045 in all). Fuzzing adds
    /// inputs; a corpus minimised by `-merge=1` may lower these, on purpose, in the same change.
    static let floors: [FuzzTarget: Int] = [
        .journal: 389, .snapshot: 615, .localChange: 802, .localRecords: 80, .s3XML: 159, .keyValueRecord: 2,
    ]

    /// The regular files in a target's folder.
    static func files(of target: FuzzTarget) -> Int {
        let folder = "\(corpus)/\(target.rawValue)"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { name in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(folder)/\(name)", isDirectory: &isFolder) && !isFolder.boolValue
        }.count
    }

    @Test("every fuzz target's corpus folder holds at least the inputs it was given")
    func corpusIsThere() {
        #expect(Set(Self.floors.keys) == Set(FuzzTarget.allCases), "a floor for every target")
        for target in FuzzTarget.allCases {
            let count = Self.files(of: target)
            #expect(count >= Self.floors[target] ?? 1, "\(Self.corpus)/\(target.rawValue): \(count) inputs")
        }
    }

    @Test("every input of the fuzz corpus returns through its decoder without a trap")
    func replayCorpus() {
        let onDisk = FuzzTarget.allCases.map(Self.files(of:)).reduce(0, +)
        #expect(onDisk >= Self.floors.values.reduce(0, +))
        #expect(FuzzTarget.replay(corpus: Self.corpus) == onDisk, "every input on disk was replayed")
    }
}
