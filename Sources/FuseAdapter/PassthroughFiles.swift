import FuseKernel
import Synchronization

/// Which opens the kernel serves itself from the local copy (FUSE passthrough), per node.
///
/// The kernel's rules (checked on this machine's 6.18): one backing file per node, shared
/// by all its passthrough opens and closed only after the last of them is released; a node
/// with a cached (daemon-served) open cannot get a passthrough open, and the reverse. So
/// each node is in one mode at a time, and an open that arrives while a node is in
/// passthrough mode must be passthrough too, whatever it asked for.
final class PassthroughFiles: Sendable {
    enum Mode: Equatable {
        /// Served by the daemon (reads and writes as requests).
        case cached
        /// Served by the kernel from the backing file `backingID`.
        case passthrough(backingID: Int32)
    }

    private struct Node {
        var cachedOpens = 0
        var passthroughOpens = 0
        var backingID: Int32 = 0
        var outsideWriters = 0
    }

    private struct State {
        var nodes: [UInt64: Node] = [:]
        /// Off when the kernel did not agree to passthrough, or refused a backing file
        /// (a mount by a user: BACKING_OPEN needs CAP_SYS_ADMIN).
        var available = false
        var refusal: String?
        /// Opens answered each way, for `status`.
        var passthroughCount = 0
        var cachedCount = 0
        /// Nodes the kernel may hold pages of from daemon-served opens: until they are
        /// dropped (`takeCachedPages`) or the kernel forgets the node, pages and all.
        var cachedPages: Set<UInt64> = []
    }

    private let state = Mutex(State())
    private let channel = Mutex<KernelChannel?>(nil)
    /// Opens the kernel writes, all nodes together: `isWritten` is asked for every `stat`,
    /// and is almost always answered by this alone.
    private let writers = Atomic<Int>(0)

    /// The connection backing files are registered on (nil once it is gone).
    func attach(_ channel: KernelChannel?) {
        self.channel.withLock { $0 = channel }
    }

    func enable(_ available: Bool, refusal: String? = nil) {
        state.withLock {
            $0.available = available
            $0.refusal = refusal
        }
    }

    /// The mode of a new open of `node`: passthrough if `wanted` (or forced: the node is in
    /// passthrough mode already), registering `file` as the backing file through `channel`
    /// if the node has none.
    func open(_ node: UInt64, file: Int32, wanted: Bool) -> Mode {
        let channel = self.channel.withLock { $0 }
        return state.withLock { state in
            var entry = state.nodes[node] ?? Node()
            defer { state.nodes[node] = entry }
            if entry.passthroughOpens > 0 {
                entry.passthroughOpens += 1
                state.passthroughCount += 1
                return .passthrough(backingID: entry.backingID)
            }
            if wanted, state.available, entry.cachedOpens == 0, let channel {
                switch channel.openBacking(file) {
                case .success(let id):
                    entry.backingID = id
                    entry.passthroughOpens = 1
                    state.passthroughCount += 1
                    return .passthrough(backingID: id)
                case .failure(let error):
                    // EPERM: not root. Asked once; reads go through the daemon from now on.
                    state.available = false
                    state.refusal = "the kernel refused a backing file (\(error))"
                    FuseLog.logger.notice("passthrough is off for this mount: \(state.refusal ?? "")")
                }
            }
            entry.cachedOpens += 1
            state.cachedCount += 1
            state.cachedPages.insert(node)
            return .cached
        }
    }

    /// An open of `node` in `mode` ended; the backing file closes with the last.
    func release(_ node: UInt64, _ mode: Mode) {
        let channel = self.channel.withLock { $0 }
        state.withLock { state in
            guard var entry = state.nodes[node] else { return }
            switch mode {
            case .cached: entry.cachedOpens -= 1
            case .passthrough:
                entry.passthroughOpens -= 1
                if entry.passthroughOpens == 0 {
                    channel?.closeBacking(entry.backingID)
                    entry.backingID = 0
                }
            }
            state.nodes[node] = entry.cachedOpens == 0 && entry.passthroughOpens == 0 ? nil : entry
        }
    }

    /// An open of `node` for writing is served by the kernel: until `endWriting`, its size
    /// and times are the local copy's (`isWritten`).
    func beginWriting(_ node: UInt64) {
        state.withLock { $0.nodes[node]?.outsideWriters += 1 }
        writers.add(1, ordering: .relaxed)
    }

    func endWriting(_ node: UInt64) {
        state.withLock { $0.nodes[node]?.outsideWriters -= 1 }
        writers.subtract(1, ordering: .relaxed)
    }

    /// Whether `node` had daemon-served opens since its pages were last dropped: the kernel
    /// may still cache their pages, stale once the kernel wrote the file itself. The caller
    /// drops them. (A file made here and only ever written by the kernel has none: a burst
    /// of new files costs no invalidation each.)
    func takeCachedPages(_ node: UInt64) -> Bool {
        state.withLock { $0.cachedPages.remove(node) != nil }
    }

    /// The kernel forgot `node`: its pages went with it.
    func forget(_ node: UInt64) {
        _ = state.withLock { $0.cachedPages.remove(node) }
    }

    /// Whether the kernel is writing `node` itself.
    func isWritten(_ node: UInt64) -> Bool {
        guard writers.load(ordering: .relaxed) > 0 else { return false }
        return state.withLock { ($0.nodes[node]?.outsideWriters ?? 0) > 0 }
    }

    /// For `status`: whether passthrough is on, why not, and the opens answered each way.
    var summary: (available: Bool, refusal: String?, passthrough: Int, cached: Int) {
        state.withLock { ($0.available, $0.refusal, $0.passthroughCount, $0.cachedCount) }
    }
}
