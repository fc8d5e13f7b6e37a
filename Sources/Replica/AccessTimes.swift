import ContainerFormat

/// When a read moves an item's access time, as the kernel's `relatime`, `strictatime` and
/// `noatime` rules have it. Access times moved by reads stay on this device: a store write
/// per read would be a sync per read (`utimensat` still reaches every device).
public enum AccessTimeRule: String, Sendable {
    /// On the first read after a change (atime not after mtime or ctime), or once a day.
    case relative
    /// On every read.
    case strict
    /// Never.
    case never

    /// The new access time for a read at `now`, nil when this rule leaves it.
    func accessed(atime: Timestamp, mtime: Timestamp, ctime: Timestamp, now: Timestamp) -> Timestamp? {
        switch self {
        case .never: return nil
        case .strict: return now
        case .relative:
            let day: Int64 = 86_400
            return atime <= mtime || atime <= ctime || now.seconds - atime.seconds >= day ? now : nil
        }
    }
}

extension Replica {
    /// A file opened for reading, or a folder listed: moves its access time on this device
    /// as the mount's rule says (`open`/`opendir` stand for the read: reads served from the
    /// kernel's page cache never reach icloudfs).
    /// True when it moved.
    @discardableResult
    public func noteRead(_ id: ItemID, isFolder: Bool) -> Bool {
        let rule = isFolder && !configuration.folderAccessTimes ? .never : configuration.accessTimes
        guard rule != .never else { return false }
        return state.withLock { state in
            guard let item = state.itemOfOpenHandle(id),
                let moved = rule.accessed(
                    atime: state.accessTime(of: item), mtime: item.mtime, ctime: item.ctime ?? item.mtime, now: .now())
            else { return false }
            state.localAccessTimes[id] = moved
            database.writeSoon { [database] db in try database.saveAccessTime(id, moved, db) }
            return true
        }
    }
}

extension ReplicaState {
    /// The access time `stat` shows: the item's (set, synced), or a later one a read moved here.
    func accessTime(of item: Item) -> Timestamp {
        max(item.atime ?? item.mtime, localAccessTimes[item.id] ?? .zero)
    }
}
