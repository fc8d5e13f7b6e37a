import Foundation

/// A name compared byte for byte, as Linux filesystems compare names.
///
/// Swift's `String` equality is canonical equivalence: `café` in NFC and in NFD are equal
/// strings, yet two different names on Linux (two files on ext4). Indexes of names use this
/// key so that both can exist side by side and neither overwrites the other.
public struct NameKey: Hashable, Sendable {
    public let name: String

    public init(_ name: String) { self.name = name }

    public static func == (lhs: NameKey, rhs: NameKey) -> Bool {
        lhs.name.utf8.elementsEqual(rhs.name.utf8)
    }

    public func hash(into hasher: inout Hasher) {
        var name = name
        name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension String {
    /// True when both hold the same UTF-8 bytes (not merely canonically equivalent).
    public func hasSameBytes(as other: String) -> Bool { utf8.elementsEqual(other.utf8) }

    /// Byte order of UTF-8, the order `ls` uses in the C locale; unlike `<` on `String`, it
    /// never calls two different names equal.
    public func precedesInBytes(_ other: String) -> Bool {
        // memcmp of the bytes where both are stored contiguously (native strings are): an
        // element-wise walk of the two views was most of sorting a 10,000-name folder.
        let contiguous = utf8.withContiguousStorageIfAvailable { mine in
            other.utf8.withContiguousStorageIfAvailable { theirs in
                let common = min(mine.count, theirs.count)
                let order = common == 0 ? 0 : memcmp(mine.baseAddress!, theirs.baseAddress!, common)
                return order != 0 ? order < 0 : mine.count < theirs.count
            }
        }
        return (contiguous ?? nil) ?? utf8.lexicographicallyPrecedes(other.utf8)
    }
}
