import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// A store in a local (or NFS) folder: one file per key.
///
/// Writes go to a temporary file that is fsynced and then linked (`putIfAbsent`, which fails
/// when the name exists) or renamed (`put`) into place, and the folder is fsynced, so readers
/// in any process see whole objects only, and a crash leaves at most a stray temporary file.
/// Temporary files start with `.` and are never listed.
public struct DirectoryStore: BlobStore {
    public let root: FilePath

    public var location: String { root.string }

    /// Opens the store at `root`. With `create`, the folder is made if missing; otherwise a
    /// missing folder makes every call fail with `unavailable` (the store is out of reach).
    public init(root: FilePath, create: Bool = true) throws {
        self.root = root
        if create {
            try DirectoryStore.makeDirectories(root)
        }
    }

    public func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data {
        let path = self.path(of: key)
        return try await BlockingIO.run { () throws -> Data in
            try self.checked(key) { () throws -> Data in
                let (fd, size) = try self.openObject(path)
                defer { try? fd.close() }
                guard size <= maximumSize else {
                    throw StoreError.badObject("\(path) holds \(size) bytes, more than the \(maximumSize) allowed")
                }
                return try FileIO.read(fd, offset: 0, count: Int(size))
            }
        }
    }

    /// The object's file, for `copy_file_range`: its bytes never pass through our memory (a
    /// cold read copied each chunk twice through a new buffer).
    public func openLocally(_ key: BlobKey, maximumSize: UInt64) throws -> LocalObject? {
        let path = self.path(of: key)
        return try checked(key) { () throws -> LocalObject in
            let (fd, size) = try openObject(path)
            guard size <= maximumSize else {
                try? fd.close()
                throw StoreError.badObject("\(path) holds \(size) bytes, more than the \(maximumSize) allowed")
            }
            return LocalObject(fd: fd, size: size, path: path.string)
        }
    }

