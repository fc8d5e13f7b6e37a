import ContainerFormat
import Testing

@testable import Replica

struct InodeNumbersTests {
    @Test("numbers are handed out in order, kept, and found both ways; gaps from the saved ones stay unassigned")
    func assignAndFind() {
        // Saved with a gap (4 and 5 belonged to items long purged) and out of order.
        var numbers = InodeNumbers([(6, ItemID("six")), (1, .root), (3, ItemID("three"))])
        #expect(numbers.item(1) == .root)
        #expect(numbers.item(3) == ItemID("three"))
        #expect(numbers.item(6) == ItemID("six"))
        for unknown: UInt64 in [0, 2, 4, 5, 7, 1 << 40] { #expect(numbers.item(unknown) == nil) }
        #expect(numbers.assign(ItemID("new")) == 7)
        #expect(numbers.assign(ItemID("three")) == 3)  // already known: the same number
        #expect(numbers.assign(ItemID("newer")) == 8)
        #expect(numbers.item(8) == ItemID("newer"))
        #expect(numbers.number(of: ItemID("new")) == 7)
        #expect(numbers.takeUnsaved().map(\.0) == [7, 8])
        #expect(!numbers.hasUnsaved)
    }
}
