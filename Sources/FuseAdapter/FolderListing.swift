import FuseKernel
import ContainerFormat
import Replica

/// What `opendir` keeps for `readdir`: a folder's children as of the listing, after `.` and
/// `..`. Offsets number the entries: 0 is `.`, 1 is `..`, 2 the first child.
struct FolderListing: Sendable {
    let folderID: ItemID
    let folder: UInt64
    let parent: UInt64
    let entries: [DirectoryEntry]
    /// A `readdir` has read from it: offset 0 again is a `rewinddir`, which lists anew.
    var wasRead = false

    static let dotCount = 2

    var count: Int { Self.dotCount + entries.count }

    /// `.` or `..` at `index`, nil for a child.
    func dotEntry(at index: Int) -> (name: String, inode: UInt64)? {
        switch index {
        case 0: (".", folder)
        case 1: ("..", parent)
        default: nil
        }
    }

    func entry(at index: Int) -> DirectoryEntry { entries[index - Self.dotCount] }
}
