import Foundation
import Synchronization

/// The replica's state lock, which can say where its time goes: with
/// `ICLOUDFS_LOCK_STATISTICS=1` in the daemon's environment it counts, per call site, how
/// often the lock was taken, how long it was held and how long callers waited for it, and
/// `Replica.stop` logs the table at unmount (docs/ARCHITECTURE.md "Measuring the state lock").
/// Profiles spread the replica's cost over dozens of functions; this table says how much of
/// it is serialized, and by whom. Off, it costs one branch per use.
final class MeasuredMutex<Value: ~Copyable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: consuming sending Value) {
        mutex = Mutex(value)
    }

    func withLock<Result: ~Copyable, E: Error>(
        file: StaticString = #fileID, line: UInt = #line,
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        guard LockStatistics.enabled else { return try mutex.withLock(body) }
        let asked = ContinuousClock.now
        var taken = asked
        var held = Duration.zero
        defer { LockStatistics.record(LockStatistics.Site(file: file, line: line), waited: taken - asked, held: held) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            taken = .now
            defer { held = ContinuousClock.now - taken }
            return try body(&value)
        }
    }
}

/// What `MeasuredMutex`es recorded since the process started.
enum LockStatistics {
    /// Read once from the environment; tests switch it.
    private static let switchedOn = Atomic<Bool>(
        ProcessInfo.processInfo.environment["ICLOUDFS_LOCK_STATISTICS"].map { $0 != "0" } ?? false)

    static var enabled: Bool {
        get { switchedOn.load(ordering: .relaxed) }
        set { switchedOn.store(newValue, ordering: .relaxed) }
    }

    struct Site: Hashable, Sendable {
        let file: String
        let line: UInt

        init(file: StaticString, line: UInt) {
            self.file = file.description
            self.line = line
        }
    }

    struct Totals: Sendable {
        var uses = 0
        var held = Duration.zero
        var longest = Duration.zero
        var waited = Duration.zero
    }

    private static let totals = Mutex<[Site: Totals]>([:])

    static func record(_ site: Site, waited: Duration, held: Duration) {
        totals.withLock { totals in
            totals[site, default: Totals()].uses += 1
            totals[site]!.held += held
            totals[site]!.longest = max(totals[site]!.longest, held)
            totals[site]!.waited += waited
        }
    }

    static func snapshot() -> [Site: Totals] {
        totals.withLock { $0 }
    }


    /// The sites that held the lock longest in all, one line each: `file:line uses held
    /// longest waited` (times in microseconds).
    static func table(limit: Int = 30) -> String {
        func micros(_ duration: Duration) -> Int64 {
            duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        }
        let rows = snapshot().sorted { $0.value.held > $1.value.held }.prefix(limit)
        let lines = rows.map { site, totals in
            "\(site.file):\(site.line) uses=\(totals.uses) held_us=\(micros(totals.held)) longest_us=\(micros(totals.longest)) waited_us=\(micros(totals.waited))"
        }
        return (["state lock, by call site (held longest first):"] + lines).joined(separator: "\n")
    }
}
