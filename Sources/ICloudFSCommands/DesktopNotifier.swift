import Foundation
import Logging
import Replica
import Synchronization

/// Desktop notifications for what needs a person (docs/SEMANTICS.md "Desktop
/// notifications"): a conflict copy made, files that cannot be uploaded, uploads stopped for
/// long (the store out of reach, a full quota). Sent through the freedesktop notification
/// service of the session bus, by `notify-send` or `gdbus`, one at a time on a queue of
/// their own: a slow or missing notification service never holds up the daemon, and what
/// piles up meanwhile is dropped.
final class DesktopNotifier: Sendable {
    private let sender: [String]
    private let wait: Duration
    private let logger: Logger
    private let queue = DispatchQueue(label: "icloudfs.notifications")
    private let queued = Atomic<Int>(0)

    /// Nil without a session bus or a program to reach its notification service.
    static func make(options: MountOptions, logger: Logger) -> DesktopNotifier? {
        guard options.notify else { return nil }
        let environment = ProcessInfo.processInfo.environment
        let runtimeBus = environment["XDG_RUNTIME_DIR"].map { "\($0)/bus" }
        guard environment["DBUS_SESSION_BUS_ADDRESS"] != nil || runtimeBus.map(FileManager.default.fileExists) == true
        else { return nil }
        if let notifySend = Self.program("notify-send") {
            return DesktopNotifier(sender: [notifySend, "--app-name=icloudfs"], wait: options.notifyWait, logger: logger)
        }
        if let gdbus = Self.program("gdbus") {
            return DesktopNotifier(sender: [gdbus], wait: options.notifyWait, logger: logger)
        }
        return nil
    }

    private init(sender: [String], wait: Duration, logger: Logger) {
        self.sender = sender
        self.wait = wait
        self.logger = logger
    }

    private static func program(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Watches `replica`, the container `name` mounted at `folder`, until the task returned
    /// is cancelled.
    func watch(_ replica: Replica, name: String, folder: String) -> Task<Void, Never> {
        let following = replica.followChanges { [self] events in
            let conflicts = events.filter { $0.kind == "conflict" }
            guard !conflicts.isEmpty else { return }
            let shown = conflicts.prefix(3).map { "\(folder)/\($0.path)" }.joined(separator: "\n")
            let more = conflicts.count > 3 ? "\nand \(conflicts.count - 3) more" : ""
            send(
                "Conflict in \(name)",
                "\(conflicts.count == 1 ? "A file was" : "\(conflicts.count) files were") changed on two devices at once; both versions are kept:\n\(shown)\(more)")
        }
        return Task { [self] in
            defer { replica.stopFollowingChanges(following) }
            var failingSince: ContinuousClock.Instant?
            var told = false
            var lostTold = 0
            while !Task.isCancelled {
                let problems = replica.uploadProblems
                if let error = problems.error {
                    let since = failingSince ?? .now
                    failingSince = since
                    if !told, ContinuousClock.now - since >= wait {
                        told = true
                        send("Sync of \(name) stopped", "\(error)\nChanges made here stay queued and go up once this clears.")
                    }
                } else {
                    failingSince = nil
                    told = false
                }
                if problems.lostChunks > lostTold {
                    send(
                        "Files of \(name) cannot be uploaded",
                        "Their content was lost from this device's cache before it reached the store. icloudfs status \(folder) lists them.")
                }
                lostTold = problems.lostChunks
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Queues one notification; dropped if three are waiting already.
    private func send(_ title: String, _ body: String) {
        guard queued.add(1, ordering: .relaxed).newValue <= 3 else {
            queued.subtract(1, ordering: .relaxed)
            return
        }
        let arguments =
            sender.count == 1
            ? [
                "call", "--session", "--timeout", "5", "--dest", "org.freedesktop.Notifications", "--object-path",
                "/org/freedesktop/Notifications", "--method", "org.freedesktop.Notifications.Notify", "icloudfs", "0", "",
                title, body, "[]", "{}", "-1",
            ]
            : [title, body]
        queue.async { [self] in
            defer { queued.subtract(1, ordering: .relaxed) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: sender[0])
            process.arguments = Array(sender.dropFirst()) + arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do {
                try process.run()
                process.waitUntilExit()
            } catch {
                logger.debug("desktop notification not sent: \(error)")
            }
        }
    }
}
