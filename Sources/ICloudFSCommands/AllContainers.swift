import BlobStore
import ContainerFormat
import Foundation
import FuseAdapter
import Logging
import Replica
import Synchronization
import SystemPackage

/// `mount --all`: every container of the store, each a `MountedContainer` in its folder of a
/// `ContainerSetFileSystem`, with its cache in `CACHE/containers/FOLDER` (`ContainerFolder`).
/// Containers made by other devices join within the poll interval; `mkdir` at the top makes
/// one. The one owner of the members.
actor AllContainers: ServedContainers {
    nonisolated let fileSystem: ContainerSetFileSystem
    private let store: any BlobStore
    private let cacheRoot: String
    private let mountPoint: String
    private let options: MountOptions
    private let logger: Logger
    private var members: [String: MountedContainer] = [:]
    /// Joins under way, so that a `mkdir` and the discovery loop open a container once; each
    /// registers its member before it ends.
    private var joining: [String: Task<MountedContainer, any Error>] = [:]
    private var slots: ContainerSlots
    private var started = false
    private var stopping = false
    /// Containers whose failure to open was logged, and whether the store's failure to list
    /// was: once each until it clears, not at every poll.
    private var unopened: Set<String> = []
    private var unlisted = false
    private let discovery = BackgroundLoop()
    private let notifier: DesktopNotifier?
    /// The cache root's: a second mount of all on it fails at once, as on a container's cache.
    private let cacheLock: CacheLock

    private init(
        store: any BlobStore, cacheRoot: String, mountPoint: String, options: MountOptions, logger: Logger,
        fileSystem: ContainerSetFileSystem, cacheLock: CacheLock, slots: ContainerSlots
    ) {
        self.cacheLock = cacheLock
        notifier = DesktopNotifier.make(options: options, logger: logger)
        self.store = store
        self.cacheRoot = cacheRoot
        self.mountPoint = mountPoint
        self.options = options
        self.logger = logger
        self.fileSystem = fileSystem
        self.slots = slots
    }

    /// Opens every container the store has (or, offline, that this device has a cache of).
    static func open(
        label: String, mountPoint: String, store: any BlobStore, cacheRoot: String, options: MountOptions, logger: Logger
    ) async throws -> AllContainers {
        if FileManager.default.fileExists(atPath: "\(cacheRoot)/state.sqlite") {
            throw ExitMessage("\(cacheRoot) is the cache of a single container: give mount --all a cache folder of its own (-o cache=DIR)")
        }
        let cacheLock: CacheLock
        do {
            cacheLock = try await CacheLock.acquire(folder: cacheRoot, owner: "the mount of all containers at \(mountPoint)")
        } catch let error as ReplicaError {
            throw ExitMessage(error.message)
        }
        let slots = try ContainerSlots(path: "\(cacheRoot)/containers.json")
        // The filesystem's mkdir reaches the set made after it.
        let holder = Holder()
        let fileSystem = ContainerSetFileSystem(options: options.fuseOptions(source: label), cacheRoot: cacheRoot) {
            container in
            guard let set = holder.set.withLock({ $0 }) else { throw ExitMessage("the mount is not ready") }
            _ = try await set.join(container, create: true)
        }
        let set = AllContainers(
            store: store, cacheRoot: cacheRoot, mountPoint: mountPoint, options: options, logger: logger, fileSystem: fileSystem,
            cacheLock: cacheLock, slots: slots)
        holder.set.withLock { $0 = set }
        try await set.joinKnown(failOnUnreachableStore: true)
        return set
    }

    /// The containers of the store (where it cannot be listed, offline, those this device has
    /// a cache of) that are not members yet, joined. A top folder of the store without an
    /// identity (not a container, or one still being made) is passed over; a container that
    /// cannot be opened is logged once and tried again at each poll.
    private func joinKnown(failOnUnreachableStore: Bool) async throws {
        var names = Set(slots.containers.filter { FileManager.default.fileExists(atPath: cache(of: $0)) })
        var listed = false
        if !options.offline {
            do {
                // The store's list, not the cache's: a container whose making failed (offline,
                // a crash) has a cache folder and no store folder.
                names = Set(try await ContainerStore.containerNames(in: store))
                listed = true
                if unlisted {
                    logger.notice("the containers of \(store.location) are listed again")
                    unlisted = false
                }
            } catch let error as StoreError {
                // Out of reach, the mount still shows what this device has; at the start, a
                // store that is not there at all (a typo) is an error.
                if failOnUnreachableStore, !error.isTransient {
                    throw ExitMessage("cannot list the containers of \(store.location): \(error.message)")
                }
                if !unlisted {
                    logger.warning("cannot list the containers of \(store.location): \(error.message); tried again every poll")
                    unlisted = true
                }
            }
        }
        for name in names.sorted() where members[name] == nil && !stopping {
            do {
                if listed, slots.slot(ofKnown: name) == nil,
                    try await ContainerStore(store: store, container: name).readIdentity() == nil
                {
                    continue
                }
                _ = try await join(name, create: false)
                unopened.remove(name)
            } catch {
                if unopened.insert(name).inserted { logger.warning("container \(name) not mounted yet: \(error)") }
            }
        }
    }

    private func cache(of container: String) -> String {
        "\(cacheRoot)/containers/\(ContainerFolder.name(of: container))"
    }

    /// Makes `container` a member (opening its replica; `create`: making it in the store if
    /// it is not there) and returns it once the mount shows it. A container this call made a
    /// cache for and could not open leaves no cache folder or slot behind.
    func join(_ container: String, create: Bool) async throws -> MountedContainer {
        if let member = members[container] { return member }
        if let running = joining[container] {
            // A discovery's join that found no container does not stand for a mkdir's.
            do { return try await running.value } catch where !create { throw error } catch {}
            if let member = members[container] { return member }
        }
        guard !stopping else { throw ExitMessage("the mount is stopping") }
        if create, options.offline { throw ContainerMakerError.storeUnreachable("offline mode (-o offline)") }
        let cache = cache(of: container)
        let isNew = !FileManager.default.fileExists(atPath: cache)
        let slot = try slots.slot(of: container)
        let (store, mountPoint, options, logger, notifier) = (store, mountPoint, options, logger, notifier)
        let folder = "\(mountPoint)/\(ContainerFolder.name(of: container))"
        // On this actor: it registers the member before anyone waiting on it resumes.
        let task = Task { () async throws -> MountedContainer in
            let member: MountedContainer
            do {
                try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: true)
                member = try await MountedContainer.open(
                    container, cache: cache, mountPoint: mountPoint, store: store, options: options, logger: logger,
                    nodeBase: ContainerSetFileSystem.base(ofSlot: slot), rootParent: ContainerSetFileSystem.topFolderNode,
                    create: create, folder: folder, notifier: notifier)
            } catch {
                if isNew {
                    try? FileManager.default.removeItem(atPath: cache)
                    slots.forget(container)
                }
                throw error
            }
            register(member, slot: slot)
            return member
        }
        joining[container] = task
        defer { if joining[container] == task { joining[container] = nil } }
        return try await task.value
    }

    private func register(_ member: MountedContainer, slot: UInt64) {
        members[member.name] = member
        fileSystem.add(container: member.name, slot: slot, fileSystem: member.fileSystem)
        // One joined while stopping is stopped with the others (`stop` waits for joins).
        if started && !stopping { member.start() }
        logger.info("container \(member.name) mounted at \(mountPoint)/\(ContainerFolder.name(of: member.name))")
    }

    func start() async {
        started = true
        for member in members.values { member.start() }
        guard !options.offline else { return }
        discovery.start(notifiedBy: store, under: "") { [self, poll = options.poll, discovery] in
            while !Task.isCancelled {
                await discovery.wakeup.wait(upTo: poll)
                guard !Task.isCancelled else { return }
                try? await joinKnown(failOnUnreachableStore: false)
            }
        }
    }

    func stop() async -> Int {
        stopping = true
        cacheLock.markStopping()
        await discovery.stop()
        // Joins under way end first: their members are stopped with the rest.
        for task in joining.values { _ = try? await task.value }
        var pending = 0
        for member in members.values { pending += await member.stop() }
        cacheLock.release()
        return pending
    }

    private final class Holder: Sendable {
        let set = Mutex<AllContainers?>(nil)
    }
}

