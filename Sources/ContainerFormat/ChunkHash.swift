import Crypto
import Foundation

/// The SHA-256 of a chunk's bytes: its name in the store and its integrity check.
public struct ChunkHash: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(of data: some DataProtocol) {
        bytes = Array(SHA256.hash(data: data))
    }

    public init(of buffer: UnsafeRawBufferPointer) {
        bytes = Array(SHA256.hash(data: buffer))
    }

    /// From the 32 raw digest bytes.
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 32, "a SHA-256 digest has 32 bytes")
        self.bytes = bytes
    }

    /// Parses 64 lowercase hex digits.
    public init?(hex: String) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 64 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let high = ChunkHash.nibble(utf8[i]), let low = ChunkHash.nibble(utf8[i + 1]) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        self.bytes = bytes
    }

    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func < (lhs: ChunkHash, rhs: ChunkHash) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
