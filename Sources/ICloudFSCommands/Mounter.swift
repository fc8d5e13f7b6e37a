import BlobStore
import CLinux
import ContainerFormat
import Foundation
import FuseAdapter
import Logging
import Replica
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Runs one mount in this process: opens the store and the device, mounts, serves until
/// unmounted, then stops the background work (queued uploads stay in the cache). One
/// container, or with `all` every container of the store (`ContainerSetFileSystem`).
struct Mounter {
    /// The container; with `all`, the label `mount` shows as the source.
    let container: String
    let mountPoint: String
    let options: MountOptions
    let all: Bool
    let reportReady: Bool

    func run() async throws {
        // glibc gives each thread that allocates under contention its own heap, up to 8 per
        // core, and memory freed in one is not reused by the others: with libfuse's workers
        // and Swift's threads that held ~14 MiB more after a walk of 100,000 items.
        _ = mallopt(ICLOUDFS_M_ARENA_MAX, Int32(max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)))
        // Chunk buffers (up to 4 MiB each) always get their own mapping, given back when
        // freed: by default glibc raises this bound after the first such free, and then
        // serves them from its heaps, which keep the memory (4 processes of random writes
        // left the daemon at 176 MiB; 64 MiB with the bound fixed).
        _ = mallopt(ICLOUDFS_M_MMAP_THRESHOLD, 256 << 10)
        // The cache holds every file's content and the state database, and the default
        // store every byte of the container: nobody else may read them (folders 0700, files
        // 0600), whatever the caller's umask.
        umask(0o077)
        let cache = options.cache ?? StoreLocation.defaultCache(for: all ? StoreLocation.allContainersCache : container)
        try? FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
        // A cache made by an earlier version may be 0755.
        chmod(cache, 0o700)
        guard reportReady else { return try await mount(cache: cache) }
        Daemon.logTo("\(cache)/icloudfs.log")
        do {
            try await mount(cache: cache)
        } catch {
            Daemon.reportFailure("\(error)")
            throw error
        }
    }

    private func mount(cache: String) async throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: mountPoint, isDirectory: &isFolder), isFolder.boolValue else {
            throw ExitMessage("mount point \(mountPoint) is not an existing folder: create it first (mkdir -p \(mountPoint))")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = options.debug ? .trace : .info
            return handler
        }
        let logger = Logger(label: "icloudfs")
        let store: any BlobStore
        do {
            store = try StoreLocation.open(options.store)
        } catch let error as StoreError {
            throw ExitMessage("cannot open the store: \(error.message)")
        }
        let served: ServedContainers
        let fileSystem: any MountedFileSystem
        if all {
            let set = try await AllContainers.open(
                label: container, mountPoint: mountPoint, store: store, cacheRoot: cache, options: options, logger: logger)
            served = set
            fileSystem = set.fileSystem
        } else {
            let one = try await MountedContainer.open(
                container, cache: cache, mountPoint: mountPoint, store: store, options: options, logger: logger,
                notifier: DesktopNotifier.make(options: options, logger: logger))
            served = SingleContainer(member: one)
            fileSystem = one.fileSystem
        }
        let session: FuseSession
        do {
            session = try FuseSession(fileSystem: fileSystem, mountPoint: mountPoint)
        } catch {
            throw ExitMessage("\(error)")
        }
        await served.start()
        logger.info("mounted \(all ? "all containers" : container) at \(mountPoint) (cache \(cache))")
        if reportReady { Daemon.reportReady() }
        SystemdNotify.send("READY=1\nSTATUS=\(all ? "all containers" : container) mounted at \(mountPoint)")
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                session.run()
                done.resume()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        SystemdNotify.send("STOPPING=1\nSTATUS=saving the queue")
        let pending = await served.stop()
        logger.info("unmounted \(mountPoint)\(pending > 0 ? "; \(pending) change(s) stay queued for the next mount" : "")")
    }
}

/// What a mount serves: started once mounted, stopped once unmounted.
protocol ServedContainers: Sendable {
    func start() async
    /// Stops the background work; returns the changes that stay queued.
    func stop() async -> Int
}

struct SingleContainer: ServedContainers {
    let member: MountedContainer
    func start() async { member.start() }
    func stop() async -> Int { await member.stop() }
}

/// One container as a mount serves it: its replica, its key-value store, its filesystem and
/// the commands' channel (in its cache folder).
final class MountedContainer: Sendable {
    let name: String
    let replica: Replica
    let keyValues: KeyValueService
    let fileSystem: FuseFileSystem
    private let logger: Logger
    private let control = Mutex<ControlServer?>(nil)
    /// Where it is mounted, and who tells the desktop of its problems.
    private let folder: String
    private let notifier: DesktopNotifier?
    private let notifying = Mutex<Task<Void, Never>?>(nil)

