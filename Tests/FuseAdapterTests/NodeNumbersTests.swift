import ContainerFormat
import Synchronization
import Testing

@testable import FuseAdapter

struct NodeNumbersTests {
    @Test("numbers are handed out in order, kept, and found both ways; gaps from the saved ones stay unassigned")
    func assignAndFind() {
        let saved = Mutex<[(UInt64, ItemID)]>([])
        // Saved with a gap (4 and 5 belonged to items long purged) and out of order.
        let numbers = NodeNumbers(saved: [(6, ItemID("six")), (1, .root), (3, ItemID("three"))]) { new in
            saved.withLock { $0 += new }
        }
        #expect(numbers.item(1) == .root)
        #expect(numbers.item(3) == ItemID("three"))
        #expect(numbers.item(6) == ItemID("six"))
        for unknown: UInt64 in [0, 2, 4, 5, 7, 1 << 40] { #expect(numbers.item(unknown) == nil) }
        #expect(numbers.existingNumber(of: ItemID("new")) == nil)
        #expect(numbers.number(of: ItemID("new")) == 7)
        #expect(numbers.number(of: ItemID("three")) == 3)  // already known: the same number
        #expect(numbers.number(of: ItemID("newer")) == 8)
        #expect(numbers.item(8) == ItemID("newer"))
        #expect(numbers.existingNumber(of: ItemID("new")) == 7)
        numbers.saveNow()
        #expect(saved.withLock { $0.map(\.0) } == [7, 8])
        numbers.saveNow()  // nothing new: nothing saved again
        #expect(saved.withLock { $0.count } == 2)
    }

    @Test("a cache with no numbers yet gives the root node 1, and keeps it")
    func rootIsOne() {
        let saved = Mutex<[(UInt64, ItemID)]>([])
        let numbers = NodeNumbers(saved: []) { new in saved.withLock { $0 += new } }
        #expect(numbers.item(1) == .root)
        #expect(numbers.number(of: ItemID("first")) == 2)
        numbers.saveNow()
        #expect(saved.withLock { $0.map(\.0) } == [1, 2])
    }
}
