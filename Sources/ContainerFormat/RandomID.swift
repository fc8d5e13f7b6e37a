import Foundation

/// Random version-4 UUID strings (item ids, commit ids, tokens), as `UUID().uuidString`
/// writes them. Foundation's `UUID()` opens and reads `/dev/urandom` each time (a file
/// descriptor per created file); the system generator is the `getrandom` call alone.
public enum RandomID {
    public static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (generator.next() as UInt64, generator.next() as UInt64)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40  // version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  // RFC 4122 variant
            return UUID(uuid: raw.load(as: uuid_t.self)).uuidString
        }
    }
}
