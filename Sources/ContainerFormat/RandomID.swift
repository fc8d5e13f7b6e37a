import Foundation

/// Random ids from the system generator (`getrandom`). Foundation's `UUID()` opens and
/// reads `/dev/urandom` each time (a file descriptor per created file).
public enum RandomID {
    /// A random version-4 UUID string, as `UUID().uuidString` writes it (commit ids, tokens).
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: raw.load(as: uuid_t.self)).uuidString
        }
    }

    /// A new item's id: 15 random letters and digits (89 bits). Swift keeps a string of up
    /// to 15 bytes inside the value itself, so a tree of such ids allocates no string per
    /// item, and copying or hashing one counts no references (a UUID's 36 took 80 bytes of
    /// heap per item). Collisions: about 2^-50 for a container of a million items.
    public static func makeItemID() -> ItemID {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(itemIDLength)
        while bytes.count < itemIDLength {
            var word = generator.next() as UInt64
            for _ in 0..<8 where bytes.count < itemIDLength {
                // 248 = 4 × 62: bytes above it are skipped, so each symbol is equally likely.
                let byte = UInt8(truncatingIfNeeded: word)
                word >>= 8
                if byte < 248 { bytes.append(alphabet[Int(byte % 62)]) }
            }
        }
        return ItemID(String(decoding: bytes, as: UTF8.self))
    }

    static let itemIDLength = 15
    /// The symbols of the ids `makeItemID` makes.
    public static let itemIDAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    private static let alphabet = Array(itemIDAlphabet.utf8)
}
