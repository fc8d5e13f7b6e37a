import Foundation
import Synchronization
import Testing

@testable import Replica

/// `ICLOUDFS_LOCK_STATISTICS`: the state lock's holds and waits, by call site.
@Suite(.serialized)
struct LockStatisticsTests {
    @Test("a hold and a wait are counted at the call site that took the lock")
    func holdsAndWaits() throws {
        let wasOn = LockStatistics.enabled
        LockStatistics.enabled = true
        defer { LockStatistics.enabled = wasOn }
        let lock = MeasuredMutex(0)
        let holds = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let heldFrom = Mutex(ContinuousClock.now)
        let holderLine: UInt = #line + 2
        Thread.detachNewThread {
            lock.withLock { value in
                heldFrom.withLock { $0 = .now }
                holds.signal()
                usleep(200_000)
                value += 1
            }
            done.signal()
        }
        holds.wait()
        // What is left of the holder's 200 ms once this thread runs again (on a busy machine
        // it may wake late): at least that long it waits.
        let left = .milliseconds(200) - (ContinuousClock.now - heldFrom.withLock { $0 })
        let waiterLine: UInt = #line + 1
        lock.withLock { $0 += 1 }
        done.wait()
        let sites = LockStatistics.snapshot().filter { $0.key.file.hasSuffix("LockStatisticsTests.swift") }
        let holder = try #require(sites[LockStatistics.Site(file: #fileID, line: holderLine)])
        let waiter = try #require(sites[LockStatistics.Site(file: #fileID, line: waiterLine)])
        #expect(holder.uses == 1 && waiter.uses == 1)
        #expect(holder.held >= .milliseconds(200) && holder.longest == holder.held)
        #expect(waiter.waited >= left - .milliseconds(5), "the second caller waited for the first to let go")
        #expect(LockStatistics.table().contains("LockStatisticsTests.swift:\(waiterLine) uses=1"))
    }

    @Test("a replica's file operations show up by their call sites; switched off, nothing is recorded")
    func replicaSites() async throws {
        let wasOn = LockStatistics.enabled
        defer { LockStatistics.enabled = wasOn }
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        LockStatistics.enabled = true
        _ = try await a.writeFile("measured", Data(repeating: 7, count: 5000))
        LockStatistics.enabled = false
        let recorded = LockStatistics.snapshot()
        #expect(recorded.keys.contains { $0.file.hasSuffix("Replica+Metadata.swift") }, "the create")
        #expect(recorded.keys.contains { $0.file.hasSuffix("Replica+Content.swift") }, "the write and its commit")
        let lock = MeasuredMutex(0)
        let line: UInt = #line + 1
        lock.withLock { $0 += 1 }
        #expect(LockStatistics.snapshot()[LockStatistics.Site(file: #fileID, line: line)] == nil)
    }
}
