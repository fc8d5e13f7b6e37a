/// Whether a new file will likely be small, from what the process making it made just before.
/// A handle's mode is fixed when it is opened: written by the kernel into a cache file of its
/// own (passthrough), or through the daemon, which can keep a small file's bytes in memory
/// until its close and then append them to the staging log (no file of its own; see
/// docs/ARCHITECTURE.md, "The path of a small file"). So the choice is made at the create,
/// before any byte: a run of small new files one process closed, each within `gap` of the last
/// (tar x, cp -r, git checkout), predicts another; a lone create (a database, a log, dd) does
/// not, and keeps the kernel's write path.
struct SmallFileBursts {
    /// Longest pause between two small files of one run.
    static let gap = Duration.seconds(1)
    /// Small files closed in a row before the next is expected small.
    static let runNeeded = 2
    /// Processes followed at most (those that paused longer than `gap` go first).
    static let processesKept = 256

    private var runs: [Int32: (count: Int, last: ContinuousClock.Instant)] = [:]

    /// Whether `process`'s next new file is expected small.
    func expectsSmall(_ process: Int32, at now: ContinuousClock.Instant) -> Bool {
        guard let run = runs[process] else { return false }
        return run.count >= SmallFileBursts.runNeeded && now - run.last <= SmallFileBursts.gap
    }

    /// A new file `process` made was closed, at most `small` bytes long or not: a large one
    /// ends its run.
    mutating func closed(_ process: Int32, small: Bool, at now: ContinuousClock.Instant) {
        guard small else {
            runs[process] = nil
            return
        }
        let continues = runs[process].map { now - $0.last <= SmallFileBursts.gap } ?? false
        runs[process] = (continues ? runs[process]!.count + 1 : 1, now)
        guard runs.count > SmallFileBursts.processesKept else { return }
        runs = runs.filter { now - $0.value.last <= SmallFileBursts.gap }
        // Still too many at once: the most recent half stays.
        if runs.count > SmallFileBursts.processesKept {
            let newest = runs.sorted { $0.value.last > $1.value.last }.prefix(SmallFileBursts.processesKept / 2)
            runs = Dictionary(uniqueKeysWithValues: newest.map { ($0.key, $0.value) })
        }
    }

    /// Processes followed now.
    var followed: Int { runs.count }
}
