import Foundation

/// Starts `icloudfs-testhelper` (built beside the test bundle) as a child process.
public enum HelperProcess {
    public static var executable: String {
        let here = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: here).deletingLastPathComponent()
            .appendingPathComponent("icloudfs-testhelper").path
    }

    /// A started child; read `output()` after `waitUntilExit()`.
    public static func start(_ arguments: [String]) throws -> (Process, Pipe) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        return (process, pipe)
    }

    /// Runs to the end; returns the exit status and standard output.
    public static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let (process, pipe) = try start(arguments)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

extension HelperProcess {
    /// Starts `writers` child processes that wait for `startFile`, then all try to create
    /// `key` in `store` (a folder or an s3:// URL); returns the indexes of the winners and
    /// whether every child exited cleanly.
    public static func racePutIfAbsent(store: String, key: String, writers: Int, startFile: String) throws
        -> (winners: [Int], allExitedCleanly: Bool)
    {
        let children = try (0..<writers).map { i in
            try start(["race-put-if-absent", store, key, "writer-\(i)", startFile])
        }
        _ = FileManager.default.createFile(atPath: startFile, contents: nil)
        var winners: [Int] = []
        var clean = true
        for (i, (process, pipe)) in children.enumerated() {
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            clean = clean && process.terminationStatus == 0
            if output.contains("won") { winners.append(i) }
        }
        return (winners, clean)
    }
}
