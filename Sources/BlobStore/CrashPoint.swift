import Foundation
import Glibc
import Synchronization

/// Steps where the crash tests cut a process short (docs/ARCHITECTURE.md "Crash points").
/// With `ICLOUDFS_CRASH_AT=NAME` (or `NAME:N`, the Nth time) in a process's environment, it
/// kills itself with SIGKILL when it reaches that step, as `kill -9` or a power cut would
/// there, so that a test can stop it at each step of a pack's upload or a repack in turn
/// instead of at a random moment. Unset (always, outside tests), reaching a point is one
/// branch on a constant.
public enum CrashPoint: String, Sendable {
    /// A store object's temporary file is half written (directory store).
    case objectHalfWritten = "object-half-written"
    /// A push's pack is in the store; the journal entry that names it is not.
    case packWritten = "pack-written"
    /// A push's journal entry is in the store; the device has not recorded it.
    case entryAppended = "entry-appended"
    /// A collection's repack wrote a new pack; the entry that moves chunks there is not written.
    case repackWritten = "repack-written"
    /// A collection's repack entry is in the store; the old packs are not yet deleted.
    case repackAppended = "repack-appended"
    /// A collection's sweep deleted its first pack, not the rest.
    case sweepStarted = "sweep-started"
    /// The staging log's pass moved a segment's held pieces to its end and removed the
    /// segments no record names; the records of the moves are saved or waiting.
    case stagingCompacted = "staging-compacted"

    private static let armed: (point: CrashPoint, count: Int)? = {
        guard let value = ProcessInfo.processInfo.environment["ICLOUDFS_CRASH_AT"], !value.isEmpty else { return nil }
        let parts = value.split(separator: ":", maxSplits: 1)
        guard let point = CrashPoint(rawValue: String(parts[0])) else { return nil }
        return (point, parts.count > 1 ? max(1, Int(parts[1]) ?? 1) : 1)
    }()

    private static let reached = Atomic<Int>(0)

    /// Whether this process stops at this point (a step may need to do its work in two
    /// halves to have a middle to stop in).
    public var isArmed: Bool { Self.armed?.point == self }

    /// Kills the process here if the environment says so (see the type's comment).
    public func reach() {
        guard let armed = Self.armed, armed.point == self else { return }
        if Self.reached.add(1, ordering: .relaxed).newValue >= armed.count {
            kill(getpid(), SIGKILL)
        }
    }
}
