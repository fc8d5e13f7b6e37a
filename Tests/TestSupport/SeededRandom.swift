import Foundation

/// A reproducible random source (SplitMix64): a failing seed replays the same run.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    public mutating func data(count: Int) -> Data {
        var data = Data(count: count)
        data.withUnsafeMutableBytes { buffer in
            let words = buffer.bindMemory(to: UInt64.self)
            for i in words.indices { words[i] = next() }
            for i in (words.count * 8)..<count { buffer[i] = UInt8(truncatingIfNeeded: next()) }
        }
        return data
    }
}
