import Foundation

/// A change a device made locally and has not yet seen in the journal: one entry of its
/// durable upload queue (one close of a written file, one mkdir, one rename, ...).
public struct LocalChange: Hashable, Codable, Sendable {
    /// Queue order, increasing; never reused.
    public var localID: Int64
    public var time: Timestamp
    public var ops: [ItemOperation]
    /// Operations whose `base` is the result of an earlier local change, not yet known when
    /// this one was made: op index → that change's `localID`. Resolved when it is pushed.
    public var dependencies: [Int: Int64]

    public init(localID: Int64, time: Timestamp, ops: [ItemOperation], dependencies: [Int: Int64] = [:]) {
        self.localID = localID
        self.time = time
        self.ops = ops
        self.dependencies = dependencies
    }
}

/// The version an operation is based on: a journal number, or the result of an earlier
/// local change that has not reached the journal yet.
public enum BaseVersion: Hashable, Sendable {
    case seq(UInt64)
    case pending(Int64)
}

/// A prefix of the queue merged into one journal commit: the unit a device pushes.
public struct Batch: Hashable, Codable, Sendable {
    public var commitID: String
    public var localIDs: [Int64]

    public init(commitID: String, localIDs: [Int64]) {
        self.commitID = commitID
        self.localIDs = localIDs
    }
}

extension ItemOperation {
    var base: UInt64? {
        switch self {
        case .create: nil
        case .update(let op): op.base
        case .move(let op): op.base
        case .delete(let op): op.base
        }
    }

    func withBase(_ base: UInt64) -> ItemOperation {
        switch self {
        case .create: return self
        case .update(var op):
            op.base = base
            return .update(op)
        case .move(var op):
            op.base = base
            return .move(op)
        case .delete(var op):
            op.base = base
            return .delete(op)
        }
    }
}
