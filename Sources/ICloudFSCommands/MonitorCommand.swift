import ArgumentParser
import Foundation
import SyncAttributes
import Replica

/// `icloudfs monitor MOUNTPOINT`: one line per remote change as it arrives.
struct MonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Stream remote changes as they arrive: time, kind, path, device (Ctrl-C ends).")

    @Flag(help: "One JSON object per line, for scripts.")
    var json = false

    @Argument(help: "The mount point.")
    var mountPoint: String

    func run() async throws {
        guard let cache = ExtendedAttributes.get(.cacheFolder, of: mountPoint) else {
            throw ExitMessage("\(mountPoint) is not the root of an icloudfs mount")
        }
        guard let handle = FileHandle(forReadingAtPath: "\(cache)/events.jsonl") else {
            throw ExitMessage("cannot read the change log in \(cache)")
        }
        _ = try handle.seekToEnd()
        var pending = Data()
        while ExtendedAttributes.isOnMount(mountPoint) {
            let data = handle.readDataToEndOfFile()
            if data.isEmpty {
                try await Task.sleep(for: .milliseconds(100))
                continue
            }
            pending += data
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[pending.startIndex..<newline]
                pending = Data(pending[(newline + 1)...])
                // Written straight to the file descriptor: unbuffered, so a pipe sees each line.
                if json {
                    FileHandle.standardOutput.write(Data(line) + Data("\n".utf8))
                } else if let event = try? JSONDecoder().decode(ChangeEvent.self, from: line) {
                    let text = "\(event.time)  \(event.kind.padding(toLength: 10, withPad: " ", startingAt: 0)) \(event.path)  (\(event.device))\n"
                    FileHandle.standardOutput.write(Data(text.utf8))
                }
            }
        }
    }
}
