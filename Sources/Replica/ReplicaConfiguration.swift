import Foundation

/// How one device of a container runs.
public struct ReplicaConfiguration: Sendable {
    public var container: String
    /// This device's cache folder: state database, content files, staged chunks.
    public var cacheDirectory: String
    /// Shown in conflict copy names.
    public var deviceName: String
    /// How often to look for remote changes.
    public var pollInterval: Duration = .seconds(2)
    /// Create the container in the store if it does not exist.
    public var createIfMissing = true
    /// The largest number of operations pushed as one journal entry.
    public var maximumBatchOperations = 1000
    /// And at most this many chunk references (10,000: about 1 MB of journal entry).
    public var maximumBatchChunks = 10_000
    /// The size of the staging log's segment files (new small files' bytes, `StagingLog`).
    public var stagingSegmentSize: UInt64 = 64 << 20
    /// Bound on downloaded content; clean, unpinned, closed files beyond it are evicted,
    /// least recently used first.
    public var cacheSize: UInt64 = 10 << 30
    /// Download every file in the background (the macOS "greedy peer").
    public var greedy = false
    /// Never contact the store: work from the cache, queue every change.
    public var offline = false
    /// A snapshot is written by the device whose commit lands on a multiple of this.
    public var snapshotInterval: UInt64 = 1000
    /// A batch with at least this many new bytes is published metadata first: its commit
    /// goes to the journal before its chunks, so other devices see the files at once.
    public var metadataFirstBytes: UInt64 = 4 << 20
    /// Upload bandwidth limit in bytes per second; nil is unlimited.
    public var uploadLimit: UInt64?
    /// Collect the container in the background when no device has for a day (`nogc` off).
    public var autoCollect = true
    /// How long a read waits for chunks another device announced but has not uploaded yet.
    public var pendingContentWait: Duration = .seconds(60)
    /// How long a read waits for a store that cannot be reached (a network blip) before it
    /// fails; zero fails at once, as `offline` does.
    public var offlineWait: Duration = .seconds(15)
    /// When reads move access times (`relatime`, `strictatime`, `noatime`), and whether
    /// listing a folder does (`nodiratime` says no).
    public var accessTimes = AccessTimeRule.relative
    public var folderAccessTimes = true
    /// Who holds the cache while this device runs, as a second device of the same cache is
    /// told ("the mount at /mnt/notes").
    public var cacheOwner = "icloudfs"
    /// How long opening waits for the device that holds the cache to finish stopping (the
    /// daemon of a mount just unmounted), and for one still serving to start stopping.
    public var cacheLockWait: Duration = .seconds(60)
    public var cacheLockGrace: Duration = .seconds(3)

    public init(container: String, cacheDirectory: String, deviceName: String) {
        self.container = container
        self.cacheDirectory = cacheDirectory
        self.deviceName = deviceName
    }
}
