import Logging
import Testing

@testable import FuseAdapter

/// The kernel's lookup counts: raised by each entry handed out, lowered only by `forget`.
struct InodeTableTests {
    init() {
        // Over-forgetting is logged as an error, as it should be; the test needs none of it.
        FuseLog.shared.withLock { $0 = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() } }
    }

    /// `inode` is known with these lookups, parent and name.
    func expectKnown(_ table: InodeTable, _ inode: UInt64, lookups: Int, parent: UInt64, name: String) throws {
        let known = try #require(table.lookupEntry(inode))
        #expect(known.lookups == lookups)
        #expect(known.parent == parent)
        #expect(known.name == name)
    }

    @Test("a remembered inode is known with one lookup, its parent and its name")
    func rememberOnce() throws {
        let table = InodeTable()
        table.remember(7, parent: 1, name: "notes.txt")
        try expectKnown(table, 7, lookups: 1, parent: 1, name: "notes.txt")
    }

    @Test("each remember adds a lookup and keeps the last name and parent it was looked up under")
    func rememberAgain() throws {
        let table = InodeTable()
        table.remember(5, parent: 1, name: "a")
        table.remember(5, parent: 1, name: "a")
        table.remember(5, parent: 3, name: "b")
        try expectKnown(table, 5, lookups: 3, parent: 3, name: "b")
    }

    @Test("inodes never remembered are unknown, below and above the ones that are")
    func unknownInodes() {
        let table = InodeTable()
        #expect(table.lookupEntry(1) == nil)
        table.remember(10, parent: 1, name: "x")
        for inode: UInt64 in [0, 1, 9, 11, 1000] {
            #expect(table.lookupEntry(inode) == nil, "inode \(inode)")
        }
        #expect(table.lookupEntry(10) != nil)
    }

    @Test("counts drop only through forget: reading an entry leaves it, forgetting part keeps the rest")
    func countsDropOnlyThroughForget() throws {
        let table = InodeTable()
        for _ in 0..<5 { table.remember(4, parent: 1, name: "f") }
        for _ in 0..<10 { _ = table.lookupEntry(4) }
        #expect(try #require(table.lookupEntry(4)).lookups == 5)
        table.forget(4, 2)
        #expect(try #require(table.lookupEntry(4)).lookups == 3)
        table.forget(4, 1)
        let left = try #require(table.lookupEntry(4))
        #expect(left.lookups == 2)
        #expect(left.name == "f")
    }

    @Test("a number is gone once all its lookups are forgotten, and starts from one if looked up again")
    func goneAfterForget() throws {
        let table = InodeTable()
        table.remember(3, parent: 1, name: "old")
        table.remember(3, parent: 1, name: "old")
        table.forget(3, 1)
        table.forget(3, 1)
        #expect(table.lookupEntry(3) == nil)
        table.remember(3, parent: 2, name: "new")
        try expectKnown(table, 3, lookups: 1, parent: 2, name: "new")
    }

    @Test("forgetting one inode leaves the others as they were")
    func forgetIsPerInode() throws {
        let table = InodeTable()
        table.remember(2, parent: 1, name: "two")
        table.remember(3, parent: 1, name: "three")
        table.remember(3, parent: 1, name: "three")
        table.forget(2, 1)
        #expect(table.lookupEntry(2) == nil)
        #expect(try #require(table.lookupEntry(3)).lookups == 2)
    }

    @Test("in a release build, forgetting more than was handed out, or an inode never handed out, drops it and keeps serving")
    func overForget() throws {
        let table = InodeTable(stopsOnOverForget: false)
        table.remember(6, parent: 1, name: "f")
        table.remember(8, parent: 1, name: "g")
        table.forget(6, 2)
        #expect(table.lookupEntry(6) == nil)
        table.forget(99, 1)
        #expect(table.lookupEntry(99) == nil)
        #expect(try #require(table.lookupEntry(8)).lookups == 1)
        table.remember(6, parent: 1, name: "f")
        #expect(try #require(table.lookupEntry(6)).lookups == 1)
    }

    @Test("lookups and forgets from many threads at once add up exactly")
    func concurrentCounts() async throws {
        let table = InodeTable()
        let inodes: [UInt64] = Array(1...64)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    for round in 0..<200 {
                        for inode in inodes { table.remember(inode, parent: 1, name: "n\(inode)") }
                        // Every second round forgets the two lookups this worker just handed out.
                        if round % 2 == 1 { for inode in inodes { table.forget(inode, 2) } }
                    }
                }
            }
        }
        // 8 workers × 200 remembers, less 8 × 100 × 2 forgotten: nothing left.
        for inode in inodes { #expect(table.lookupEntry(inode) == nil, "inode \(inode)") }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for inode in inodes { table.remember(inode, parent: 1, name: "n\(inode)") } }
            }
        }
        for inode in inodes { #expect(try #require(table.lookupEntry(inode)).lookups == 8) }
    }
}

/// Open files and listings by the `fh` number the kernel hands back.
struct HandleTableTests {
    @Test("handles are distinct and increasing; get, replace and remove act on the one named")
    func handles() {
        let table = HandleTable<String>()
        let first = table.insert("a")
        let second = table.insert("b")
        #expect(first != 0)
        #expect(second > first)
        #expect(table.get(first) == "a")
        #expect(table.get(second) == "b")
        table.replace(first, with: "a2")
        #expect(table.get(first) == "a2")
        #expect(table.remove(first) == "a2")
        #expect(table.get(first) == nil)
        #expect(table.remove(first) == nil)
        // A removed handle is not brought back by replace, nor its number reused.
        table.replace(first, with: "ghost")
        #expect(table.get(first) == nil)
        #expect(table.insert("c") > second)
        #expect(table.get(second) == "b")
    }
}
