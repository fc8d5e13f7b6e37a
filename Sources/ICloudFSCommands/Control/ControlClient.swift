import Foundation
import SyncAttributes

#if canImport(Glibc)
import Glibc
#endif

/// A command's end of the control channel (`ControlChannel`).
struct ControlClient {
    private let connection: ControlConnection

    /// Connects to the daemon of the mount whose root is `given`, or of the container it
    /// names (`MountFinder`).
    init(mountRoot given: String) throws {
        let mountRoot = try MountFinder.mountRoot(for: given)
        guard let cache = ExtendedAttributes.get(.cacheFolder, of: mountRoot) else {
            if ExtendedAttributes.get(.itemIdentifier, of: mountRoot) != nil {
                throw ExitMessage("\(mountRoot) is inside an icloudfs mount: give the mount point itself")
            }
            throw ExitMessage("\(mountRoot): \(ExtendedAttributes.notOnMount(mountRoot))")
        }
        let path = ControlChannel.socketPath(cache: cache)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ExitMessage("cannot reach the mount at \(mountRoot): \(String(cString: strerror(errno)))") }
        let connected = try ControlChannel.withAddress(cache: cache) { connect(fd, $0, $1) }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ExitMessage("cannot reach the mount at \(mountRoot) (\(path): \(reason)); is its cache yours?")
        }
        connection = ControlConnection(descriptor: fd)
    }

    func send(_ request: ControlChannel.Request) throws {
        guard connection.send(request.line) else { throw ExitMessage("the mount hung up before its answer") }
    }

    /// The next answer; nil once the daemon has closed the connection.
    func next() -> ControlChannel.Answer? {
        while let line = connection.receive() {
            if let answer = ControlChannel.Answer(line: line) { return answer }
        }
        return nil
    }
}
