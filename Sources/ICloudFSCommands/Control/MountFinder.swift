import ContainerFormat
import Foundation

/// Finds the mount of a container named instead of a mount point (`icloudfs kv get
/// iCloud.com.example.notes level`): a mount of it alone, or its folder in a mount of all
/// containers, from /proc/self/mounts.
enum MountFinder {
    /// `given` if it is a path; else the one mounted folder of the container it names.
    static func mountRoot(for given: String) throws -> String {
        guard !FileManager.default.fileExists(atPath: given), ContainerStore.isValidName(given), !given.contains("/") else {
            return given
        }
        let found = mountedFolders(of: given)
        switch found.count {
        case 1: return found[0]
        case 0: throw ExitMessage("\(given): no such folder, and no mount of a container of that name here")
        default: throw ExitMessage("\(given) is mounted at \(found.joined(separator: ", ")): give one of them")
        }
    }

    /// Every folder on this machine that shows `container`: the mount points of it alone
    /// and its folder in mounts of all containers.
    static func mountedFolders(of container: String) -> [String] {
        guard let table = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return [] }
        var found: [String] = []
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3, fields[2] == "fuse.icloudfs" else { continue }
            let mountPoint = unescaped(String(fields[1]))
            if let names = ExtendedAttributes.get(.containers, of: mountPoint) {
                if names.split(separator: "\n").contains(Substring(container)) {
                    found.append("\(mountPoint)/\(ContainerFolder.name(of: container))")
                }
            } else if unescaped(String(fields[0])) == container {
                found.append(mountPoint)
            }
        }
        return found
    }

    /// A field of the mount table: space, tab, newline and backslash are written `\NNN`.
    private static func unescaped(_ field: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3, let code = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(code)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
