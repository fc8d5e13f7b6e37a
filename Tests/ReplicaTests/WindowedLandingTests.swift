import Foundation
import Testing

@testable import Replica

/// A download's chunks are written in 2 MiB windows aligned to the file, and a window waits
/// only for chunks this download is fetching.
struct WindowedLandingTests {
    static let window = WindowedLanding.windowSize

    /// Pieces of the given sizes laid out from offset 0.
    private func layout(_ sizes: [UInt64]) -> [Range<UInt64>] {
        var offset: UInt64 = 0
        return sizes.map { size in
            defer { offset += size }
            return offset..<offset + size
        }
    }

    private func bytes(_ range: Range<UInt64>) -> WindowedLanding.Bytes {
        .data(Data((range.lowerBound..<range.upperBound).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
    }

    @Test("pieces straddling window edges are written as whole aligned windows, each once")
    func alignedWindows() {
        let ranges = layout([1_500_000, 1_500_000, 1_500_000, 1_500_000])
        let landing = WindowedLanding(ranges)
        ranges.indices.forEach(landing.fetching)
        var writes: [WindowedLanding.Write] = []
        // Out of order, as fetches finish.
        for index in [2, 0, 3, 1] { writes += landing.arrived(index, bytes(ranges[index])) }
        let end = ranges.last!.upperBound
        #expect(writes.map(\.range).sorted { $0.lowerBound < $1.lowerBound } == [
            0..<Self.window, Self.window..<2 * Self.window, 2 * Self.window..<end,
        ])
        for write in writes {
            // Each write's parts are the file's bytes at its range, back to back.
            #expect(write.parts.reduce(Data(), +) == Data((write.range.lowerBound..<write.range.upperBound).map { UInt8(truncatingIfNeeded: $0 &* 31) }))
        }
    }

    @Test("a window does not wait for a piece not being fetched, nor for one fetched elsewhere")
    func noWaitingForOthers() {
        let mib: UInt64 = 1 << 20
        // Piece 1 straddles windows 0 and 1; piece 2 shares window 1 but is not started.
        let ranges = layout([3 * mib / 2, mib, mib])
        let landing = WindowedLanding(ranges)
        landing.fetching(0)
        landing.fetching(1)
        // Window 1 lands at once; window 0 waits for piece 0.
        #expect(landing.arrived(1, bytes(ranges[1])).map(\.range) == [Self.window..<5 * mib / 2])
        #expect(landing.arrived(0, bytes(ranges[0])).map(\.range) == [0..<Self.window])
        // Piece 2, fetched by another download: nothing of this one waits for it.
        #expect(landing.notComing(2).isEmpty)
    }

    @Test("a piece has landed when every write of its bytes is made; a failed write fails it")
    func landedAndFailed() async throws {
        let ranges = layout([Self.window + 100, Self.window - 100])
        let landing = WindowedLanding(ranges)
        landing.fetching(0)
        landing.fetching(1)
        let writes0 = landing.arrived(0, bytes(ranges[0]))
        #expect(writes0.map(\.range) == [0..<Self.window])
        let writes1 = landing.arrived(1, bytes(ranges[1]))
        #expect(writes1.map(\.range) == [Self.window..<2 * Self.window])
        for write in writes0 { landing.finished(write, error: nil) }
        // Piece 0's last 100 bytes are in the second window, not written yet.
        let early = Task { try await landing.landed(0) }
        struct Failure: Error {}
        for write in writes1 { landing.finished(write, error: Failure()) }
        await #expect(throws: Failure.self) { try await early.value }
        await #expect(throws: Failure.self) { try await landing.landed(1) }
    }

    @Test("a run of zeros is its own write, with no bytes")
    func zeros() {
        let ranges = layout([1 << 20, 1 << 20])
        let landing = WindowedLanding(ranges)
        landing.fetching(0)
        landing.fetching(1)
        #expect(landing.arrived(0, .zeros).isEmpty)
        let writes = landing.arrived(1, bytes(ranges[1]))
        #expect(writes.map(\.range) == [0..<(1 << 20), (1 << 20)..<(2 << 20)])
        #expect(writes[0].isZeros && !writes[1].isZeros)
    }
}

extension WindowedLandingTests {
    @Test("a read's range widens to the windows it touches, without overflow")
    func widening() {
        #expect(WindowedLanding.windows(around: 5..<10) == 0..<Self.window)
        #expect(WindowedLanding.windows(around: Self.window..<2 * Self.window) == Self.window..<2 * Self.window)
        #expect(WindowedLanding.windows(around: Self.window - 1..<Self.window + 1) == 0..<2 * Self.window)
        #expect(WindowedLanding.windows(around: 0..<UInt64.max) == 0..<UInt64.max)
    }
}
