import Replica
import Synchronization

/// The kernel's view of inodes: lookup counts (raised by each entry we hand out, lowered
/// only by `forget`) and the last name each inode was looked up under, to invalidate it.
/// The numbers themselves are `NodeNumbers`' (stable, never reused).
///
/// Numbers are handed out in order from 1, so the table is an array by number: 32
/// bytes an inode, where a dictionary took 80 (its buckets, half empty, hold key and value).
final class InodeTable: Sendable {
    struct Known {
        var lookups: UInt64
        var parent: UInt64
        var name: String

        static let none = Known(lookups: 0, parent: 0, name: "")
    }

    private let known = Mutex<[Known]>([])
    /// A forget below zero is our bug: it stops a debug build at once; a release build logs
    /// it and keeps serving.
    private let stopsOnOverForget: Bool
    /// Subtracted from inode numbers to index the table (`NodeNumbers.base`).
    private let base: UInt64

    init(base: UInt64 = 0, stopsOnOverForget: Bool = InodeTable.isDebugBuild) {
        self.base = base
        self.stopsOnOverForget = stopsOnOverForget
    }

    static var isDebugBuild: Bool {
        #if DEBUG
        true
        #else
        false
        #endif
    }

    func remember(_ inode: UInt64, parent: UInt64, name: String) {
        known.withLock { known in
            let index = Int(inode - base)
            if index >= known.count {
                known.append(contentsOf: repeatElement(.none, count: index + 1 - known.count))
            }
            known[index].lookups += 1
            known[index].parent = parent
            known[index].name = name
        }
    }

    /// Returns whether the kernel no longer knows the inode.
    @discardableResult
    func forget(_ inode: UInt64, _ count: UInt64) -> Bool {
        known.withLock { known in
            let index = Int(inode - base)
            guard index < known.count, known[index].lookups >= count else {
                let message = "forget of \(count) lookups of inode \(inode) exceeds what was handed out"
                if stopsOnOverForget { fatalError(message) }
                FuseLog.logger.error("\(message)")
                if index < known.count { known[index] = .none }
                return true
            }
            known[index].lookups -= count
            if known[index].lookups == 0 { known[index] = .none }
            return known[index].lookups == 0
        }
    }

    func lookupEntry(_ inode: UInt64) -> Known? {
        known.withLock { known in
            let index = Int(inode - base)
            return index < known.count && known[index].lookups > 0 ? known[index] : nil
        }
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

    func replace(_ handle: UInt64, with value: Value) {
        table.withLock { table in
            if table.values[handle] != nil { table.values[handle] = value }
        }
    }

    @discardableResult
    func remove(_ handle: UInt64) -> Value? {
        table.withLock { $0.values.removeValue(forKey: handle) }
    }
}
