/// Content-defined chunking (FastCDC-style gear hash with normalized chunking), with long
/// runs of zeros cut apart from the data around them.
///
/// A boundary depends only on the bytes near it, so an edit moves the boundaries near it and
/// no others: an insert near the start of a file changes a chunk or two, not every chunk
/// after it. With the defaults, chunks are 256 KiB to 4 MiB, about 1 MiB on average. The gear
/// hash never matches inside zeros, so without the zero rule a sparse file's chunks would be
/// `max` long and their phase set by the file's start: one new boundary early in the file
/// would move every later one. A run of at least `zeroRunSize` zeros therefore ends the
/// chunk before it and is cut into chunks of its own, ending where the zeros end.
public struct Chunker: Sendable {
    public let parameters: ChunkingParameters
    private let gear: [UInt64]
    /// Harder to match (more bits) before the average size, easier after: chunk sizes
    /// cluster around the average ("normalized chunking", level 2).
    private let maskBeforeAverage: UInt64
    private let maskAfterAverage: UInt64
    /// The hashes of the chunks long runs of zeros are cut into (`zeroChunkLength`), by size.
    private let zeroRunHashes: [Int: ChunkHash]

    public init(_ parameters: ChunkingParameters = .standard) {
        self.parameters = parameters
        gear = GearTable.values(seed: parameters.gearSeed)
        let bits = UInt64(parameters.averageSize.trailingZeroBitCount)
        maskBeforeAverage = Chunker.topBits(bits + 2)
        maskAfterAverage = Chunker.topBits(bits - 2)
        var sizes = [parameters.maximumSize]
        var size = 1 << (Int.bitWidth - 1 - parameters.zeroRunSize.leadingZeroBitCount)
        while size < parameters.maximumSize {
            sizes.append(size)
            size <<= 1
        }
        zeroRunHashes = Dictionary(uniqueKeysWithValues: sizes.map { ($0, ChunkHash(ofZeros: $0)) })
    }

    /// The length of the chunk that starts at `buffer`'s first byte. `isFinal` says the
    /// buffer holds the rest of the file; otherwise nil means "give me more bytes" (the
    /// buffer is shorter than the largest chunk and holds too little to decide). A boundary
    /// may depend on up to `zeroRunSize` bytes after it (whether a run of zeros follows).
    public func chunkLength(in buffer: UnsafeRawBufferPointer, isFinal: Bool) -> Int? {
        let count = buffer.count
        let maximum = parameters.maximumSize
        let run = parameters.zeroRunSize
        let end = min(count, maximum)
        let complete = isFinal || count >= maximum
        let zeros = Chunker.leadingZeros(in: buffer, end: end)
        if zeros == end && !complete { return nil }
        if let length = zeroChunkLength(zeros: zeros, end: end) { return length }
        let cut = gearBoundary(in: buffer, end: end)
        if let start = Chunker.firstZeroRun(in: buffer, end: end, before: cut ?? end, length: run) { return start }
        // A run that starts before the boundary may reach past the bytes given.
        if let cut { return complete || cut - 1 + run <= count ? cut : nil }
        return complete ? end : nil
    }

    /// The length of a chunk that starts with `zeros` zero bytes, counted up to `end` (the
    /// largest chunk or the rest of the file), if they decide it: a long run is cut into
    /// chunks of `max` bytes, then of powers of two (so a run of any length is made of a few
    /// chunk sizes, each stored once in a container); nil for a chunk of data.
    public func zeroChunkLength(zeros: Int, end: Int) -> Int? {
        if zeros >= parameters.maximumSize { return parameters.maximumSize }
        if zeros >= parameters.zeroRunSize { return 1 << (Int.bitWidth - 1 - zeros.leadingZeroBitCount) }
        return zeros == end ? end : nil  // zeros up to the end of the file
    }

    /// Whether `ref` is one of the chunks `zeroChunkLength` cuts a long run into. Such a
    /// boundary depends on up to `ref.size` bytes after it (where the zeros end).
    public func isZeroRunChunk(_ ref: ChunkRef) -> Bool {
        zeroRunHashes[Int(ref.size)] == ref.hash
    }

    /// The hash of `count` zero bytes (of a run's chunks: known, not computed).
    public func zeroChunkHash(_ count: Int) -> ChunkHash {
        zeroRunHashes[count] ?? ChunkHash(ofZeros: count)
    }

