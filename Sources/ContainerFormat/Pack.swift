import Foundation
import SwiftProtobuf

/// Where a chunk lies in a pack.
public struct PackedChunk: Hashable, Sendable {
    public var hash: ChunkHash
    public var offset: UInt64
    public var size: UInt32

    public init(hash: ChunkHash, offset: UInt64, size: UInt32) {
        self.hash = hash
        self.offset = offset
        self.size = size
    }

    public var range: Range<UInt64> { offset..<offset + UInt64(size) }
}

/// A pack named by a journal entry, with its chunks.
public struct PackRecord: Hashable, Sendable {
    public var id: ChunkHash
    public var chunks: [PackedChunk]

    public init(id: ChunkHash, chunks: [PackedChunk]) {
        self.id = id
        self.chunks = chunks
    }
}

/// Where a chunk stored in a pack is: what the fold keeps per packed chunk (`Tree.packedChunks`).
public struct PackedLocation: Hashable, Sendable {
    public var pack: ChunkHash
    public var offset: UInt64
    public var size: UInt32

    public init(pack: ChunkHash, offset: UInt64, size: UInt32) {
        self.pack = pack
        self.offset = offset
        self.size = size
    }

    public func chunk(_ hash: ChunkHash) -> PackedChunk { PackedChunk(hash: hash, offset: offset, size: size) }
}

/// Small chunks of one push batch stored as one object (docs/FORMAT.md, "packs"): the chunks
/// back to back, then their index (`PackIndexMessage`), then the index's length (4 bytes,
/// little-endian) and the magic `ICPK`. Named by the SHA-256 of all its bytes, so writing
/// one again after a crash writes the same object.
public struct Pack: Sendable {
    public static let formatVersion: UInt32 = 1
    /// A pack holds at most about this many bytes of chunks (one more chunk may pass it).
    public static let largest = 16 << 20
    static let magic = Data("ICPK".utf8)
    static let footerSize = 8

    public let id: ChunkHash
    public let bytes: Data
    public let chunks: [PackedChunk]

    /// Packs `pieces` (hash and bytes of each chunk) in order; a chunk listed twice is
    /// stored once.
    public init(_ pieces: [(hash: ChunkHash, data: Data)]) {
        var bytes = Data(capacity: pieces.reduce(64) { $0 + $1.data.count + ChunkHash.byteCount + 4 })
        var chunks: [PackedChunk] = []
        var seen = Set<ChunkHash>()
        for piece in pieces where seen.insert(piece.hash).inserted {
            chunks.append(PackedChunk(hash: piece.hash, offset: UInt64(bytes.count), size: UInt32(piece.data.count)))
            bytes.append(piece.data)
        }
        var index = PackIndexMessage()
        index.format = Pack.formatVersion
        index.chunkHashes = PackedChunks.hashes(chunks.map { ChunkRef(hash: $0.hash, size: $0.size) })
        index.chunkSizes = chunks.map(\.size)
        // Serializing a message built here cannot fail (no required fields, no Any).
        let encoded: Data = try! index.serializedBytes()
        bytes.append(encoded)
        withUnsafeBytes(of: UInt32(encoded.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(Pack.magic)
        self.id = ChunkHash(of: bytes)
        self.bytes = bytes
        self.chunks = chunks
    }

    /// The chunks a whole pack's bytes hold, checked against its footer and size (a pack
    /// is untrusted store content like any other). The chunks' own bytes are checked by
    /// their hashes when read.
    public static func index(of bytes: Data) throws -> [PackedChunk] {
        guard bytes.count >= footerSize, bytes.suffix(4) == magic else { throw PackError.notAPack }
        let lengthBytes = bytes.dropLast(4).suffix(4)
        let length = lengthBytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        guard Int(length) <= bytes.count - footerSize else { throw PackError.malformed("index beyond the pack") }
        let indexStart = bytes.startIndex + bytes.count - footerSize - Int(length)
        let message = try PackIndexMessage(serializedBytes: bytes[indexStart..<(bytes.endIndex - footerSize)])
        guard message.format <= formatVersion else { throw PackError.unsupported(message.format) }
        guard let refs = PackedChunks.chunks(hashes: message.chunkHashes, sizes: message.chunkSizes) else {
            throw PackError.malformed("chunk hashes and sizes do not match")
        }
        var offset: UInt64 = 0
        let chunks = refs.map { ref in
            defer { offset += UInt64(ref.size) }
            return PackedChunk(hash: ref.hash, offset: offset, size: ref.size)
        }
        guard offset == UInt64(indexStart - bytes.startIndex) else {
            throw PackError.malformed("its chunks take \(offset) bytes, not \(indexStart - bytes.startIndex)")
        }
        return chunks
    }
}

/// Gathers chunks into packs of about `Pack.largest` bytes: `add` hands back a pack once
/// one is full, `finish` the rest.
public struct PackFiller {
    private var pieces: [(hash: ChunkHash, data: Data)] = []
    private var bytes = 0

    public init() {}

    public mutating func add(_ hash: ChunkHash, _ data: Data) -> Pack? {
        pieces.append((hash, data))
        bytes += data.count
        return bytes >= Pack.largest ? finish() : nil
    }

    public mutating func finish() -> Pack? {
        guard !pieces.isEmpty else { return nil }
        defer {
            pieces = []
            bytes = 0
        }
        return Pack(pieces)
    }
}

public enum PackError: Error, Equatable, CustomStringConvertible {
    case notAPack
    case malformed(String)
    case unsupported(UInt32)

    public var description: String {
        switch self {
        case .notAPack: "not a pack (no ICPK footer)"
        case .malformed(let why): "a malformed pack: \(why)"
        case .unsupported(let format): "a pack of format \(format), newer than this icloudfs"
        }
    }
}
