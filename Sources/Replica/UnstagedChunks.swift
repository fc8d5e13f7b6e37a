import ContainerFormat
import Foundation

/// Chunks of queued versions whose only copy is still in their content files: where each
/// one's bytes are until it is uploaded. Saving a file costs no copy of its bytes; a write,
/// truncation or eviction that would change such bytes first copies them aside (staging,
/// see `Replica.copyQueuedBytesAside`), and uploads check every chunk's hash when they read it.
struct UnstagedChunks: Sendable {
    private var piecesByItem: [ItemID: [ContentChunker.Piece]] = [:]
    private var itemsByHash: [ChunkHash: Set<ItemID>] = [:]
    /// Bytes of small files' chunks kept with their pieces (`Piece.bytes`), at most
    /// `bytesKeptLimit`: a burst of small files goes up without reading each file again, and
    /// a long queue (offline) costs no more memory than this.
    private var bytesKept = 0
    static let bytesKeptLimit = 32 << 20

    var isEmpty: Bool { piecesByItem.isEmpty }

    /// Whether the content file of `id` holds the only copy of a queued chunk.
    func holdsBytes(of id: ItemID) -> Bool { piecesByItem[id] != nil }

    /// Records that `pieces` of the content file of `id` hold chunks not uploaded yet.
    mutating func add(_ pieces: some Sequence<ContentChunker.Piece>, of id: ItemID) {
        var known = piecesByItem[id] ?? []
        for var piece in pieces where !known.contains(where: { $0.offset == piece.offset && $0.ref == piece.ref }) {
            if let bytes = piece.bytes {
                if bytesKept + bytes.count <= UnstagedChunks.bytesKeptLimit { bytesKept += bytes.count } else { piece.bytes = nil }
            }
            known.append(piece)
            itemsByHash[piece.ref.hash, default: []].insert(id)
        }
        if !known.isEmpty { piecesByItem[id] = known }
    }

    /// The pieces of `id` whose bytes overlap `range`.
    func pieces(of id: ItemID, overlapping range: Range<UInt64>) -> [ContentChunker.Piece] {
        (piecesByItem[id] ?? []).filter { $0.range.overlaps(range) }
    }

    /// Removes and returns the pieces of `id` whose bytes overlap `range`.
    mutating func take(of id: ItemID, overlapping range: Range<UInt64>) -> [ContentChunker.Piece] {
        guard let pieces = piecesByItem[id] else { return [] }
        var taken: [ContentChunker.Piece] = []
        var kept: [ContentChunker.Piece] = []
        for piece in pieces {
            if piece.range.overlaps(range) { taken.append(piece) } else { kept.append(piece) }
        }
        guard !taken.isEmpty else { return [] }
        forgetBytes(of: taken)
        piecesByItem[id] = kept.isEmpty ? nil : kept
        for hash in Set(taken.map(\.ref.hash)) where !kept.contains(where: { $0.ref.hash == hash }) {
            itemsByHash[hash]?.remove(id)
            if itemsByHash[hash]?.isEmpty == true { itemsByHash[hash] = nil }
        }
        return taken
    }

    /// Where the bytes of `hash` may be: content files and offsets (the caller checks the hash).
    func locations(of hash: ChunkHash) -> [(id: ItemID, piece: ContentChunker.Piece)] {
        (itemsByHash[hash] ?? []).flatMap { id in
            (piecesByItem[id] ?? []).filter { $0.ref.hash == hash }.map { (id, $0) }
        }
    }

    /// Forgets chunks nothing needs any more (uploaded and landed).
    mutating func remove(_ hashes: some Sequence<ChunkHash>) {
        for hash in hashes {
            guard let ids = itemsByHash.removeValue(forKey: hash) else { continue }
            for id in ids {
                forgetBytes(of: piecesByItem[id]?.filter { $0.ref.hash == hash } ?? [])
                let kept = piecesByItem[id]?.filter { $0.ref.hash != hash } ?? []
                piecesByItem[id] = kept.isEmpty ? nil : kept
            }
        }
    }

    private mutating func forgetBytes(of pieces: [ContentChunker.Piece]) {
        bytesKept -= pieces.reduce(0) { $0 + ($1.bytes?.count ?? 0) }
    }
}

extension ContentChunker.Piece {
    var range: Range<UInt64> { offset..<offset + UInt64(ref.size) }

    /// A chunk list laid out in its file: each chunk with the offset it starts at.
    static func layout(_ chunks: [ChunkRef]) -> [ContentChunker.Piece] {
        var offset: UInt64 = 0
        return chunks.map { chunk in
            defer { offset += UInt64(chunk.size) }
            return .init(offset: offset, ref: chunk)
        }
    }

    /// As `layout`, marking the chunks of zeros: the runs' chunks and, with `lastChecker`, a
    /// last chunk of zeros (cut where the file ended: its hash is worked out).
    static func layout(_ chunks: [ChunkRef], zerosKnownBy lastChecker: Chunker?, runsOf chunker: Chunker) -> [ContentChunker.Piece] {
        var pieces = layout(chunks)
        for index in pieces.indices where chunker.isZeroRunChunk(pieces[index].ref) { pieces[index].isZeros = true }
        if let chunker = lastChecker, let last = pieces.indices.last, !pieces[last].isZeros,
            chunker.zeroChunkHash(Int(pieces[last].ref.size)) == pieces[last].ref.hash
        {
            pieces[last].isZeros = true
        }
        return pieces
    }
}
