import CLinux
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

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
        let bytes = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: itemIDLength) { id in
            pool.withLock { pool in
                var count = 0
                while count < itemIDLength {
                    // 248 = 4 × 62: bytes above it are skipped, so each symbol is equally likely.
                    let byte = pool.next()
                    if byte < 248 {
                        id[count] = alphabet[Int(byte % 62)]
                        count += 1
                    }
                }
            }
            return String(decoding: id, as: UTF8.self)
        }
        return ItemID(bytes)
    }

    /// The kernel's random bytes (`getrandom`, what `SystemRandomNumberGenerator` reads),
    /// fetched 4 KiB at a time: the generator makes a call per 8 bytes, and an id took two
    /// (2.6 us of a file's create, most of it those calls).
    private static let pool = Mutex(RandomBytes())

    private struct RandomBytes: ~Copyable {
        private var bytes = [UInt8](repeating: 0, count: 4096)
        private var used = 4096

        mutating func next() -> UInt8 {
            if used == bytes.count {
                bytes.withUnsafeMutableBytes { raw in
                    var filled = 0
                    while filled < raw.count {
                        let got = getrandom(raw.baseAddress! + filled, raw.count - filled, 0)
                        if got > 0 {
                            filled += got
                        } else if got < 0 && errno != EINTR {
                            // No getrandom (a kernel before 3.17): the generator, a call a byte.
                            var generator = SystemRandomNumberGenerator()
                            for offset in filled..<raw.count { raw[offset] = generator.next() }
                            filled = raw.count
                        }
                    }
                }
                used = 0
            }
            defer { used += 1 }
            return bytes[used]
        }
    }

    static let itemIDLength = 15
    /// The symbols of the ids `makeItemID` makes.
    public static let itemIDAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    private static let alphabet = Array(itemIDAlphabet.utf8)

    /// Whether `text` has the form of an id `makeItemID` makes.
    public static func isItemID(_ text: Substring) -> Bool {
        text.utf8.count == itemIDLength && text.utf8.allSatisfy(alphabet.contains)
    }
}
