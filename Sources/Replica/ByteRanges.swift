/// A set of byte ranges, kept sorted and merged: which parts of a file are present locally.
public struct ByteRanges: Hashable, Codable, Sendable {
    public private(set) var ranges: [Range<UInt64>]

    public init(_ ranges: [Range<UInt64>] = []) {
        self.ranges = []
        for range in ranges { insert(range) }
    }

    public mutating func insert(_ range: Range<UInt64>) {
        guard !range.isEmpty else { return }
        var lower = range.lowerBound
        var upper = range.upperBound
        var kept: [Range<UInt64>] = []
        kept.reserveCapacity(ranges.count + 1)
        for existing in ranges {
            if existing.upperBound < lower || existing.lowerBound > upper {
                kept.append(existing)
            } else {
                lower = min(lower, existing.lowerBound)
                upper = max(upper, existing.upperBound)
            }
        }
        kept.append(lower..<upper)
        ranges = kept.sorted { $0.lowerBound < $1.lowerBound }
    }

    /// Drops everything at or after `size` (a truncate).
    public mutating func truncate(to size: UInt64) {
        ranges = ranges.compactMap { range in
            range.lowerBound >= size ? nil : range.lowerBound..<min(range.upperBound, size)
        }
    }

    public func contains(_ range: Range<UInt64>) -> Bool {
        range.isEmpty || ranges.contains { $0.lowerBound <= range.lowerBound && $0.upperBound >= range.upperBound }
    }

    /// Whether any byte of `range` is in the set.
    public func overlaps(_ range: Range<UInt64>) -> Bool {
        ranges.contains { $0.overlaps(range) }
    }

    /// The parts of `range` not present.
    public func missing(in range: Range<UInt64>) -> [Range<UInt64>] {
        var gaps: [Range<UInt64>] = []
        var cursor = range.lowerBound
        for existing in ranges where existing.upperBound > cursor && existing.lowerBound < range.upperBound {
            if existing.lowerBound > cursor { gaps.append(cursor..<existing.lowerBound) }
            cursor = max(cursor, existing.upperBound)
        }
        if cursor < range.upperBound { gaps.append(cursor..<range.upperBound) }
        return gaps
    }

    /// Bytes present within `0..<size`.
    public func coveredBytes(below size: UInt64) -> UInt64 {
        ranges.reduce(0) { total, range in
            total + (range.lowerBound >= size ? 0 : min(range.upperBound, size) - range.lowerBound)
        }
    }
}
