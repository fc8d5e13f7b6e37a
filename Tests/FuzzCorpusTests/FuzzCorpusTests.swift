import Foundation
import FuzzTargets
import Testing

/// Inputs the fuzzers kept (and the seeds they started from) stay harmless.
struct FuzzCorpusTests {
    @Test("every input of the fuzz corpus returns through its decoder without a trap")
    func replayCorpus() {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus").path
        #expect(FuzzTarget.replay(corpus: corpus) >= FuzzTarget.allCases.count)
    }
}