    /// The gear hash's boundary in `buffer[..<end]` (just after the byte that matched), if any.
    private func gearBoundary(in buffer: UnsafeRawBufferPointer, end: Int) -> Int? {
        let minimum = parameters.minimumSize
        guard minimum < end else { return nil }
        let average = min(end, parameters.averageSize)
        var hash: UInt64 = 0
        var i = minimum
        gear.withUnsafeBufferPointer { gear in
            while i < average {
                hash = (hash << 1) &+ gear[Int(buffer[i])]
                if hash & maskBeforeAverage == 0 { return }
                i += 1
            }
            while i < end {
                hash = (hash << 1) &+ gear[Int(buffer[i])]
                if hash & maskAfterAverage == 0 { return }
                i += 1
            }
        }
        return i < end ? i + 1 : nil
    }

    /// How many zero bytes `buffer` starts with, up to `end`.
    public static func leadingZeros(in buffer: UnsafeRawBufferPointer, end: Int) -> Int {
        var i = 0
        while i + 8 <= end {
            let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            if word != 0 { return i + word.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < end, buffer[i] == 0 { i += 1 }
        return i
    }

    /// The start of the first run of at least `length` zeros in `buffer[..<end]` that starts
    /// after a non-zero byte and before `limit`. `length` is at least 64, so a run spans words.
    static func firstZeroRun(in buffer: UnsafeRawBufferPointer, end: Int, before limit: Int, length: Int) -> Int? {
        let scanEnd = min(end, limit - 1 + length)  // far enough to see a run that starts before `limit`
        // A run follows a non-zero byte: it needs more than `length` bytes (a small file's
        // close would otherwise look at every word of it).
        guard scanEnd > length else { return nil }
        var runStart = 0  // just after the last non-zero byte seen
        // Whether the zeros from `runStart` up to `position` make a run.
        func isRun(upTo position: Int) -> Bool { runStart > 0 && position - runStart >= length }
        var i = 0
        while i < scanEnd {
            if i + 8 <= scanEnd {
                let word = UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                i += 8
                guard word != 0 else {
                    if isRun(upTo: i) { break }
                    continue
                }
                if isRun(upTo: i - 8 + word.trailingZeroBitCount / 8) { break }
                runStart = i - 8 + (63 - word.leadingZeroBitCount) / 8 + 1
            } else {
                i += 1
                guard buffer[i - 1] != 0 else { continue }
                if isRun(upTo: i - 1) { break }
                runStart = i
            }
            if runStart >= limit { return nil }
        }
        return isRun(upTo: i) && runStart < limit ? runStart : nil
    }

    /// Lengths of the chunks of a whole buffer, in order.
    public func chunkLengths(of buffer: UnsafeRawBufferPointer) -> [Int] {
        var lengths: [Int] = []
        var start = 0
        while start < buffer.count {
            let rest = UnsafeRawBufferPointer(rebasing: buffer[start...])
            let length = chunkLength(in: rest, isFinal: true)!
            lengths.append(length)
            start += length
        }
        return lengths
    }

    private static func topBits(_ n: UInt64) -> UInt64 {
        n == 0 ? 0 : ~UInt64(0) << (64 - n)
    }
}

/// How a container cuts files into chunks; recorded in its identity so that every device
/// cuts the same way (equal content, equal chunks, stored once).
public struct ChunkingParameters: Hashable, Codable, Sendable {
    public var minimumSize: Int
    /// A power of two.
    public var averageSize: Int
    public var maximumSize: Int
    public var gearSeed: UInt64

    /// Runs of zeros at least this long are chunks of their own (not recorded: derived).
    public var zeroRunSize: Int { max(64, minimumSize / 4) }

    public static let standard = ChunkingParameters(
        minimumSize: 256 << 10, averageSize: 1 << 20, maximumSize: 4 << 20, gearSeed: 0x6963_6c6f_7564_6673)

    public init(minimumSize: Int, averageSize: Int, maximumSize: Int, gearSeed: UInt64) {
        self.minimumSize = minimumSize
        self.averageSize = averageSize
        self.maximumSize = maximumSize
        self.gearSeed = gearSeed
    }

    /// Sizes that make a working chunker (untrusted identity records are checked).
    public var isValid: Bool {
        minimumSize >= 64 && averageSize.nonzeroBitCount == 1 && averageSize > minimumSize
            && maximumSize > averageSize && maximumSize <= 64 << 20 && averageSize >= 1 << 8
    }

    enum CodingKeys: String, CodingKey {
        case minimumSize = "min", averageSize = "average", maximumSize = "max", gearSeed
    }
}

/// The gear hash's 256 random words, made by SplitMix64 from the seed, so another
/// implementation can compute the same table (docs/FORMAT.md).
enum GearTable {
    static func values(seed: UInt64) -> [UInt64] {
        var state = seed
        return (0..<256).map { _ in
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }
}
