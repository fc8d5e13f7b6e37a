/// Content-defined chunking (FastCDC-style gear hash with normalized chunking).
///
/// A boundary depends only on the 64 bytes before it, so an edit moves the boundaries near
/// it and no others: an insert near the start of a file changes a chunk or two, not every
/// chunk after it. With the defaults, chunks are 256 KiB to 4 MiB, about 1 MiB on average.
public struct Chunker: Sendable {
    public let parameters: ChunkingParameters
    private let gear: [UInt64]
    /// Harder to match (more bits) before the average size, easier after: chunk sizes
    /// cluster around the average ("normalized chunking", level 2).
    private let maskBeforeAverage: UInt64
    private let maskAfterAverage: UInt64

    public init(_ parameters: ChunkingParameters = .standard) {
        self.parameters = parameters
        gear = GearTable.values(seed: parameters.gearSeed)
        let bits = UInt64(parameters.averageSize.trailingZeroBitCount)
        maskBeforeAverage = Chunker.topBits(bits + 2)
        maskAfterAverage = Chunker.topBits(bits - 2)
    }

    /// The length of the chunk that starts at `buffer`'s first byte. `isFinal` says the
    /// buffer holds the rest of the file; otherwise nil means "give me more bytes" (the
    /// buffer is shorter than the largest chunk and no boundary was found).
    public func chunkLength(in buffer: UnsafeRawBufferPointer, isFinal: Bool) -> Int? {
        let count = buffer.count
        let minimum = parameters.minimumSize
        let maximum = parameters.maximumSize
        if count <= minimum { return isFinal ? count : nil }
        let end = min(count, maximum)
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
        if i < end { return i + 1 }
        if end == maximum || isFinal { return end }
        return nil
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
