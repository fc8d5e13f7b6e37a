import Dispatch
import Foundation

/// `body(0)`, `body(1)`, ... `body(count - 1)` run on every core at once, results in order:
/// for work on a whole container (a million items) that parts can do apart.
func concurrentMap<Result>(_ count: Int, _ body: @Sendable (Int) -> Result) -> [Result] {
    let results = Results<Result>(count: count)
    DispatchQueue.concurrentPerform(iterations: count) { index in results.set(index, body(index)) }
    return results.take()
}

/// `first()` and `second()` at once, on two cores.
func concurrently<First, Second>(
    _ first: @Sendable () -> First, _ second: @Sendable () -> Second
) -> (First, Second) {
    let both = concurrentMap(2) { index in index == 0 ? Either<First, Second>.first(first()) : .second(second()) }
    guard case .first(let one) = both[0], case .second(let other) = both[1] else { preconditionFailure("out of order") }
    return (one, other)
}

private enum Either<First, Second> {
    case first(First)
    case second(Second)
}

/// Each part's result, set by the thread that made it.
private final class Results<Result>: @unchecked Sendable {
    // SAFETY: every access holds the lock.
    private let lock = NSLock()
    private var values: [Result?]

    init(count: Int) { values = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Result) {
        lock.withLock { values[index] = value }
    }

    func take() -> [Result] {
        lock.withLock { values.map { $0! } }
    }
}
