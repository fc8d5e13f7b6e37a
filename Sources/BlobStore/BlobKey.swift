/// A validated object key: `/`-separated, each part of `[A-Za-z0-9._-]`, never `.` or `..`,
/// no empty part. Safe as a relative file path and as an S3 key without escaping.
public struct BlobKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) throws {
        guard BlobKey.isValid(rawValue) else { throw StoreError.invalidKey(rawValue) }
        self.rawValue = rawValue
    }

    /// For keys built by the program from parts it has already checked.
    public init(validated rawValue: String) {
        precondition(BlobKey.isValid(rawValue), "invalid blob key \(rawValue)")
        self.rawValue = rawValue
    }

    public var description: String { rawValue }

    public static func < (lhs: BlobKey, rhs: BlobKey) -> Bool {
        // Byte order, as S3 lists keys.
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }

    public static func isValid(_ key: String) -> Bool {
        guard !key.isEmpty, key.utf8.count <= 1024 else { return false }
        for part in key.split(separator: "/", omittingEmptySubsequences: false) {
            if part.isEmpty || part == "." || part == ".." { return false }
            if !part.utf8.allSatisfy(isSafeByte) { return false }
        }
        return true
    }

    private static func isSafeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}
