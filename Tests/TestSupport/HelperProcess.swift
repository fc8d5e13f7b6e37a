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
