import CFuse3
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Reading and writing extended attributes of paths on a mount: how the commands talk to
/// the running filesystem (no socket needed).
enum ExtendedAttributes {
    static func get(_ name: String, of path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = getxattr(path, name, &buffer, buffer.count)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[0..<count], as: UTF8.self)
    }

    static func set(_ name: String, _ value: String, of path: String) throws {
        guard setxattr(path, name, value, value.utf8.count, 0) == 0 else {
            throw Failure(name: name, code: errno)
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let name: String
        let code: Int32

        var description: String { "cannot set \(name): \(String(cString: strerror(code)))" }
    }

    /// Whether `path` is on an icloudfs mount (it answers `user.icloud.itemIdentifier`).
    static func isOnMount(_ path: String) -> Bool {
        get("user.icloud.itemIdentifier", of: path) != nil
    }
}
