import ArgumentParser
import Foundation
import SyncAttributes

/// `icloudfs conflicts MOUNTPOINT`: files with unresolved conflicts and their copies.
struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "List files with unresolved conflicts and their conflict copies.",
        discussion: "A conflict is resolved by deleting the copy or renaming it away.")

    @Argument(help: "The mount point (or a folder on it).")
    var mountPoint: String

    func run() async throws {
        guard ExtendedAttributes.isOnMount(mountPoint) else { throw ExitMessage("\(mountPoint): \(ExtendedAttributes.notOnMount(mountPoint))") }
        let root = URL(fileURLWithPath: mountPoint).standardizedFileURL.path
        var found = 0
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = "\(root)/\(relative)"
            guard ExtendedAttributes.get(.hasUnresolvedConflicts, of: path) == "1" else { continue }
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue else { continue }
            found += 1
            print(relative)
            let folder = (relative as NSString).deletingLastPathComponent
            for copy in (ExtendedAttributes.get(.conflictCopies, of: path) ?? "").split(separator: "\n") {
                print("    \(folder.isEmpty ? String(copy) : "\(folder)/\(copy)")")
            }
        }
        if found == 0 { print("no unresolved conflicts under \(mountPoint)") }
    }
}
