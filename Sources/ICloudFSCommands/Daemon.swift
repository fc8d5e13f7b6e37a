import ArgumentParser
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Starting the mount in the background: the binary runs itself again in the foreground
/// (no `fork()` once threads exist) and reports "ready" or one error line on a pipe; this
/// process exits 0 only after "ready".
enum Daemon {
    static let readyLine = "ready"

    static func start(arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var collected = Data()
        while true {
            let piece = pipe.fileHandleForReading.availableData
            if piece.isEmpty { break }
            collected += piece
            if collected.contains(UInt8(ascii: "\n")) { break }
        }
        let line = String(decoding: collected, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
        if line == readyLine { return }
        process.waitUntilExit()
        throw ExitMessage(
            line.isEmpty ? "the mount process exited without reporting (status \(process.terminationStatus)); run with --foreground to see why" : line)
    }

    /// In the child, first thing: logs go to the cache's log file, so that standard output
    /// carries only the one report line.
    static func logTo(_ logFile: String) {
        let fd = open(logFile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        if fd >= 0 {
            dup2(fd, STDERR_FILENO)
            close(fd)
        }
    }

    /// In the child: the mount is usable; detach from the parent and its terminal.
    static func reportReady() {
        FileHandle.standardOutput.write(Data((readyLine + "\n").utf8))
        let null = open("/dev/null", O_WRONLY)
        if null >= 0 {
            dup2(null, STDOUT_FILENO)
            close(null)
        }
        setsid()
    }

    /// In the child: the mount failed; the parent prints this line.
    static func reportFailure(_ message: String) {
        FileHandle.standardOutput.write(Data((message + "\n").utf8))
    }
}

/// A failure reported as one line, `icloudfs: MESSAGE`, with exit status 1.
struct ExitMessage: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
