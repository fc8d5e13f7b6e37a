import CLinux
import Foundation
import SyncAttributes

#if canImport(Glibc)
import Glibc
#endif

/// Reading and writing extended attributes of paths on a mount: how the commands talk to
/// the running filesystem (no socket needed).
enum ExtendedAttributes {
    /// The value whatever its length (a conflict list may pass 4 KiB): asks for the size
    /// first, and again if the value grew in between (ERANGE).
    static func get(_ name: String, of path: String) -> String? {
        var capacity = 4096
        while true {
            var buffer = [UInt8](repeating: 0, count: capacity)
            let count = getxattr(path, name, &buffer, buffer.count)
            if count >= 0 { return String(decoding: buffer[0..<count], as: UTF8.self) }
            guard errno == ERANGE else { return nil }
            let size = getxattr(path, name, nil, 0)
            guard size >= 0 else { return nil }
            capacity = max(size, capacity * 2)
        }
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

    static func get(_ attribute: SyncAttribute, of path: String) -> String? { get(attribute.name, of: path) }

    static func set(_ attribute: SyncAttribute, _ value: String, of path: String) throws { try set(attribute.name, value, of: path) }

    /// Whether `path` is on an icloudfs mount (it answers `user.icloud.itemIdentifier`).
    static func isOnMount(_ path: String) -> Bool {
        get(.itemIdentifier, of: path) != nil
    }

    /// Why `path`, not on a mount's tree, is not what a command takes: the top of a mount
    /// of all containers (whose folders are), or no mount at all.
    static func notOnMount(_ path: String) -> String {
        get(.containers, of: path) != nil
            ? "is a mount of all containers: give a container's folder in it" : "not on an icloudfs mount"
    }
}
