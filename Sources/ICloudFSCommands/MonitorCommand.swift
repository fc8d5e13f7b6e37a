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
        guard ExtendedAttributes.get(.cacheFolder, of: mountPoint) != nil else {
            throw ExitMessage("\(mountPoint) is not the root of an icloudfs mount")
        }
        let client = try ControlClient(mountRoot: mountPoint)
        try client.send(.changes)
        // Until the mount ends (the daemon closes the channel) or Ctrl-C.
        while let answer = client.next() {
            guard case .change(let json) = answer else { continue }
            // Written straight to the file descriptor: unbuffered, so a pipe sees each line.
            if self.json {
                FileHandle.standardOutput.write(json + Data("\n".utf8))
            } else if let event = try? JSONDecoder().decode(ChangeEvent.self, from: json) {
                let text = "\(event.time)  \(event.kind.padding(toLength: 10, withPad: " ", startingAt: 0)) \(event.path)  (\(event.device))\n"
                FileHandle.standardOutput.write(Data(text.utf8))
            }
        }
    }
}
