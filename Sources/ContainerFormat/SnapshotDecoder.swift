import Foundation
import Synchronization

/// Decodes snapshots, the items of a large one in parallel parts: decoding the JSON of a
/// 100,000-item snapshot is most of a new device's start-up. The parts are cut between the
/// elements of the top-level `items` array; anything unexpected falls back to one decode.
enum SnapshotDecoder {
    static func decode(_ data: Data) throws -> Snapshot {
        let parts = ProcessInfo.processInfo.activeProcessorCount
        guard data.count >= 1 << 20, parts > 1, let split = split(data, parts: parts) else {
            return try FormatCoding.decode(Snapshot.self, from: data)
        }
        var snapshot = try FormatCoding.decode(Snapshot.self, from: split.header)
        let decoded = Mutex<[Int: [Item]]>([:])
        DispatchQueue.concurrentPerform(iterations: split.items.count) { index in
            if let items = try? FormatCoding.decode([Item].self, from: split.items[index]) {
                decoded.withLock { $0[index] = items }
            }
        }
        let results = decoded.withLock { $0 }
        guard snapshot.items.isEmpty, results.count == split.items.count else {
            return try FormatCoding.decode(Snapshot.self, from: data)  // for its error
        }
        snapshot.items = (0..<split.items.count).flatMap { results[$0]! }
        return snapshot
    }

    /// The document with its `items` array emptied, and that array's elements as `parts`
    /// JSON arrays; nil if the document does not have that shape.
    static func split(_ data: Data, parts: Int) -> (header: Data, items: [Data])? {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> (header: Data, items: [Data])? in
            let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
            var depth = 0
            var inString = false
            var escaped = false
            var stringStart = 0
            var lastKey: Range<Int>?  // the last string closed at depth 1
            var open = -1, close = -1
            var commas: [Int] = []  // between the elements of `items`
            for index in 0..<bytes.count {
                let byte = bytes[index]
                if inString {
                    if escaped {
                        escaped = false
                    } else if byte == backslash {
                        escaped = true
                    } else if byte == quote {
                        inString = false
                        if depth == 1 { lastKey = stringStart..<index }
                    }
                    continue
                }
                switch byte {
                case quote:
                    inString = true
                    stringStart = index + 1
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    if depth == 1, byte == UInt8(ascii: "["), open < 0, let key = lastKey,
                        Array(bytes[key]) == Array("items".utf8)
                    {
                        open = index
                    }
                    depth += 1
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    depth -= 1
                    if depth == 1, open >= 0, close < 0 { close = index }
                    if depth < 0 { return nil }
                case UInt8(ascii: ","):
                    if depth == 2, open >= 0, close < 0 { commas.append(index) }
                default:
                    break
                }
            }
            guard depth == 0, !inString, open >= 0, close > open, !commas.isEmpty else { return nil }
            var header = Data(bytes[0...open])
            header.append(contentsOf: bytes[close...])
            // parts - 1 cuts, every (elements / parts)-th comma: parts of about equal size.
            let step = max(1, (commas.count + 1) / parts)
            let cuts = (1..<parts).map { $0 * step - 1 }.filter { $0 < commas.count }.map { commas[$0] }
            var items: [Data] = []
            var start = open + 1
            for cut in cuts + [close] {
                var part = Data("[".utf8)
                part.append(contentsOf: bytes[start..<cut])
                part.append(contentsOf: "]".utf8)
                items.append(part)
                start = cut + 1
            }
            return (header, items)
        }
    }
}