/// Each container's slot (`ContainerSetFileSystem.base(ofSlot:)`), kept in the cache root so
/// that a container's node numbers stay the same from mount to mount (file handles name
/// files by them). Also the list of containers this device has a cache of.
struct ContainerSlots {
    let path: String
    private var slots: [String: UInt64]

    /// Throws if the file is there and cannot be read: numbering the containers anew would
    /// let old file handles name another container's files.
    init(path: String) throws {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else {
            slots = [:]
            return
        }
        guard let data = FileManager.default.contents(atPath: path),
            let slots = try? JSONDecoder().decode([String: UInt64].self, from: data), !slots.values.contains(0)
        else {
            throw ExitMessage("\(path) is damaged (the containers' inode numbers): move it away to start them anew")
        }
        self.slots = slots
    }

    var containers: [String] { slots.keys.sorted() }

    func slot(ofKnown container: String) -> UInt64? { slots[container] }

    /// The slot of `container`, a new one (kept at once) on first use.
    mutating func slot(of container: String) throws -> UInt64 {
        if let slot = slots[container] { return slot }
        let slot = (slots.values.max() ?? 0) + 1
        slots[container] = slot
        do {
            try save()
        } catch {
            slots[container] = nil
            throw ExitMessage("cannot record container \(container) in \(path): \(error)")
        }
        return slot
    }

    /// Drops the slot of a container that was never made (best effort: a slot kept is only
    /// a number not handed out again).
    mutating func forget(_ container: String) {
        guard slots.removeValue(forKey: container) != nil else { return }
        try? save()
    }

    private func save() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try FileIO.replaceFile(FilePath(path), with: try encoder.encode(slots))
    }
}
