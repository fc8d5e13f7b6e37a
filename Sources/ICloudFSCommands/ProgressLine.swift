import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A progress bar with bytes, rate and ETA on a terminal; a plain final line otherwise.
final class ProgressLine {
    let label: String
    let totalBytes: UInt64
    let start = ContinuousClock.now
    let isTerminal = isatty(STDERR_FILENO) != 0

    init(label: String, totalBytes: UInt64) {
        self.label = label
        self.totalBytes = totalBytes
    }

    func update(percent: Double) {
        guard isTerminal else { return }
        let done = UInt64(Double(totalBytes) * percent / 100)
        let elapsed = max(0.001, seconds(ContinuousClock.now - start))
        let rate = Double(done) / elapsed
        let eta = rate > 0 ? Double(totalBytes - min(done, totalBytes)) / rate : 0
        let width = 24
        let filled = Int(percent / 100 * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled)
        let line = "[\(bar)] \(String(format: "%5.1f", percent))%  \(Self.bytes(done)) of \(Self.bytes(totalBytes))  \(Self.bytes(UInt64(rate)))/s  ETA \(Int(eta))s  \(label)"
        FileHandle.standardError.write(Data("\r\u{1B}[K\(line)".utf8))
    }

    func clear() {
        if isTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    func finish() {
        clear()
        let elapsed = seconds(ContinuousClock.now - start)
        print("\(label): downloaded \(Self.bytes(totalBytes)) in \(String(format: "%.1f", elapsed)) s")
    }

    private func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var value = Double(count)
        var unit = 0
        while value >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }
}
