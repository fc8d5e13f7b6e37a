import ArgumentParser
import BlobStore
import Collection
import ContainerFormat
import Foundation
import SyncAttributes
import Logging

/// `icloudfs gc MOUNTPOINT | --store URL CONTAINER [--dry-run] [--json]`
struct CollectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gc",
        abstract: "Delete what the store keeps for nothing: chunks no file, kept version or kept deleted item names, and journal entries behind a snapshot.",
        discussion: """
            First it expires the versions and deleted items older than the retention policy \
            (icloudfs policy). Then it records the chunks it will delete and waits the \
            policy's grace (default 1h) so that every device can see the record before \
            anything goes; a device about to name one of them keeps it. Safe while other \
            devices work, on directory and S3 stores. Packs mostly of deleted chunks have \
            their used chunks packed again first; what writes cut short by a crash left in \
            a directory store goes after an hour. Devices run it on their own when none has \
            for a day (mount option nogc turns that off on one).
            """)

    @Argument(help: "A mount point of the container, or with --store the container's name.")
    var target: String

    @Option(help: "Collect the container named by the argument in this store (no mount needed).")
    var store: String?

    @Flag(help: "Only say what would be deleted.")
    var dryRun = false

    @Flag(help: "Print the result as JSON.")
    var json = false

    func run() async throws {
        let result = try await store == nil ? throughMount() : inProcess()
        if json {
            print(String(decoding: FormatCoding.encode(result), as: UTF8.self))
            return
        }
        Self.printUsage(result.before, prefix: "store")
        if result.expiredItems > 0 {
            print("\(dryRun ? "would expire" : "expired") past versions or deleted items of \(result.expiredItems) item(s)")
        }
        let bytes = ProgressLine.bytes
        if result.repackedPacks > 0 {
            print("repacked \(result.repackedPacks) pack(s) (\(bytes(result.repackedBytes))) mostly of deleted chunks")
        }
        if dryRun {
            let packs = result.candidatePacks > 0 ? " and \(result.candidatePacks) pack(s) (\(bytes(result.candidatePackBytes)))" : ""
            print("would delete \(result.candidateChunks) chunk(s) (\(bytes(result.candidateBytes)))\(packs), \(result.deletedEntries) journal entries, \(result.deletedSnapshots) snapshot(s)")
        } else {
            let packs = result.deletedPacks > 0 ? " and \(result.deletedPacks) pack(s) (\(bytes(result.deletedPackBytes)))" : ""
            print("deleted \(result.deletedChunks) chunk(s) (\(bytes(result.deletedBytes)))\(packs), \(result.deletedEntries) journal entries, \(result.deletedSnapshots) snapshot(s)"
                + (result.keptChunks > 0 ? "; kept \(result.keptChunks) chunk(s) a device named meanwhile" : ""))
            if result.removedAbandonedWrites > 0 {
                print("removed \(result.removedAbandonedWrites) partial write(s) a crash left in the store")
            }
        }
    }

    static func printUsage(_ usage: StoreUsage, prefix: String) {
        let bytes = ProgressLine.bytes
        print("\(prefix): \(bytes(usage.liveBytes)) live, \(bytes(usage.historyBytes)) history, \(bytes(usage.collectableBytes)) collectable, \(bytes(usage.journalBytes)) journal (\(usage.journalEntries) \(usage.journalEntries == 1 ? "entry" : "entries"))")
    }

    /// The mount's daemon collects; its steps come over the control channel.
    private func throughMount() async throws -> CollectionResult {
        let root = try DeletedListing.mountRoot(of: target)
        let client = try ControlClient(mountRoot: root)
        try client.send(.collect(dryRun: dryRun))
        defer { clearStep() }
        while let answer = client.next() {
            switch answer {
            case .step(let text): step(text)
            case .result(let json): return try FormatCoding.decode(CollectionResult.self, from: json)
            case .failed(let message): throw ExitMessage("\(target): collection failed: \(message)")
            case .change, .item: continue
            }
        }
        throw ExitMessage("\(target): the mount ended before the collection did")
    }

    private func inProcess() async throws -> CollectionResult {
        let logger = Logger(label: "icloudfs-gc") { _ in SwiftLogNoOpLogHandler() }
        let container: ContainerStore
        do {
            container = try ContainerStore(store: try StoreLocation.open(store), container: target)
            guard try await container.readIdentity() != nil else {
                throw ExitMessage("container \(target) is not in store \(store ?? StoreLocation.defaultStore)")
            }
        } catch let error as StoreError {
            throw ExitMessage("cannot open container \(target): \(error.message)")
        } catch let error as FormatError {
            throw ExitMessage("cannot open container \(target): \(error.message)")
        }
        let collector = Collector(
            container: container, device: "gc@\(ProcessInfo.processInfo.hostName)", deviceID: RandomID.make(),
            logger: logger, progress: { step($0) })
        do {
            defer { clearStep() }
            return try await collector.run(dryRun: dryRun)
        } catch let error as CollectionError {
            throw ExitMessage("\(target): \(error)")
        }
    }
}

/// One line that a step replaces, on a terminal; nothing elsewhere.
private func step(_ text: String) {
    guard isatty(STDERR_FILENO) != 0 else { return }
    FileHandle.standardError.write(Data("\r\u{1B}[K\(text)".utf8))
}

private func clearStep() {
    guard isatty(STDERR_FILENO) != 0 else { return }
    FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
}
