import ContainerFormat
import Foundation
import FuseAdapter

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

    /// The root of the mount (or of the container's folder in a mount of all containers)
    /// that `path` is in: its first folder up from it that names a cache. `path` itself if
    /// none does (the caller says what is wrong with it).
    static func containerRoot(of path: String) -> String {
        var folder = URL(fileURLWithPath: path).standardizedFileURL
        while ExtendedAttributes.get(.cacheFolder, of: folder.path) == nil,
            ExtendedAttributes.get(.itemIdentifier, of: folder.path) != nil, folder.path != "/"
        {
            folder.deleteLastPathComponent()
        }
        return ExtendedAttributes.get(.cacheFolder, of: folder.path) == nil ? path : folder.path
    }

    /// Every folder on this machine that shows `container`: the mount points of it alone
    /// and its folder in mounts of all containers.
    static func mountedFolders(of container: String) -> [String] {
        guard let table = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return [] }
        var found: [String] = []
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3, fields[2] == "fuse.icloudfs" else { continue }
            let mountPoint = MountTable.unescaped(fields[1])
            if let names = ExtendedAttributes.get(.containers, of: mountPoint) {
                if names.split(separator: "\n").contains(Substring(container)) {
                    found.append("\(mountPoint)/\(ContainerFolder.name(of: container))")
                }
            } else if MountTable.unescaped(fields[0]) == container {
                found.append(mountPoint)
            }
        }
        return found
    }
}
