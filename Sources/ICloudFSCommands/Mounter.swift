import BlobStore
import CLinux
import ContainerFormat
import Foundation
import FuseAdapter
import Logging
import Replica

#if canImport(Glibc)
import Glibc
#endif

/// Runs one mount in this process: opens the store and the device, mounts, serves until
/// unmounted, then stops the background work (queued uploads stay in the cache).
struct Mounter {
    let container: String
    let mountPoint: String
    let options: MountOptions
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
        let cache = options.cache ?? StoreLocation.defaultCache(for: container)
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
        let replica: Replica
        let keyValues: KeyValueService
        do {
            let store = try StoreLocation.open(options.store)
            replica = try await Replica.open(configuration, store: store, logger: logger)
            keyValues = KeyValueService(
                container: try ContainerStore(store: store, container: container), device: configuration.deviceName,
                deviceID: replica.deviceID, cacheDirectory: cache, pollInterval: options.poll, offline: options.offline,
                logger: logger)
        } catch let error as StoreError {
            throw ExitMessage("cannot open container \(container): \(error.message)")
        } catch let error as ReplicaError {
            throw ExitMessage("cannot open container \(container): \(error.message)")
        }
        // Root shows the stored owners; another user sees everything as its own (it could
        // not open files it does not own), unless uid= or gid= say otherwise.
        let asRoot = getuid() == 0
        var fuseOptions = FuseMountOptions(
            source: container, uid: options.uid ?? (asRoot ? nil : getuid()), gid: options.gid ?? (asRoot ? nil : getgid()))
        fuseOptions.readOnly = options.readOnly
        fuseOptions.allowOther = options.allowOther
        // Without default_permissions nothing checks permissions at all: with allow_other any
        // local user could read and change every file. The kernel checks them instead.
        fuseOptions.defaultPermissions = options.defaultPermissions || options.allowOther
        fuseOptions.umask = options.umask ?? 0
        fuseOptions.acl = options.acl
        fuseOptions.debug = options.debug
        fuseOptions.passthrough = options.passthrough
        fuseOptions.kernelFlags = options.kernelFlags
        let session: FuseSession
        do {
            session = try FuseSession(fileSystem: FuseFileSystem(replica: replica, options: fuseOptions), mountPoint: mountPoint)
        } catch {
            throw ExitMessage("\(error)")
        }
        replica.start()
        keyValues.start()
        // The commands' channel (deleted, gc, monitor, kv); the mount works without it.
        let control: ControlServer?
        do {
            control = try ControlServer(replica: replica, keyValues: keyValues, cache: cache)
            control?.start()
        } catch {
            control = nil
            logger.warning("\(error); icloudfs deleted, gc, monitor and kv will not reach this mount")
        }
        logger.info("mounted \(container) at \(mountPoint) (cache \(cache))")
        if reportReady { Daemon.reportReady() }
        SystemdNotify.send("READY=1\nSTATUS=\(container) mounted at \(mountPoint)")
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                session.run()
                done.resume()
            }
            thread.stackSize = 8 << 20
            thread.start()
        }
        SystemdNotify.send("STOPPING=1\nSTATUS=saving the queue of \(container)")
        control?.stop()
        await keyValues.stop()
        await replica.stop()
        let pending = replica.pendingChangeCount
        logger.info("unmounted \(mountPoint)\(pending > 0 ? "; \(pending) change(s) stay queued for the next mount" : "")")
    }
}
