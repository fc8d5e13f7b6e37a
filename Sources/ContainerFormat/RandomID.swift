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

    /// A new item's id: 15 letters and digits, the first 7 the time it is made (milliseconds
    /// since 2026 in base 62, fixed width: they wrap after 111 years), the last 8 a serial
    /// that starts at random each millisecond and counts up within it. So ids made one after
    /// another sort in the order they were made, and the state database's tables keyed by
    /// id (items, content records) grow at their end: random ids wrote a page at a random
    /// place of each table's index per new item, more the larger the cache (W3: 13 us of
    /// daemon CPU and 2.4 KB of writes per file). One process never makes an id twice; two
    /// devices repeat one only if they make ids in the same millisecond with serials within
    /// a few of each other (about n / 2^47 for n ids each in that millisecond). Swift keeps
    /// a string of up to 15 bytes inside the value itself, so a tree of such ids allocates
    /// no string per item, and copying or hashing one counts no references (a UUID's 36
    /// took 80 bytes of heap per item).
    public static func makeItemID() -> ItemID {
        let now = Date().timeIntervalSince1970 * 1000 - itemIDEpoch
        let bytes = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: itemIDLength) { id in
            var (time, serial) = pool.withLock { $0.nextItemID(at: UInt64(max(0, now))) }
            for position in (0..<itemIDTimeLength).reversed() {
                id[position] = alphabet[Int(time % 62)]
                time /= 62
            }
            for position in (itemIDTimeLength..<itemIDLength).reversed() {
                id[position] = alphabet[Int(serial % 62)]
                serial /= 62
            }
            return String(decoding: id, as: UTF8.self)
        }
        return ItemID(bytes)
    }

    /// 2026-01-01T00:00:00Z in milliseconds since 1970.
    private static let itemIDEpoch = 1_767_225_600_000.0
    static let itemIDTimeLength = 7
    /// The serials of one millisecond: 62^8.
    static let itemIDSerials: UInt64 = 218_340_105_584_896

    /// The kernel's random bytes (`getrandom`, what `SystemRandomNumberGenerator` reads),
    /// fetched 4 KiB at a time: the generator makes a call per 8 bytes, and an id took two
    /// (2.6 us of a file's create, most of it those calls).
    private static let pool = Mutex(RandomBytes())

    private struct RandomBytes: ~Copyable {
        private var bytes = [UInt8](repeating: 0, count: 4096)
        private var used = 4096
        /// The last item id's millisecond and serial (`makeItemID`).
        private var lastTime: UInt64 = 0
        private var lastSerial: UInt64 = 0

        /// The next item id's millisecond (never earlier than the last one's: a clock set
        /// back keeps the order) and serial (random in a new millisecond, the last one's
        /// plus one in the same).
        mutating func nextItemID(at time: UInt64) -> (time: UInt64, serial: UInt64) {
            if time > lastTime {
                lastTime = time
                lastSerial = randomSerial()
            } else {
                lastSerial = (lastSerial + 1) % RandomID.itemIDSerials
            }
            return (lastTime, lastSerial)
        }

        /// Uniform below `itemIDSerials` (48 random bits; those at or above it are drawn again).
        private mutating func randomSerial() -> UInt64 {
            while true {
                var value: UInt64 = 0
                for _ in 0..<6 { value = value << 8 | UInt64(next()) }
                if value < RandomID.itemIDSerials { return value }
            }
        }

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
