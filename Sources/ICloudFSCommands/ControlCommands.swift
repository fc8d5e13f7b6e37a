import ArgumentParser
import Foundation
import SyncAttributes

#if canImport(Glibc)
import Glibc
#endif

/// Paths and `-r`, shared by download, evict, pin and unpin.
struct PathArguments: ParsableArguments {
    @Flag(name: .short, help: "Also folders, with everything below them.")
    var recursive = false

    @Argument(help: "Files (or, with -r, folders) on an icloudfs mount.")
    var paths: [String]

    /// Runs `body` for each path; failures print one line each and make the exit status 1.
    func forEach(_ body: (String) async throws -> Void) async throws {
        var failed = false
        for path in paths {
            do {
                guard ExtendedAttributes.isOnMount(path) else { throw ExitMessage(ExtendedAttributes.notOnMount(path)) }
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
                if isFolder.boolValue && !recursive { throw ExitMessage("is a folder (use -r)") }
                try await body(path)
            } catch {
                FileHandle.standardError.write(Data("icloudfs: \(path): \(error)\n".utf8))
                failed = true
            }
        }
        if failed { throw ExitCode.failure }
    }
}

/// `icloudfs download [-r] PATH...`
struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download", abstract: "Download files now and wait, with progress on a terminal.")

    @OptionGroup var arguments: PathArguments

    func run() async throws {
        try await arguments.forEach { path in
            try ExtendedAttributes.set(.download, "1", of: path)
            let progress = ProgressLine(label: path, totalBytes: DiskUsage.bytes(below: path))
            while true {
                let percent = Double(ExtendedAttributes.get(.percentDownloaded, of: path) ?? "0") ?? 0
                if ExtendedAttributes.get(.isDownloaded, of: path) == "1" {
                    progress.finish()
                    return
                }
                let downloading = ExtendedAttributes.get(.isDownloading, of: path) == "1"
                let requested = ExtendedAttributes.get(.downloadRequested, of: path) == "1"
                if let error = ExtendedAttributes.get(.downloadingError, of: path), !downloading {
                    progress.clear()
                    throw ExitMessage("download failed: \(error)")
                }
                if !downloading && !requested {
                    try ExtendedAttributes.set(.download, "1", of: path)
                }
                progress.update(percent: percent)
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }
}

/// `icloudfs evict [-r] PATH...`
struct EvictCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "evict",
        abstract: "Turn files back into placeholders (refused for files with changes not yet uploaded, or open).")

    @OptionGroup var arguments: PathArguments

    func run() async throws {
        try await arguments.forEach { path in
            do {
                try ExtendedAttributes.set(.evict, "1", of: path)
            } catch let error as ExtendedAttributes.Failure where error.code == EBUSY {
                throw ExitMessage("not evicted: it has changes not yet uploaded, or is open (icloudfs status shows which)")
            }
        }
    }
}

/// `icloudfs pin [-r] PATH...`
struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Keep files downloaded (downloads them now; never evicted).")

    @OptionGroup var arguments: PathArguments

    func run() async throws {
        try await arguments.forEach { try ExtendedAttributes.set(.isPinned, "1", of: $0) }
    }
}

/// `icloudfs unpin [-r] PATH...`
struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin", abstract: "Let pinned files be evicted again when the cache is full.")

    @OptionGroup var arguments: PathArguments

    func run() async throws {
        try await arguments.forEach { try ExtendedAttributes.set(.isPinned, "0", of: $0) }
    }
}

enum DiskUsage {
    /// Total size of the files at or below `path` (sizes are known before download).
    static func bytes(below path: String) -> UInt64 {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { return UInt64(info.st_size) }
        var total: UInt64 = 0
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let relative = enumerator?.nextObject() as? String {
            if stat("\(path)/\(relative)", &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { total += UInt64(info.st_size) }
        }
        return total
    }
}
