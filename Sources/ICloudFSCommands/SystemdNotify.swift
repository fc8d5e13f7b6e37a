import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// sd_notify(3) without libsystemd: a datagram to `$NOTIFY_SOCKET`, so that a unit with
/// `Type=notify` starts its dependents only once the mount is usable.
enum SystemdNotify {
    /// Sends `state` ("READY=1", "STOPPING=1", "STATUS=..." lines); nothing when systemd
    /// did not ask (no `NOTIFY_SOCKET`).
    static func send(_ state: String) {
        guard let path = ProcessInfo.processInfo.environment["NOTIFY_SOCKET"], !path.isEmpty else { return }
        var name = Array(path.utf8)
        if name.first == UInt8(ascii: "@") { name[0] = 0 }  // an abstract socket
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        guard name.count <= MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let length = socklen_t(MemoryLayout.offset(of: \sockaddr_un.sun_path)! + name.count)
        _ = state.withCString { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, text, strlen(text), Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
    }
}
