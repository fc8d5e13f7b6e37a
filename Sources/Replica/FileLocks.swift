import ContainerFormat
import Foundation
import Synchronization

/// One lock per file whose local copy is being changed (`Replica.fileLocks`). Writes,
/// truncations, downloaded chunks landing, a new version replacing the copy, evictions and a
/// commit's final record are ordered per file, and their file I/O (copying queued bytes
/// aside, `pwrite`, `ftruncate`, recording the file's content record) runs holding only this
/// lock, never `Replica.state`: a large write or download holds up its own file alone.
/// Never held while taking another file's lock.
final class FileLocks: Sendable {
    private final class Entry: @unchecked Sendable {
        // SAFETY: `users` is read and written only while holding `FileLocks.table`.
        let lock = NSLock()
        var users = 0
    }

    /// The locks of files in use now (an entry lives while someone holds or waits for it).
    private let table = Mutex<[ItemID: Entry]>([:])

    func withLock<T, E: Error>(_ id: ItemID, _ body: () throws(E) -> T) throws(E) -> T {
        let entry = table.withLock { table in
            let entry = table[id] ?? Entry()
            entry.users += 1
            table[id] = entry
            return entry
        }
        entry.lock.lock()
        defer {
            entry.lock.unlock()
            table.withLock { table in
                entry.users -= 1
                if entry.users == 0 { table[id] = nil }
            }
        }
        return try body()
    }
}
