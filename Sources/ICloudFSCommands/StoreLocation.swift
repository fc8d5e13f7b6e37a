import BlobStore
import BlobStoreS3
import Foundation
import SystemPackage

/// Where containers live: a store URL from `store=`, or the default directory store.
public enum StoreLocation {
    public static var defaultStore: String {
        let environment = ProcessInfo.processInfo.environment
        let data = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? "\(NSHomeDirectory())/.local/share"
        return "\(data)/icloudfs/store"
    }

    /// The folder `defaultCache` names for `mount --all` (a tilde is in no container's name).
    public static let allContainersCache = "all~containers"

    public static func defaultCache(for container: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "\(NSHomeDirectory())/.cache"
        return "\(cache)/icloudfs/\(container)"
    }

    /// Opens the store a URL names; throws a one-line reason for anything else.
    public static func open(_ given: String?) throws -> any BlobStore {
        let url = given ?? defaultStore
        if url.hasPrefix("s3://") {
            // Credentials and region come from the AWS environment and shared files.
            return try S3Store.open(url: url)
        }
        var path = url
        if url.hasPrefix("file://") { path = String(url.dropFirst("file://".count)) }
        guard path.hasPrefix("/") else {
            throw StoreError.invalidKey("store \(url): use an absolute path, file:///path or s3://bucket/prefix")
        }
        // Only the default store is made on first use: a missing explicit folder is more
        // likely an unmounted share than a wish for a new, empty store.
        var isFolder: ObjCBool = false
        if given != nil && !(FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) && isFolder.boolValue) {
            throw StoreError.unavailable(
                "store folder \(path) does not exist: create it (mkdir -p \(path)) or check that its disk is mounted")
        }
        return try DirectoryStore(root: FilePath(path), create: given == nil)
    }
}