    /// Opens an object to read, and its size, without following a symlink or blocking on a
    /// FIFO, and only if it is a regular file (a store is shared: what it holds is untrusted).
    private func openObject(_ path: FilePath) throws -> (FileDescriptor, UInt64) {
        let fd: FileDescriptor
        do {
            fd = try FileDescriptor.open(path, .readOnly, options: [.closeOnExec, .noFollow, .nonBlocking])
        } catch Errno.tooManySymbolicLinkLevels {
            throw StoreError.badObject("\(path) is a symbolic link")
        }
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            try? fd.close()
            throw StoreError.badObject("\(path) is not a regular file")
        }
        return (fd, UInt64(info.st_size))
    }

    public func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data {
        let path = self.path(of: key)
        return try await BlockingIO.run { () throws -> Data in
            try self.checked(key) { () throws -> Data in
                let (fd, size) = try self.openObject(path)
                defer { try? fd.close() }
                let end = min(range.upperBound, size)
                guard range.lowerBound < end else { return Data() }
                return try FileIO.read(fd, offset: range.lowerBound, count: Int(end - range.lowerBound))
            }
        }
    }

    public func size(of key: BlobKey) async throws -> UInt64? {
        let path = self.path(of: key)
        return try await BlockingIO.run { () throws -> UInt64? in
            do {
                return try self.checked(key) { () throws -> UInt64? in
                    var info = stat()
                    guard stat(path.string, &info) == 0 else { throw Errno(rawValue: errno) }
                    return UInt64(info.st_size)
                }
            } catch StoreError.notFound {
                return nil
            }
        }
    }

    public func putIfAbsent(_ key: BlobKey, data: Data) async throws {
        try await write(key, data: data, replacing: false)
    }

    /// Writes every object without syncing each, then syncs the store's filesystem once:
    /// thousands of small chunks cost one flush, not two fsyncs each.
    public func putAllIfAbsent(_ objects: [(key: BlobKey, data: Data)]) async throws {
        for object in objects {
            do {
                try await write(object.key, data: object.data, replacing: false, durable: false)
            } catch StoreError.alreadyExists {
                continue
            }
        }
        try await BlockingIO.run { () throws in
            do {
                try FileIO.syncFileSystem(containing: self.root.string)
            } catch {
                throw StoreError.unavailable("directory store \(self.root) cannot be flushed: \(error)")
            }
        }
    }

    public func put(_ key: BlobKey, data: Data) async throws {
        try await write(key, data: data, replacing: true)
    }

    public func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] {
        Array(try await listAll(prefix: prefix, after: after).prefix(limit))
    }

    /// One walk of the folder the prefix names (paging through `list` would walk it once per
    /// page: a journal of 100,000 entries a hundred times).
    public func listAll(prefix: String, after: BlobKey?) async throws -> [StoredObject] {
        try await BlockingIO.run { () throws -> [StoredObject] in
            try self.requireRoot()
            // Walk only the folder the prefix names; keys are files below it.
            let slash = prefix.lastIndex(of: "/").map { prefix[..<$0] } ?? ""
            var found: [StoredObject] = []
            self.collectObjects(under: String(slash), into: &found)
            let matching = found.filter { object in
                object.key.rawValue.hasPrefix(prefix) && (after.map { after in after < object.key } ?? true)
            }
            return matching.sorted { $0.key < $1.key }
        }
    }

    /// The subfolders of the folder `prefix` names (no walk below them).
    public func listFolders(prefix: String) async throws -> [String] {
        try await BlockingIO.run { () throws -> [String] in
            try self.requireRoot()
            let relative = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
            let folder = relative.isEmpty ? self.root : self.root.appending(relative)
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: folder.string)) ?? []
            return entries.filter { entry in
                var info = stat()
                return !entry.hasPrefix(".") && lstat(folder.appending(entry).string, &info) == 0
                    && info.st_mode & S_IFMT == S_IFDIR
            }.sorted()
        }
    }

    public func delete(_ key: BlobKey) async throws {
        let path = self.path(of: key)
        try await BlockingIO.run { () throws in
            do {
                try self.checked(key) { () throws in
                    guard unlink(path.string) == 0 else { throw Errno(rawValue: errno) }
                }
            } catch StoreError.notFound {
                return
            }
        }
    }

    /// inotify on the folder of `prefix`: another process's new journal entry wakes readers
    /// at once (on NFS, where inotify sees only local writes, polling still finds it).
    /// The folder is made if missing, below the root only (`makeFolders`): made with its
    /// parents, a root moved away meanwhile would come back as a new empty store that devices
    /// push into. No root: no notifications (polling finds the store again).
    public func changeNotifications(prefix: String) -> AsyncStream<Void>? {
        let folder = root.appending(prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix)
        guard (try? makeFolders(folder)) != nil else { return nil }
        return FolderWatcher.stream(folder: folder.string)
    }

    // MARK: - Internals

    private func path(of key: BlobKey) -> FilePath {
        root.appending(key.rawValue)
    }

    private func write(_ key: BlobKey, data: Data, replacing: Bool, durable: Bool = true) async throws {
        let path = self.path(of: key)
        try await BlockingIO.run { () throws in
            guard let folder = path.removingLastComponent() as FilePath? else { return }
            let name = path.lastComponent?.string ?? "blob"
            let temporary = folder.appending(".\(name).\(getpid()).\(UInt64.random(in: 0...UInt64.max)).tmp")
            try self.checked(key) { () throws in
                let open = {
                    try FileDescriptor.open(
                        temporary, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                        permissions: [.ownerReadWrite, .groupRead, .otherRead])
                }
                let fd: FileDescriptor
                do {
                    fd = try open()
                } catch Errno.noSuchFileOrDirectory {
                    // The key's folder is made on first use only (no stat per write).
                    try self.makeFolders(folder)
                    fd = try open()
                }
                do {
                    if CrashPoint.objectHalfWritten.isArmed {
                        try FileIO.writeAll(fd, data.prefix(data.count / 2), offset: 0)
                        CrashPoint.objectHalfWritten.reach()
                    }
                    try FileIO.writeAll(fd, data, offset: 0)
                    guard !durable || fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
                    try fd.close()
                } catch {
                    try? fd.close()
                    unlink(temporary.string)
                    throw error
                }
            }
            defer { if !replacing { unlink(temporary.string) } }
            let result: Int32 =
                replacing
                ? rename(temporary.string, path.string)
                : link(temporary.string, path.string)
            if result != 0 {
                let error = Errno(rawValue: errno)
                if replacing { unlink(temporary.string) }
                if error == .fileExists { throw StoreError.alreadyExists(key.rawValue) }
                throw self.storeError(error, key: key)
            }
            if durable { try FileIO.syncDirectory(folder) }
        }
    }

    /// The temporary files of writes that never finished (their process was killed between
    /// making the file and linking it into place), older than `before`.
    public func removeAbandonedWrites(under prefix: String, before: Date) async throws -> Int {
        try await BlockingIO.run { () throws -> Int in
            try self.requireRoot()
            return self.removeTemporaries(under: prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix, before: before)
        }
    }

    private func removeTemporaries(under relative: String, before: Date) -> Int {
        var removed = 0
        walk(under: relative, includingHidden: true) { path, _, info in
            let name = path.lastComponent?.string ?? ""
            if info.st_mode & S_IFMT == S_IFREG, name.hasPrefix("."), name.hasSuffix(".tmp"),
                Double(info.st_mtim.tv_sec) < before.timeIntervalSince1970, unlink(path.string) == 0
            {
                removed += 1
            }
        }
        return removed
    }

    /// Objects below `relative`.
    private func collectObjects(under relative: String, into objects: inout [StoredObject]) {
        walk(under: relative, includingHidden: false) { _, relativePath, info in
            guard let key = try? BlobKey(relativePath) else { return }
            let modified = Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
            objects.append(StoredObject(key: key, size: UInt64(info.st_size), modified: modified))
        }
    }

    /// Calls `visit` with each entry below `relative` that is not a folder: its path, its
    /// path relative to the root, and its `lstat`. Names starting with `.` are skipped (never
    /// keys), files among them too unless `includingHidden` (temporary files). Symbolic links
    /// are never followed (a link to a parent folder would recurse forever) and the walk stops
    /// at a depth no key reaches.
    private func walk(
        under relative: String, includingHidden: Bool, depth: Int = 0, _ visit: (FilePath, String, stat) -> Void
    ) {
        let folder = relative.isEmpty ? root : root.appending(relative)
        guard depth < DirectoryStore.maximumKeyDepth,
            let entries = try? FileManager.default.contentsOfDirectory(atPath: folder.string)
        else {
            return
        }
        for entry in entries where includingHidden || !entry.hasPrefix(".") {
            let child = relative.isEmpty ? entry : relative + "/" + entry
            let path = folder.appending(entry)
            var info = stat()
            guard lstat(path.string, &info) == 0 else { continue }
            if info.st_mode & S_IFMT == S_IFDIR {
                if !entry.hasPrefix(".") { walk(under: child, includingHidden: includingHidden, depth: depth + 1, visit) }
            } else {
                visit(path, child, info)
            }
        }
    }

    /// Folders below the root a key may pass through (`CONTAINER/chunks/ab/HASH` is 3).
    static let maximumKeyDepth = 16

    private func requireRoot() throws {
        var info = stat()
        if stat(root.string, &info) != 0 || (info.st_mode & S_IFMT) != S_IFDIR {
            throw StoreError.unavailable("directory store \(root) is missing or not a folder")
        }
    }

    /// Runs `body`, turning errno into a `StoreError`; ENOENT is `notFound` only while the
    /// store's own folder exists (otherwise the whole store is unavailable).
    private func checked<T>(_ key: BlobKey, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as Errno {
            throw storeError(error, key: key)
        }
    }

    private func storeError(_ error: Errno, key: BlobKey) -> StoreError {
        switch error {
        case .noSuchFileOrDirectory, .notDirectory:
            if (try? requireRoot()) == nil {
                return .unavailable("directory store \(root) is missing or not a folder")
            }
            return .notFound(key.rawValue)
        case .permissionDenied, .notPermitted, .readOnlyFileSystem:
            return .permissionDenied("\(root): \(error)")
        case .noSpace, .diskQuotaExceeded:
            return .quotaExceeded("\(root): \(error)")
        default:
            return .failed("\(root)/\(key): \(error)")
        }
    }

    /// Makes `folder` and the folders between it and the root, never the root itself: a store
    /// folder moved away (a disk unmounted) between a check and the making must not come back
    /// as a new empty store, into which moving the old one back would nest it.
    private func makeFolders(_ folder: FilePath) throws {
        var current = root
        for component in folder.components.dropFirst(root.components.count) {
            current.append(component)
            guard mkdir(current.string, 0o755) == 0 || errno == EEXIST else {
                if errno == ENOENT { throw StoreError.unavailable("directory store \(root) is missing or not a folder") }
                throw StoreError.failed("cannot create folder \(current): \(Errno(rawValue: errno))")
            }
        }
    }

    static func makeDirectories(_ path: FilePath) throws {
        do {
            try FileManager.default.createDirectory(atPath: path.string, withIntermediateDirectories: true)
        } catch {
            throw StoreError.failed("cannot create folder \(path): \(error.localizedDescription)")
        }
    }
}
