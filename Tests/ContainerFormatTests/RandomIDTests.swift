import ContainerFormat
import Foundation
import Testing

struct RandomIDTests {
    @Test("random ids are version-4 UUID strings, as UUID() writes them, and do not repeat")
    func shape() {
        var seen = Set<String>()
        for _ in 0..<100_000 {
            let id = RandomID.make()
            #expect(UUID(uuidString: id)?.uuidString == id)
            let characters = Array(id)
            #expect(characters[14] == "4")
            #expect("89AB".contains(characters[19]))
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
    }
}
