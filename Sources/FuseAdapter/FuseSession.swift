import ContainerFormat
import Foundation
import FuseKernel
import Replica

/// What `FuseSession` mounts: one container (`FuseFileSystem`) or all of a store's
/// (`ContainerSetFileSystem`).
public protocol MountedFileSystem: KernelFileSystem {
    var options: FuseMountOptions { get }
    /// Starts (a session) or stops (nil) telling the kernel of changes; at the stop, keeps
    /// what must outlive the mount.
    func attach(_ session: KernelSession?)
}

/// A mounted filesystem: the kernel session at its mount point.
public final class FuseSession: Sendable {
    private let session: KernelSession
    private let fileSystem: any MountedFileSystem
    public var mountPoint: String { session.mountPoint }

    /// Mounts `fileSystem` at `mountPoint`; throws with a one-line reason on failure.
    public init(fileSystem: any MountedFileSystem, mountPoint: String) throws {
        self.fileSystem = fileSystem
        // As the kernel will show it; resolved now, as later it would ask this filesystem.
        let resolvedMountPoint = realpath(mountPoint, nil).map { path in
            defer { free(path) }
            return String(cString: path)
        }
        do {
            session = try KernelSession(
                fileSystem: fileSystem, mountPoint: mountPoint, options: fileSystem.options.kernelMountOptions,
                traceRequests: fileSystem.options.debug)
        } catch {
            throw FuseError.cannotMount(
                "cannot mount on \(mountPoint): \(error) (is it an existing folder, and is /dev/fuse usable: fuse3 installed, root or user_allow_other?)")
        }
        if let problem = KernelReadAhead.raise(forMountAt: resolvedMountPoint ?? mountPoint) {
            FuseLog.logger.debug("read-ahead left at the kernel's default: \(problem)")
        }
        fileSystem.attach(session)
    }

    /// Serves requests until the filesystem is unmounted (or SIGINT/SIGTERM/SIGHUP), then
    /// unmounts. Blocks the calling thread.
    public func run() {
        session.run()
        fileSystem.attach(nil)
    }
}

extension FuseFileSystem: MountedFileSystem {
    public func attach(_ session: KernelSession?) {
        kernel.attach(session)
        passthroughs.attach(session?.channel)
        if session != nil {
            replica.setChangeObserver { [weak self] ids in self?.invalidate(ids) }
        } else {
            numbers.saveNow()
            replica.setChangeObserver(nil)
        }
    }

    /// Tells the kernel to forget cached attributes, names and pages of changed items, and
    /// again a moment later: a lookup or listing answered just before the change can reach
    /// the kernel after the first invalidation and cache the old name or size again.
    private func invalidate(_ changes: [ItemChange]) {
        for change in changes where change.contentChanged {
            if let inode = numbers.existingNumber(of: change.id) { kernel.noteContentChanged(inode) }
        }
        kernel.run { [weak self] in self?.invalidateNow(changes) }
        kernel.run(after: .milliseconds(100)) { [weak self] in self?.invalidateNow(changes) }
    }

    private func invalidateNow(_ changes: [ItemChange]) {
        var folders = Set<UInt64>()
        for change in changes {
            let parentInode = change.parent.flatMap(numbers.existingNumber)
            if let inode = numbers.existingNumber(of: change.id), let known = inodes.lookupEntry(inode) {
                // Only a name that is gone is invalidated: dropping a live dentry would break
                // programs whose working directory it is. The root's name is not its own
                // (`.`, or its folder under `mount --all`).
                if change.id != .root, parentInode != known.parent || change.name != known.name {
                    kernel.invalidateEntryNow(known.parent, known.name)
                    folders.insert(known.parent)
                }
                kernel.invalidateInodeNow(inode)
            }
            if let parentInode { folders.insert(parentInode) }
        }
        for folder in folders {
            kernel.invalidateInodeNow(folder)
        }
    }
}

public enum FuseError: Error, CustomStringConvertible {
    case cannotMount(String)

    public var description: String {
        switch self {
        case .cannotMount(let why): why
        }
    }
}
