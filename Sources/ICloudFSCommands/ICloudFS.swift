import ArgumentParser
import Foundation
import CLinux
import FuseAdapter
import FuseKernel

#if canImport(Glibc)
import Glibc
#endif

/// `icloudfs`: mount a cloud container and see and steer its sync.
public struct ICloudFS: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "icloudfs",
        abstract: "Mount a cloud ubiquity container as a folder, and inspect and control its sync.",
        discussion: """
            Each file's sync state is in its extended attributes: getfattr -d FILE.
            Exit status: 0 done, 1 failed, 2 bad usage.
            """,
        version: ICloudFSVersion.line,
        subcommands: [
            MountCommand.self, StatusCommand.self, SyncCommand.self, DownloadCommand.self, EvictCommand.self,
            PinCommand.self, UnpinCommand.self, ConflictsCommand.self, VersionsCommand.self, RestoreCommand.self,
            DeletedCommand.self, UndeleteCommand.self, PolicyCommand.self, CollectCommand.self,
            MonitorCommand.self, KeyValueCommand.self, QueryCommand.self, ContainersCommand.self,
        ]
    )

    public init() {}

    /// Runs the command line; errors print as one line `icloudfs: ...`, exit 1, and usage
    /// errors exit 2 (icloudfs(1), docs/man), not ArgumentParser's 64.
    public static func run(_ arguments: [String]) async -> Never {
        do {
            var command = try parseAsRoot(arguments)
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            Glibc.exit(0)
        } catch let error as ExitMessage {
            FileHandle.standardError.write(Data("icloudfs: \(error.description)\n".utf8))
            Glibc.exit(1)
        } catch let code as ExitCode {
            // The command printed its own lines already (one per path that failed).
            Glibc.exit(code.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success || error is CleanExit {
                exit(withError: error)
            }
            // Bad usage (an -o option, a missing argument): one line that names it, as
            // mount(8) users expect; the usage text would bury it.
            if code.rawValue == EX_USAGE {
                let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
                let hint = message.contains("--help") ? "" : " (see --help)"
                FileHandle.standardError.write(Data("icloudfs: \(message)\(hint)\n".utf8))
                Glibc.exit(2)
            }
            FileHandle.standardError.write(Data("icloudfs: \(error)\n".utf8))
            Glibc.exit(1)
        }
    }
}

public enum ICloudFSVersion {
    /// The package version (Scripts/package names the .deb by it).
    public static let current = "0.9.0"
    /// The commit built, as Scripts/package passes it ("unknown" in other builds).
    public static var commit: String { BuildCommit.value }
    /// What `icloudfs --version` and `mount.icloudfs -V` print.
    public static var line: String { "icloudfs \(current) (commit \(commit), FUSE kernel protocol \(KernelProtocol.version))" }
}
