import Replica
import Synchronization

/// The kernel's view of inodes: lookup counts (raised by each entry we hand out, lowered
/// only by `forget`) and the last name each inode was looked up under, to invalidate it.
/// Inode numbers themselves are the replica's (stable, never reused).
final class InodeTable: Sendable {
    struct Known {
        var lookups: UInt64
        var parent: UInt64
        var name: String
    }

    private let known = Mutex<[UInt64: Known]>([:])

    func remember(_ inode: UInt64, parent: UInt64, name: String) {
        known.withLock { known in
            var entry = known[inode] ?? Known(lookups: 0, parent: parent, name: name)
            entry.lookups += 1
            entry.parent = parent
            entry.name = name
            known[inode] = entry
        }
    }

    func forget(_ inode: UInt64, _ count: UInt64) {
        known.withLock { known in
            guard var entry = known[inode], entry.lookups >= count else {
                // A kernel forgetting more than it looked up is our bug; keep serving.
                FuseLog.logger.error("forget of \(count) lookups of inode \(inode) exceeds what was handed out")
                known[inode] = nil
                return
            }
            entry.lookups -= count
            known[inode] = entry.lookups == 0 ? nil : entry
        }
    }

    func lookupEntry(_ inode: UInt64) -> Known? {
        known.withLock { $0[inode] }
    }
}

/// Open files and open directory listings, by the `fh` number the kernel hands back.
final class HandleTable<Value: Sendable>: Sendable {
    private let table = Mutex<(next: UInt64, values: [UInt64: Value])>((1, [:]))

    func insert(_ value: Value) -> UInt64 {
        table.withLock { table in
            let handle = table.next
            table.next += 1
            table.values[handle] = value
            return handle
        }
    }

    func get(_ handle: UInt64) -> Value? {
        table.withLock { $0.values[handle] }
    }

    @discardableResult
    func remove(_ handle: UInt64) -> Value? {
        table.withLock { $0.values.removeValue(forKey: handle) }
    }
}
