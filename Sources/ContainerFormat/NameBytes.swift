/// Names (and symlink targets) are bytes on Linux, and any bytes but `/` and NUL make a
/// name; the format stores them as strings. A name's bytes map to a string one to one:
/// valid UTF-8 as its characters, and each byte that is not part of valid UTF-8 as the
/// private-use character U+F700 + byte (U+F780 to U+F7FF). So that the map stays one to
/// one, a name that holds one of those characters itself has each byte of its UTF-8 form
/// written that way too. Only the FUSE boundary converts; inside, a name is its string.
public enum NameBytes {
    /// The escaped bytes' characters: U+F780 ... U+F7FF.
    private static let escapes: ClosedRange<UInt32> = 0xF780...0xF7FF
    private static let escapeBase: UInt32 = 0xF700

    /// The string that stands for `bytes`. Inlinable: specialized for the caller's
    /// collection (the kernel's names), the common case checks bytes without a generic call per byte.
    @inlinable
    public static func string(_ bytes: some Collection<UInt8>) -> String {
        // Almost every name: valid UTF-8 without U+F7xx (whose first byte is 0xEF).
        if !bytes.contains(0xEF), let string = decodedWithoutRepair(bytes) { return string }
        return escapedString(Array(bytes))
    }

    /// `bytes` as a string if they are UTF-8, else nil: `String(validating:as:)`, whose
    /// generic metadata cost 3 us per file of W3 to look up (it was not specialized), but
    /// for bytes with 0xEF.
    @inlinable
    public static func utf8String(_ bytes: some Collection<UInt8>) -> String? {
        bytes.contains(0xEF) ? String(validating: bytes, as: UTF8.self) : decodedWithoutRepair(bytes)
    }

    /// Bytes without 0xEF as a string, if they are UTF-8: decoding repairs what is not with
    /// U+FFFD (EF BF BD), so a result with 0xEF was repaired.
    @inlinable
    static func decodedWithoutRepair(_ bytes: some Collection<UInt8>) -> String? {
        let string = String(decoding: bytes, as: UTF8.self)
        return string.utf8.contains(0xEF) ? nil : string
    }

    /// `string` for names that need escapes (or are not UTF-8).
    @usableFromInline
    static func escapedString(_ bytes: [UInt8]) -> String {
        var scalars = String.UnicodeScalarView()
        var index = 0
        while index < bytes.count {
            if let length = validSequenceLength(bytes, at: index) {
                let scalar = decode(bytes[index..<index + length])
                if !escapes.contains(scalar.value) {
                    scalars.append(scalar)
                    index += length
                    continue
                }
                for byte in bytes[index..<index + length] { scalars.append(escape(byte)) }
                index += length
            } else {
                scalars.append(escape(bytes[index]))
                index += 1
            }
        }
        return String(scalars)
    }

    /// The bytes `name` stands for.
    public static func bytes(_ name: String) -> [UInt8] {
        if !name.utf8.contains(0xEF) { return Array(name.utf8) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(name.utf8.count)
        for scalar in name.unicodeScalars {
            if escapes.contains(scalar.value) {
                bytes.append(UInt8(scalar.value - escapeBase))
            } else {
                bytes.append(contentsOf: UTF8.encode(scalar)!)
            }
        }
        return bytes
    }

    /// A name as formats before byte names wrote it (journal entries before 3, snapshots
    /// before 4): its characters as they are, even the private-use ones that now stand for
    /// bytes (those become their own UTF-8 bytes; every other name is unchanged).
    public static func literal(_ name: String) -> String {
        name.utf8.contains(0xEF) ? string(Array(name.utf8)) : name
    }

    /// How many bytes `name` stands for (what the 255-byte limit counts).
    public static func count(_ name: String) -> Int {
        name.utf8.contains(0xEF) ? bytes(name).count : name.utf8.count
    }

    private static func escape(_ byte: UInt8) -> Unicode.Scalar {
        Unicode.Scalar(escapeBase + UInt32(byte))!
    }

    private static func decode(_ sequence: ArraySlice<UInt8>) -> Unicode.Scalar {
        var iterator = sequence.makeIterator()
        var decoder = UTF8()
        guard case .scalarValue(let scalar) = decoder.decode(&iterator) else { preconditionFailure("validated") }
        return scalar
    }

    /// The length of the valid UTF-8 sequence starting at `index` (RFC 3629: no overlong
    /// forms, no surrogates, nothing above U+10FFFF), or nil.
    private static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int? {
        let first = bytes[index]
        let length: Int
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch first {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; second = 0xA0...0xBF
        case 0xED: length = 3; second = 0x80...0x9F
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xF0: length = 4; second = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; second = 0x80...0x8F
        default: return nil
        }
        guard index + length <= bytes.count, second.contains(bytes[index + 1]) else { return nil }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) { return nil }
        return length
    }
}
