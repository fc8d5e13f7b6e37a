import ArgumentParser
import Foundation
import SyncAttributes

/// `icloudfs sync [--wait] [--timeout D] MOUNTPOINT`
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Push queued changes now; with --wait, until everything is uploaded.")

    @Flag(help: "Wait until every change is in the store.")
    var wait = false

    @Option(help: "With --wait, give up after this long (e.g. 30s, 5m).")
    var timeout: String = "10m"

    @Argument(help: "The mount point (a folder in it waits for the whole container).")
    var mountPoint: String

    func validate() throws {
        guard MountOptions.duration(timeout) != nil else { throw ValidationError("--timeout: expected a duration like 30s") }
    }

    func run() async throws {
        guard ExtendedAttributes.isOnMount(mountPoint) else {
            throw ExitMessage("\(mountPoint): \(ExtendedAttributes.notOnMount(mountPoint))")
        }
        try ExtendedAttributes.set(.sync, "1", of: mountPoint)
        guard wait else { return }
        let limit = MountOptions.duration(timeout)!
        func notUploaded() -> String {
            StatusWalker(root: mountPoint).unsynced(limit: 20).filter { !$0.isUploaded }.map(\.path).joined(separator: ", ")
        }
        // The daemon answers once everything in its container is in the store (it looks
        // again as each round of its sync loop ends), or when the time is up.
        let client = try ControlClient(mountRoot: MountFinder.containerRoot(of: mountPoint))
        try client.send(.uploaded(milliseconds: Int(limit / .milliseconds(1))))
        guard case .result(let answer) = client.next() else { throw ExitMessage("the mount at \(mountPoint) hung up before its answer") }
        if answer == Data("true".utf8) {
            // The queue is empty, but a file whose cached bytes were lost before they were
            // uploaded went without them: that is not a success.
            guard let error = ExtendedAttributes.get(.uploadingError, of: mountPoint) else { return }
            throw ExitMessage("everything queued was pushed, but not all of it reached the store (\(error)): \(notUploaded())")
        }
        let error = ExtendedAttributes.get(.uploadingError, of: mountPoint).map { " (\($0))" } ?? ""
        throw ExitMessage("not everything was uploaded within \(timeout)\(error); still waiting: \(notUploaded())")
    }
}
