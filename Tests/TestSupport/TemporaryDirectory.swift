import Foundation

/// A fresh folder under the system temp dir, removed by `remove()`.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "icloudfs-test") {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/\(label)-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    public func sub(_ name: String) -> String { "\(path)/\(name)" }
}
