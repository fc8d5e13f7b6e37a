import ContainerFormat
import Foundation
import Replica
import TestSupport
import Testing

/// Download progress is recorded now and then, not per read: what is recorded must still say
/// a file read whole is whole after a restart.
struct DownloadProgressTests {
    @Test("a file read whole in 1 MiB reads is recorded as downloaded: after a restart it is still whole and current")
    func readWholeSurvivesRestart() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        var random = SeededRandom(seed: 31)
        let data = random.data(count: 6 << 20)  // several chunks, far fewer than a progress record's 64
        try await a.writeFile("f.bin", data)
        try await a.push()
        do {
            let b = try await devices.open("b")
            #expect(try await b.readFile("f.bin") == data)  // 1 MiB reads, each fetching what it lacks
            await b.stop()
        }
        let again = try await devices.open("b")
        let state = try again.syncState(of: try again.id("f.bin"))
        #expect(state.isDownloaded)
        #expect(state.percentDownloaded == 100)
        await again.stop()
        await a.stop()
    }
}
