import BlobStore
import Crypto
import Foundation
import SystemPackage

/// The SHA-256 of a chunk's bytes: its name in the store and its integrity check. Kept
/// inline as four words (every file of a large container holds one or more: no heap object
/// each).
public struct ChunkHash: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The digest's bytes in order, eight per word, big-endian.
    private let words: (UInt64, UInt64, UInt64, UInt64)

    public init(of data: some DataProtocol) {
        self.init(digest: SHA256.hash(data: data))
    }

    public init(of buffer: UnsafeRawBufferPointer) {
        self.init(digest: SHA256.hash(data: buffer))
    }

    /// The hash of `count` zero bytes (a hole's chunk), without a buffer that large.
    public init(ofZeros count: Int) {
        let zeros = [UInt8](repeating: 0, count: min(count, 64 << 10))
        var hasher = SHA256()
        var left = count
        zeros.withUnsafeBytes { block in
            while left > 0 {
                let step = min(left, block.count)
                hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: block[0..<step]))
                left -= step
            }
        }
        self.init(digest: hasher.finalize())
    }

    private init(digest: SHA256.Digest) {
        self = digest.withUnsafeBytes { ChunkHash(bytes: $0) }
    }

    /// A digest's length in bytes.
    public static let byteCount = 32

    /// From the 32 raw digest bytes.
    public init(bytes: [UInt8]) {
        self = bytes.withUnsafeBytes { ChunkHash(bytes: $0) }
    }

    /// From the 32 raw digest bytes.
    public init(bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == ChunkHash.byteCount, "a SHA-256 digest has 32 bytes")
        func word(_ index: Int) -> UInt64 {
            UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: index * 8, as: UInt64.self))
        }
        words = (word(0), word(1), word(2), word(3))
    }

    /// The 32 raw digest bytes.
    public var bytes: [UInt8] {
        withDigestBytes { Array($0) }
    }

    /// Appends the 32 raw digest bytes to `data`.
    public func append(to data: inout Data) {
        withDigestBytes { data.append(contentsOf: $0) }
    }

    /// The 32 raw digest bytes, without a copy on the heap (journals and state databases
    /// write every chunk's hash: this runs for each).
    private func withDigestBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let bigEndian = (words.0.bigEndian, words.1.bigEndian, words.2.bigEndian, words.3.bigEndian)
        return withUnsafeBytes(of: bigEndian) { body($0) }
    }

    public static func == (lhs: ChunkHash, rhs: ChunkHash) -> Bool {
        lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
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
        self.init(bytes: bytes)
    }

    public var hex: String {
        withDigestBytes { digest in
            String(unsafeUninitializedCapacity: 2 * ChunkHash.byteCount) { out in
                for (index, byte) in digest.enumerated() {
                    out[2 * index] = ChunkHash.hexDigit(byte >> 4)
                    out[2 * index + 1] = ChunkHash.hexDigit(byte & 0xF)
                }
                return 2 * ChunkHash.byteCount
            }
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    public var description: String { hex }

    public static func < (lhs: ChunkHash, rhs: ChunkHash) -> Bool {
        lhs.words < rhs.words  // big-endian words: the order of the bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

extension ChunkHash {
    /// A hash written as hex under `key`; a decoding error if it is not one.
    static func decodeHex<Key: CodingKey>(_ container: KeyedDecodingContainer<Key>, _ key: Key) throws -> ChunkHash {
        let hex = try container.decode(String.self, forKey: key)
        guard let hash = ChunkHash(hex: hex) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: container, debugDescription: "not a SHA-256 hex digest: \(hex)")
        }
        return hash
    }
}
