import ContainerFormat
import FuseKernel
import Synchronization

/// The kernel's names for items: one stable number per item (its inode number and FUSE node
/// id), handed out on first use and never reused, 1 for the root. They outlive a mount
/// (file handles and NFS exports name files by them), so new ones are kept with the cache
/// state (`Replica.saveNodeNumbers`) in batches, not a transaction each: a walk of a large
/// container meets thousands of items for the first time.
///
/// Under `mount --all` several containers share one kernel connection: each container's
/// numbers are offset by its `base` (`ContainerSlots`), so the kernel's number says whose
/// it is. The cache keeps the numbers without the base.
final class NodeNumbers: Sendable {
    private struct Table {
        var byID: [ItemID: UInt64] = [:]
        /// Numbers are handed out in order from 1, so the ids by number are an array (16
        /// bytes a number; a dictionary took 48 to 64); a number never handed out holds
        /// `unassigned`.
        var byNumber: [ItemID] = []
        var next: UInt64 = 1
        var unsaved: [(UInt64, ItemID)] = []

        mutating func record(_ number: UInt64, _ id: ItemID) {
            guard number >= 1 else { return }  // 0 is no node
            byID[id] = number
            if number > byNumber.count {
                byNumber.append(contentsOf: repeatElement(NodeNumbers.unassigned, count: Int(number) - byNumber.count))
            }
            byNumber[Int(number - 1)] = id
            next = max(next, number + 1)
        }
    }

    private static let unassigned = ItemID("")
    private let table: Mutex<Table>
    /// Added to every number the kernel sees (0 for a mount of one container).
    let base: UInt64
    /// Called with the numbers handed out since the last call, shortly after the first.
    private let save: @Sendable ([(UInt64, ItemID)]) -> Void

    /// From the numbers kept by earlier mounts; `save` keeps new ones.
    init(saved: [(UInt64, ItemID)], base: UInt64 = 0, save: @escaping @Sendable ([(UInt64, ItemID)]) -> Void) {
        var table = Table()
        for (number, id) in saved { table.record(number, id) }
        if table.byID[.root] == nil {
            table.record(KernelProtocol.rootNode, .root)
            table.unsaved.append((KernelProtocol.rootNode, .root))
        }
        self.table = Mutex(table)
        self.base = base
        self.save = save
    }

    /// The root's number, as the kernel sees it.
    var root: UInt64 { base + KernelProtocol.rootNode }

    /// The number of `id`, handing out the next free one on first use.
    func number(of id: ItemID) -> UInt64 {
        let (number, first) = table.withLock { table -> (UInt64, Bool) in
            if let number = table.byID[id] { return (number, false) }
            let number = table.next
            table.record(number, id)
            table.unsaved.append((number, id))
            return (number, table.unsaved.count == 1)
        }
        if first { saveSoon() }
        return base + number
    }

    /// The number of `id` if it was ever given one (the kernel can hold only those).
    func existingNumber(of id: ItemID) -> UInt64? {
        table.withLock { $0.byID[id] }.map { base + $0 }
    }

    func item(_ number: UInt64) -> ItemID? {
        guard number > base else { return nil }
        let number = number - base
        return table.withLock { table in
            guard number <= table.byNumber.count else { return nil }
            let id = table.byNumber[Int(number - 1)]
            return id == Self.unassigned ? nil : id
        }
    }

    /// Keeps the numbers handed out since the last save (also at the end of a mount). A
    /// number lost to a crash before its save is handed out again after the restart (the
    /// kernel knew it only in the mount that ended).
    func saveNow() {
        let assignments = table.withLock { table in
            defer { table.unsaved = [] }
            return table.unsaved
        }
        if !assignments.isEmpty { save(assignments) }
    }

    private func saveSoon() {
        Task { [self] in
            try? await Task.sleep(for: .milliseconds(100))
            saveNow()
        }
    }
}
