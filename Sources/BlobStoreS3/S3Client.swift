import AsyncHTTPClient
import BlobStore
import Foundation
import Logging
import NIOCore
import NIOFoundationCompat
import NIOHTTP1

/// One S3 answer, body collected.
struct S3Response: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: Data
    /// True when an earlier attempt of this request failed in a way that may have changed
    /// the bucket anyway (its response was lost, or the server failed midway with a 5xx).
    var earlierAttemptMayHaveApplied = false

    var errorBody: S3ErrorBody? { S3XML.errorBody(body) }
    var isSuccess: Bool { (200..<300).contains(status) }
}

/// Signs and sends S3 requests over a shared, keep-alive connection pool, retrying what is
/// worth retrying (see ``S3RetryPolicy``). Returns every HTTP answer, success or not, so
/// that each operation decides what a status means; throws only when the server could not
/// be reached at all, after the last attempt.
struct S3Client: Sendable {
    let location: S3Location
    let signer: SigV4Signer
    let retry: S3RetryPolicy
    let logger: Logger
    /// The time requests are signed with (tests skew it).
    let clock: @Sendable () -> Date
    /// Longest wait for one whole request, body included.
    let requestTimeout: TimeAmount

    /// One pool for the process: connections are reused across stores and requests.
    /// Connection set-up is not retried by the pool itself, so an unreachable endpoint is
    /// reported through our own retries in seconds rather than after a long deadline.
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(5), read: .seconds(60)),
            connectionPool: .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 16))
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.httpVersion = .http1Only
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Sends `method` on `path` (from ``S3Location``), retrying per the policy.
    func send(
        _ method: HTTPMethod, path: String, query: [(name: String, value: String)] = [],
        headers extra: [(name: String, value: String)] = [], body: Data? = nil, maximumBody: UInt64 = S3Store.defaultMaximumSize,
        retryable: (S3Response) -> Bool = { S3RetryPolicy.isRetryable(status: $0.status, code: $0.errorBody?.code) }
    ) async throws -> S3Response {
        let payloadHash = body.map(SigV4Signer.payloadHash) ?? SigV4Signer.emptyPayloadHash
        var mayHaveApplied = false
        var attempt = 0
        while true {
            attempt += 1
            let outcome: Result<S3Response, any Error>
            do {
                var response = try await sendOnce(
                    method, path: path, query: query, headers: extra, body: body, payloadHash: payloadHash,
                    maximumBody: maximumBody)
                response.earlierAttemptMayHaveApplied = mayHaveApplied
                outcome = .success(response)
            } catch let error as CancellationError {
                throw error
            } catch let error as StoreError {
                throw error  // an answer too large to take: asking again gives the same
            } catch {
                outcome = .failure(error)
            }
            let why: String
            switch outcome {
            case .success(let response):
                guard !response.isSuccess, retryable(response), attempt < retry.maximumAttempts else { return response }
                why = [String(response.status), response.errorBody?.code].compactMap { $0 }.joined(separator: " ")
                if response.status >= 500 { mayHaveApplied = true }
            case .failure(let error):
                guard attempt < retry.maximumAttempts else {
                    throw StoreError.unavailable(
                        "S3 endpoint \(location.origin) is unreachable (\(S3Client.describe(error))) after \(attempt) attempts")
                }
                why = S3Client.describe(error)
                // The request may have reached the server before the connection failed.
                mayHaveApplied = true
            }
            let delay = retry.delay(afterAttempt: attempt)
            logger.info("S3 \(method.rawValue) \(path): \(why); retrying in \(delay) (attempt \(attempt + 1) of \(retry.maximumAttempts))")
            try await Task.sleep(for: delay)
        }
    }

    private func sendOnce(
        _ method: HTTPMethod, path: String, query: [(name: String, value: String)],
        headers extra: [(name: String, value: String)], body: Data?, payloadHash: String, maximumBody: UInt64
    ) async throws -> S3Response {
        let toSign = SigV4Signer.Request(
            method: method.rawValue, path: path, query: query,
            headers: [("host", location.hostHeader)] + extra, payloadHash: payloadHash)
        let queryString = SigV4Signer.canonicalQuery(query)
        var request = HTTPClientRequest(url: location.origin + path + (queryString.isEmpty ? "" : "?" + queryString))
        request.method = method
        for (name, value) in signer.sign(toSign, date: clock()) {
            request.headers.add(name: name, value: value)
        }
        if let body { request.body = .bytes(body) }
        logger.trace("S3 \(method.rawValue) \(path)")
        // No logger for the HTTP client: its debug output would carry the signed headers.
        let response = try await S3Client.http.execute(request, timeout: requestTimeout)
        // A HEAD answer has a Content-Length but no body.
        let data: ByteBuffer
        do {
            data = method == .HEAD ? ByteBuffer() : try await response.body.collect(upTo: Int(clamping: maximumBody))
        } catch is NIOTooManyBytesError {
            throw StoreError.badObject("S3 \(method.rawValue) \(path): the answer is larger than the \(maximumBody) bytes allowed")
        }
        return S3Response(status: Int(response.status.code), headers: response.headers, body: Data(buffer: data, byteTransferStrategy: .noCopy))
    }

    /// A short reason for a transport failure, for messages.
    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "connecting timed out"
            case .readTimeout, .deadlineExceeded: return "no answer in time"
            case .remoteConnectionClosed: return "the server closed the connection"
            default: return "\(error)"
            }
        }
        let text = "\(error)"
        if text.contains("refused") { return "connection refused" }
        if text.contains("reset") { return "connection reset" }
        return text
    }
}
