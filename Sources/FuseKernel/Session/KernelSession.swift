import CFuseKernel
import Dispatch
import Foundation
import Glibc
import SystemPackage
import Synchronization

/// A mounted filesystem's connection to the kernel: reads requests on worker threads,
/// decodes them, hands them to the filesystem; and the notifications the filesystem sends.
public final class KernelSession: Sendable {
    public let channel: KernelChannel
    public let mountPoint: String
    private let fileSystem: any KernelFileSystem
    private let workers = Mutex(Workers())
    private let finished = DispatchGroup()
    /// Requests received, by opcode (what passthrough saves shows as reads not counted).
    private let received = Mutex([Int](repeating: 0, count: 64))
    /// CPU time per kind of request, when `RequestCosts.enabled`.
    private let costs = RequestCosts()
    /// Each request logged as it arrives (`-o debug`).
    private let traceRequests: Bool

    /// Each worker reads whole requests: the largest write plus its header.
    static let bufferSize = (1 << 20) + 4096
    /// Workers are added while all are busy (a blocked request must not stall the others),
    /// up to this many.
    static let maximumWorkers = 16

    private struct Workers {
        var count = 0
        var idle = 0
    }

    /// Mounts `fileSystem` at `mountPoint`. Throws the errno of a failed mount.
    public init(
        fileSystem: any KernelFileSystem, mountPoint: String, options: KernelMountOptions, traceRequests: Bool = false
    ) throws(Errno) {
        self.fileSystem = fileSystem
        self.mountPoint = mountPoint
        self.traceRequests = traceRequests
        channel = KernelChannel(descriptor: try KernelMount.mount(at: mountPoint, options))
    }

    /// Serves requests until the filesystem is unmounted (or SIGINT, SIGTERM or SIGHUP,
    /// which unmount it). Blocks the calling thread, which is the first worker.
    public func run() {
        let signals = ExitSignals { [mountPoint] in KernelMount.unmount(mountPoint) }
        finished.enter()
        workers.withLock { $0.count = 1 }
        work()
        finished.wait()
        if RequestCosts.enabled {
            KernelLog.logger.notice("requests served, by kind (thread CPU time, costliest first):\n\(costs.table())")
        }
        signals.cancel()
        // Unmounting also ends a mount whose loop stopped for another reason.
        KernelMount.unmount(mountPoint)
        channel.close()
    }

    private func startWorker() {
        finished.enter()
        let thread = Thread { [self] in work() }
        thread.stackSize = 8 << 20
        thread.start()
    }

    private func work() {
        defer { finished.leave() }
        // Named so that `ps -L`, `top -H` and perf tell the request threads from the rest.
        Thread.current.name = "icloudfs-fuse"
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.bufferSize, alignment: 4096)
        defer { buffer.deallocate() }
        while true {
            workers.withLock { $0.idle += 1 }
            let received = channel.receive(into: buffer)
            let spawn = workers.withLock { workers in
                workers.idle -= 1
                guard case .request = received, workers.idle == 0, workers.count < Self.maximumWorkers else { return false }
                workers.count += 1
                return true
            }
            if spawn { startWorker() }
            switch received {
            case .again: continue
            case .ended:
                workers.withLock { $0.count -= 1 }
                return
            case .request(let count):
                dispatch(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            }
        }
    }

    private func dispatch(_ bytes: UnsafeRawBufferPointer) {
        let incoming: IncomingRequest
        do {
            incoming = try RequestDecoder.decode(bytes)
        } catch {
            KernelLog.logger.error("a request of kind \(error.opcode) was too short; answering EIO")
            Request(channel: channel, unique: error.unique, opcode: error.opcode, caller: Caller(uid: 0, gid: 0, pid: 0))
                .error(EIO)
            return
        }
        received.withLock { counts in
            if incoming.opcode < counts.count { counts[Int(incoming.opcode)] += 1 }
        }
        if traceRequests {
            KernelLog.logger.info(
                "request \(incoming.unique): \(OpcodeNames.name(of: incoming.opcode)) from pid \(incoming.caller.pid): \(incoming.operation)")
        }
        switch incoming.operation {
        case .forget(let list):
            for (node, count) in list { fileSystem.forget(node, count) }
        case .interrupt:
            // Requests run to their end; the kernel waits for the answer (or gives up on it
            // for a killed caller, and our late answer is dropped).
            break
        case .initialize(let offered):
            connect(offered, request(for: incoming))
        case .destroy:
            request(for: incoming).ok()
        default:
            costs.measure(incoming.opcode) { fileSystem.serve(request(for: incoming), incoming.operation) }
        }
    }

    private func request(for incoming: IncomingRequest) -> Request {
        Request(channel: channel, unique: incoming.unique, opcode: incoming.opcode, caller: incoming.caller)
    }

