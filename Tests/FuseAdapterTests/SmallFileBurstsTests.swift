import Testing

@testable import FuseAdapter

/// The guess made at a create (`SmallFileBursts`): only a run of small files, one process's,
/// without a long pause, predicts a small one.
struct SmallFileBurstsTests {
    let start = ContinuousClock.now

    private func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    @Test("a lone create, and the first of a run, are not expected small")
    func loneCreates() {
        var bursts = SmallFileBursts()
        #expect(!bursts.expectsSmall(7, at: at(0)))
        bursts.closed(7, small: true, at: at(1))
        #expect(!bursts.expectsSmall(7, at: at(2)))
        bursts.closed(7, small: true, at: at(3))
        #expect(bursts.expectsSmall(7, at: at(4)))
        #expect(!bursts.expectsSmall(8, at: at(4)), "another process's run counted")
    }

    @Test("a large file or a pause longer than the gap ends a run")
    func runsEnd() {
        var bursts = SmallFileBursts()
        for time in 0..<5 { bursts.closed(7, small: true, at: at(time)) }
        #expect(bursts.expectsSmall(7, at: at(5)))
        bursts.closed(7, small: false, at: at(6))
        #expect(!bursts.expectsSmall(7, at: at(7)))
        for time in 8..<12 { bursts.closed(7, small: true, at: at(time)) }
        let pause = 12 + Int(SmallFileBursts.gap.components.seconds) * 1000 + 1
        #expect(!bursts.expectsSmall(7, at: at(pause)), "a run predicted across a long pause")
        bursts.closed(7, small: true, at: at(pause))
        #expect(!bursts.expectsSmall(7, at: at(pause + 1)), "a run went on across a long pause")
    }

    @Test("many processes at once keep the memory bounded and the newest runs")
    func bounded() {
        var bursts = SmallFileBursts()
        for process in 0..<Int32(SmallFileBursts.processesKept * 4) {
            let time = start + .microseconds(Int(process))
            bursts.closed(process, small: true, at: time)
            bursts.closed(process, small: true, at: time)
        }
        #expect(bursts.followed <= SmallFileBursts.processesKept)
        let newest = Int32(SmallFileBursts.processesKept * 4 - 1)
        #expect(bursts.expectsSmall(newest, at: at(10)))
    }
}
