import ArgumentParser
import Collection
import ContainerFormat
import Foundation
import SyncAttributes

/// `icloudfs status PATH...`: a table of sync states; for a folder, a summary and the items
/// not fully synced (like `brctl status`).
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the sync state of files, or a summary of a folder and what is not yet synced.")

    @Argument(help: "Files or folders on an icloudfs mount.")
    var paths: [String]

    func run() async throws {
        var failed = false
        for path in paths {
            guard let state = ItemSyncState(path: path) else {
                FileHandle.standardError.write(Data("icloudfs: \(path): \(ExtendedAttributes.notOnMount(path))\n".utf8))
                failed = true
                continue
            }
            print(StatusTable.header)
            print(StatusTable.row(state))
            if let usage = ExtendedAttributes.get(.cacheUsage, of: path)?.split(separator: " ").compactMap({ UInt64($0) }),
                usage.count == 3
            {
                print("cache: \(ProgressLine.bytes(usage[0])) downloaded of a \(ProgressLine.bytes(usage[2])) bound; \(ProgressLine.bytes(usage[1])) pinned, open or not uploaded")
                if usage[1] > usage[2] {
                    print("note: pinned, open and not-yet-uploaded files exceed the cache bound (they are never evicted)")
                }
            }
            // Only on the mount root.
            if let kernel = ExtendedAttributes.get(.kernel, of: path) {
                print(KernelLine.describe(kernel))
            }
            // Only on the mount root (it lists the store).
            if let json = ExtendedAttributes.get(.storeUsage, of: path),
                let usage = try? FormatCoding.decode(StoreUsage.self, from: Data(json.utf8))
            {
                CollectCommand.printUsage(usage, prefix: "store")
            }
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
                let pending = StatusWalker(root: path).unsynced(limit: 1000)
                if pending.isEmpty {
                    print("everything below \(path) is downloaded and uploaded")
                } else {
                    print("not fully synced below \(path):")
                    for item in pending { print(StatusTable.row(item)) }
                }
            }
        }
        if failed { throw ExitCode.failure }
    }
}

/// The `user.icloud.*` attributes of one path.
struct ItemSyncState {
    let path: String
    let values: [SyncAttribute: String]

    init?(path: String) {
        var values: [SyncAttribute: String] = [:]
        for attribute in SyncAttribute.state where attribute != .itemIdentifier && attribute != .downloadRequested {
            values[attribute] = ExtendedAttributes.get(attribute, of: path)
        }
        guard values[.isUploaded] != nil else { return nil }
        self.path = path
        self.values = values
    }

    var isUploaded: Bool { SyncAttributeValue.flag(values[.isUploaded]) == true }
    var isSynced: Bool {
        isUploaded && SyncAttributeValue.flag(values[.isDownloaded]) == true
            && SyncAttributeValue.flag(values[.hasUnresolvedConflicts]) != true
    }
}

enum StatusTable {
    static let header = pad("DOWNLOAD", 14) + pad("%", 6) + pad("UPLOAD", 10) + pad("%", 6) + pad("CONFLICT", 9) + "PATH"

    static func row(_ state: ItemSyncState) -> String {
        let download = state.values[.isDownloading] == "1" ? "downloading" : state.values[.downloadingStatus] ?? "?"
        let upload = state.isUploaded ? "uploaded" : "pending"
        var line = pad(download, 14) + pad(state.values[.percentDownloaded] ?? "?", 6) + pad(upload, 10)
            + pad(state.values[.percentUploaded] ?? "?", 6) + pad(state.values[.hasUnresolvedConflicts] == "1" ? "yes" : "-", 9)
            + state.path
        for attribute in [SyncAttribute.downloadingError, .uploadingError] {
            if let error = state.values[attribute] { line += "\n    \(attribute.rawValue): \(error)" }
        }
        return line
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}

/// Walks a folder on the mount for items not fully synced.
struct StatusWalker {
    let root: String

    func unsynced(limit: Int) -> [ItemSyncState] {
        var found: [ItemSyncState] = []
        // Foundation's enumerator needs an absolute path; rows show the path as given.
        let enumerator = FileManager.default.enumerator(atPath: URL(fileURLWithPath: root).standardizedFileURL.path)
        while let relative = enumerator?.nextObject() as? String, found.count < limit {
            let path = "\(root)/\(relative)"
            if let state = ItemSyncState(path: path), !state.isSynced {
                var isFolder: ObjCBool = false
                let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
                if exists && !isFolder.boolValue { found.append(state) }
            }
        }
        return found
    }
}

/// `status`'s line on how the kernel serves the mount (`user.icloud.kernel`).
enum KernelLine {
    static func describe(_ value: String) -> String {
        var words: [String: String] = [:]
        for word in value.split(separator: " ") {
            let parts = word.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { words[String(parts[0])] = String(parts[1]) }
        }
        let refused = Int(words["refusedOpens"] ?? "0") ?? 0
        let refusals = refused > 0 ? "\nnohydrate: \(refused) open(s) of files not downloaded refused to thumbnailers and indexers" : ""
        return kernelLine(words) + refusals
    }

    private static func kernelLine(_ words: [String: String]) -> String {
        let opens = "\(words["passthroughOpens"] ?? "0") opens served by the kernel, \(words["cachedOpens"] ?? "0") by the daemon"
        if words["passthrough"] == "on" {
            return "kernel: downloaded files are read by the kernel itself (passthrough); \(opens), \(words["read"] ?? "0") read requests"
        }
        let why = (words["why"] ?? "unknown").replacingOccurrences(of: "_", with: " ")
        return "kernel: every read goes through the daemon (passthrough off: \(why)); \(opens)"
    }
}
