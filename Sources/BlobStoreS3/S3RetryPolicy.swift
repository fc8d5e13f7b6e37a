/// When and how long to wait before trying an S3 request again.
///
/// Retried: network errors (refused, reset, timed out), 500, 502, 503 (`SlowDown`), 504,
/// 429, and the 400 `RequestTimeout` S3 sends when a body arrives too slowly. Not retried:
/// anything else, which would fail the same way again (403, 404, 412, ...).
/// Delays grow exponentially with "full jitter" (a random wait between zero and the cap),
/// so that many devices that failed together do not come back together.
public struct S3RetryPolicy: Sendable {
    /// Attempts in all, the first one included.
    public var maximumAttempts: Int
    public var baseDelay: Duration
    public var maximumDelay: Duration

    public init(maximumAttempts: Int = 6, baseDelay: Duration = .milliseconds(100), maximumDelay: Duration = .seconds(8)) {
        self.maximumAttempts = maximumAttempts
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
    }

    public static let standard = S3RetryPolicy()

    /// Whether an answer with this status (and S3 error code) is worth another attempt.
    public static func isRetryable(status: Int, code: String?) -> Bool {
        switch status {
        case 429, 500, 502, 503, 504: true
        case 400: code == "RequestTimeout"
        // A conditional write racing another one on AWS; the retry gets the real answer.
        case 409: code == "ConditionalRequestConflict" || code == "OperationAborted"
        default: false
        }
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1): uniformly random in
    /// `0 ... min(maximumDelay, baseDelay * 2^(attempt-1))`.
    public func delay(afterAttempt attempt: Int, using random: inout some RandomNumberGenerator) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let cap = min(maximumDelay, baseDelay * (1 << exponent))
        let capNanoseconds = cap.components.seconds * 1_000_000_000 + cap.components.attoseconds / 1_000_000_000
        guard capNanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...capNanoseconds, using: &random))
    }

    public func delay(afterAttempt attempt: Int) -> Duration {
        var random = SystemRandomNumberGenerator()
        return delay(afterAttempt: attempt, using: &random)
    }
}