    /// The `FUSE_INIT` handshake.
    private func connect(_ offered: KernelInit, _ request: Request) {
        guard offered.major == FUSE_KERNEL_VERSION else {
            // A newer major: answer ours alone, and the kernel asks again in our terms.
            var out = fuse_init_out()
            out.major = UInt32(FUSE_KERNEL_VERSION)
            out.minor = UInt32(ICLOUDFS_FUSE_KERNEL_MINOR)
            return offered.major > FUSE_KERNEL_VERSION ? request.reply(out) : request.error(EPROTO)
        }
        let settings = fileSystem.connect(offered)
        var capabilities = Capabilities(rawValue: settings.capabilities.rawValue & offered.flags)
        if capabilities.rawValue >> 32 != 0 { capabilities.insert(.extendedInit) }
        var out = fuse_init_out()
        out.major = UInt32(FUSE_KERNEL_VERSION)
        out.minor = min(offered.minor, UInt32(ICLOUDFS_FUSE_KERNEL_MINOR))
        // Not bounded by the offer: the kernel offers the device's read-ahead as it was when
        // it sent INIT (at mount), and keeps the smaller of ours and the device's as it is now.
        out.max_readahead = settings.maxReadahead
        out.flags = UInt32(truncatingIfNeeded: capabilities.rawValue)
        out.flags2 = UInt32(truncatingIfNeeded: capabilities.rawValue >> 32)
        out.max_write = settings.maxWrite
        out.max_pages = UInt16((settings.maxWrite + 4095) / 4096)
        out.time_gran = settings.timeGranularity
        // `unused[0]` in 7.38's header is `max_stack_depth` since 7.40.
        if capabilities.contains(.passthrough) { out.unused.0 = settings.maxStackDepth }
        request.reply(out)
    }

    /// Requests received since the mount, by kind ("read": 12), kinds never received left out.
    public var requestCounts: [String: Int] {
        received.withLock { counts in
            var named: [String: Int] = [:]
            for (opcode, count) in counts.enumerated() where count > 0 {
                named[OpcodeNames.name(of: UInt32(opcode)), default: 0] += count
            }
            return named
        }
    }

    // MARK: Notifications

    /// Drops the kernel's cached attributes of `node` and, unless `attributesOnly`, its cached
    /// pages. May block while reads of those pages are in progress. Returns the errno
    /// (ENOENT: the kernel holds no such node).
    @discardableResult
    public func invalidateInode(_ node: UInt64, attributesOnly: Bool = false) -> Int32 {
        var out = fuse_notify_inval_inode_out()
        out.ino = node
        out.off = attributesOnly ? -1 : 0
        out.len = 0
        return notify(FUSE_NOTIFY_INVAL_INODE, out, name: nil)
    }

    /// Drops the kernel's cached name `name` in folder `parent`.
    @discardableResult
    public func invalidateEntry(_ parent: UInt64, _ name: KernelName) -> Int32 {
        var out = fuse_notify_inval_entry_out()
        out.parent = parent
        out.namelen = UInt32(name.count)
        return notify(FUSE_NOTIFY_INVAL_ENTRY, out, name: name)
    }

    /// Tells the kernel that `name` in `parent`, naming `child`, is gone (dropping the
    /// entry even where it is some process's working folder).
    @discardableResult
    public func delete(_ parent: UInt64, _ child: UInt64, _ name: KernelName) -> Int32 {
        var out = fuse_notify_delete_out()
        out.parent = parent
        out.child = child
        out.namelen = UInt32(name.count)
        return notify(FUSE_NOTIFY_DELETE, out, name: name)
    }

    private func notify<Body>(_ code: fuse_notify_code, _ body: Body, name: KernelName?) -> Int32 {
        let nameBytes = name.map { $0 + [0] } ?? []
        var header = fuse_out_header()
        header.len = UInt32(MemoryLayout<fuse_out_header>.size + MemoryLayout<Body>.size + nameBytes.count)
        header.error = Int32(code.rawValue)
        header.unique = 0
        return withUnsafeBytes(of: header) { header in
            withUnsafeBytes(of: body) { body in
                nameBytes.withUnsafeBytes { name in
                    var vectors = [
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: header.baseAddress), iov_len: header.count),
                        iovec(iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress), iov_len: body.count),
                    ]
                    if name.count > 0 {
                        vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: name.baseAddress), iov_len: name.count))
                    }
                    return vectors.withUnsafeBufferPointer { channel.send($0) }
                }
            }
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP run `action` (on a dispatch queue, not in a signal handler);
/// SIGPIPE is ignored (a reply to a process gone must not end the daemon).
final class ExitSignals: @unchecked Sendable {
    // SAFETY: the sources are set once, at init; a dispatch source may be cancelled from any thread.
    private let sources: [any DispatchSourceSignal]
    static let watched = [SIGINT, SIGTERM, SIGHUP]

    init(_ action: @escaping @Sendable () -> Void) {
        signal(SIGPIPE, SIG_IGN)
        sources = Self.watched.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: action)
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
        for number in Self.watched { signal(number, SIG_DFL) }
    }
}
