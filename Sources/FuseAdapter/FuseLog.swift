import Logging
import Synchronization

/// The adapter's logger.
enum FuseLog {
    static let shared = Mutex(Logger(label: "icloudfs.fuse"))
    static var logger: Logger { shared.withLock { $0 } }
}