    private init(
        name: String, replica: Replica, keyValues: KeyValueService, fileSystem: FuseFileSystem, logger: Logger,
        folder: String, notifier: DesktopNotifier?
    ) {
        self.folder = folder
        self.notifier = notifier
        self.name = name
        self.replica = replica
        self.keyValues = keyValues
        self.fileSystem = fileSystem
        self.logger = logger
    }

    /// `nodeBase`, `rootParent`: as `FuseFileSystem` takes them (under `mount --all`).
    static func open(
        _ container: String, cache: String, mountPoint: String, store: any BlobStore, options: MountOptions, logger: Logger,
        nodeBase: UInt64 = 0, rootParent: UInt64? = nil, create: Bool = true, folder: String? = nil,
        notifier: DesktopNotifier?
    ) async throws -> MountedContainer {
        var configuration = ReplicaConfiguration(
            container: container, cacheDirectory: cache, deviceName: options.device ?? ProcessInfo.processInfo.hostName)
        configuration.pollInterval = options.poll
        configuration.greedy = options.greedy
        configuration.autoCollect = options.autoCollect
        configuration.offline = options.offline
        configuration.cacheSize = options.cacheSize
        configuration.uploadLimit = options.uploadLimit
        configuration.pendingContentWait = options.uploadWait
        configuration.offlineWait = options.offlineWait
        configuration.accessTimes = options.accessTimes
        configuration.folderAccessTimes = options.folderAccessTimes
        configuration.cacheOwner = "the mount at \(mountPoint)"
        configuration.createIfMissing = create
        do {
            let replica = try await Replica.open(configuration, store: store, logger: logger)
            let keyValues = KeyValueService(
                container: try ContainerStore(store: store, container: container), device: configuration.deviceName,
                deviceID: replica.deviceID, cacheDirectory: cache, pollInterval: options.poll, offline: options.offline,
                logger: logger)
            let fileSystem = try FuseFileSystem(
                replica: replica, options: options.fuseOptions(source: container), nodeBase: nodeBase, rootParent: rootParent)
            return MountedContainer(
                name: container, replica: replica, keyValues: keyValues, fileSystem: fileSystem, logger: logger,
                folder: folder ?? mountPoint, notifier: notifier)
        } catch let error as StoreError {
            throw ExitMessage("cannot open container \(container): \(error.message)")
        } catch let error as ReplicaError {
            throw ExitMessage("cannot open container \(container): \(error.message)")
        }
    }

    func start() {
        replica.start()
        keyValues.start()
        if let notifier { notifying.withLock { $0 = notifier.watch(replica, name: name, folder: folder) } }
        // The commands' channel (deleted, gc, monitor, kv, query); the mount works without it.
        do {
            let server = try ControlServer(replica: replica, keyValues: keyValues, cache: replica.configuration.cacheDirectory)
            server.start()
            control.withLock { $0 = server }
        } catch {
            logger.warning("\(error); icloudfs deleted, gc, monitor, kv and query will not reach \(name)")
        }
    }

    func stop() async -> Int {
        notifying.withLock { $0?.cancel() }
        control.withLock { $0?.stop() }
        await keyValues.stop()
        await replica.stop()
        return replica.pendingChangeCount
    }
}

extension MountOptions {
    /// What the FUSE layer takes of these options, for a mount whose source reads `source`.
    func fuseOptions(source: String) -> FuseMountOptions {
        // Root shows the stored owners; another user sees everything as its own (it could
        // not open files it does not own), unless uid= or gid= say otherwise.
        let asRoot = getuid() == 0
        var fuseOptions = FuseMountOptions(
            source: source, uid: uid ?? (asRoot ? nil : getuid()), gid: gid ?? (asRoot ? nil : getgid()))
        fuseOptions.readOnly = readOnly
        fuseOptions.allowOther = allowOther
        // Without default_permissions nothing checks permissions at all: with allow_other any
        // local user could read and change every file. The kernel checks them instead.
        fuseOptions.defaultPermissions = defaultPermissions || allowOther
        fuseOptions.umask = umask ?? 0
        fuseOptions.acl = acl
        fuseOptions.debug = debug
        fuseOptions.passthrough = passthrough
        fuseOptions.noHydrate = noHydrate
        fuseOptions.kernelFlags = kernelFlags
        return fuseOptions
    }
}
