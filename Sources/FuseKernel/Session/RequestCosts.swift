import Foundation
import Glibc
import Synchronization

/// What each kind of request costs the worker that serves it: with
/// `ICLOUDFS_REQUEST_COSTS=1` in the daemon's environment, the session counts each kind's
/// requests and the thread CPU time spent serving them (decoded to answered, or to handed
/// off when answered later), and logs the table when the mount ends
/// (docs/ARCHITECTURE.md "Measuring the state lock"). Wall time would charge a request for
/// the caller it wakes: on two cores the woken caller often runs on the worker's core.
/// Off, it costs one branch per request.
final class RequestCosts: Sendable {
    /// Read once from the environment (a mount test switches it per daemon).
    static let enabled = ProcessInfo.processInfo.environment["ICLOUDFS_REQUEST_COSTS"].map { $0 != "0" } ?? false

    struct Totals: Sendable {
        var count = 0
        var nanoseconds = 0
        var most = 0
    }

    private let totals = Mutex([Totals](repeating: Totals(), count: 64))

    /// The calling thread's CPU time so far, in nanoseconds.
    static func threadTime() -> Int {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return now.tv_sec * 1_000_000_000 + now.tv_nsec
    }

    /// Runs `serve` and charges its CPU time to `opcode` (when switched on).
    func measure(_ opcode: UInt32, _ serve: () -> Void) {
        guard Self.enabled, opcode < 64 else { return serve() }
        let start = Self.threadTime()
        serve()
        let spent = Self.threadTime() - start
        totals.withLock { totals in
            totals[Int(opcode)].count += 1
            totals[Int(opcode)].nanoseconds += spent
            totals[Int(opcode)].most = max(totals[Int(opcode)].most, spent)
        }
    }

    /// One line per kind served, the costliest in all first: `kind count= cpu_us= mean_us= most_us=`.
    func table() -> String {
        let rows = totals.withLock { $0 }.enumerated().filter { $0.element.count > 0 }
        return rows.sorted { $0.element.nanoseconds > $1.element.nanoseconds }.map { opcode, totals in
            "\(OpcodeNames.name(of: UInt32(opcode))) count=\(totals.count) cpu_us=\(totals.nanoseconds / 1000)"
                + " mean_us=\(totals.nanoseconds / totals.count / 1000) most_us=\(totals.most / 1000)"
        }.joined(separator: "\n")
    }
}
