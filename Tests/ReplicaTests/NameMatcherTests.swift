import Foundation
import Testing

@testable import Replica

struct NameMatcherTests {
    @Test("the byte comparisons answer as fnmatch does, for every form of pattern")
    func sameAsFnmatch() {
        let patterns = ["*", "**", "", "a.txt", "*.txt", "note*", "*note*", "n?te.*", "[ab]*", "*.TXT", "é*", "*\\*", "*txt"]
        let names = ["a.txt", "notes.md", "note", "b.txt", "txt", ".txt", "é.txt", "e.txt", "*", "a\\*", "A.TXT", "", "x*y"]
        for pattern in patterns {
            let matcher = NameMatcher(pattern)
            for name in names {
                #expect(matcher.matches(name) == (fnmatch(pattern, name, 0) == 0), "\(pattern) ~ \(name)")
            }
        }
        #expect(NameMatcher(nil).matches("anything"))
    }
}
