import BlobStore
import Foundation
import Logging
import Testing
import TestSupport

@testable import BlobStoreS3

/// Retries, lost answers and transport failures, against a scripted loopback server.
struct S3RetryTests {
    static let quick = S3RetryPolicy(maximumAttempts: 4, baseDelay: .milliseconds(5), maximumDelay: .milliseconds(20))
    static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
    static let credentials = S3Credentials(accessKeyID: "AKIDTEST", secretAccessKey: "never-shown-secret", source: "test")

    func store(_ server: FaultServer, retry: S3RetryPolicy = quick) throws -> S3Store {
        S3Store(
            location: try S3Location(url: "s3://bucket/pre?endpoint=\(server.endpoint)"), credentials: Self.credentials,
            retry: retry, logger: Self.quiet)
    }

    func slowDown() -> FaultServer.Answer {
        .status(503, body: "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")
    }

    @Test("503 SlowDown and 500 are retried, then the answer is used")
    func retriesServerErrors() async throws {
        let server = try FaultServer([slowDown(), .status(500), .status(200, body: "hello")])
        defer { server.stop() }
        let data = try await store(server).get(try BlobKey("a/b"))
        #expect(data == Data("hello".utf8))
        #expect(server.received.map(\.target) == Array(repeating: "/bucket/pre/a/b", count: 3))
    }

    @Test("a server that keeps failing is unavailable after the last attempt, with its status")
    func givesUp() async throws {
        let server = try FaultServer(Array(repeating: slowDown(), count: 4))
        defer { server.stop() }
        await #expect {
            try await store(server).put(try BlobKey("k"), data: Data("x".utf8))
        } throws: { error in
            guard let error = error as? StoreError else { return false }
            return error.code == "serverUnavailable" && error.message.contains("503 SlowDown")
        }
        #expect(server.received.count == 4)
    }

    @Test("a 403 is not retried and says to check the credentials, without showing the secret")
    func badCredentials() async throws {
        let server = try FaultServer([.status(403, body: "<Error><Code>SignatureDoesNotMatch</Code></Error>")])
        defer { server.stop() }
        do {
            _ = try await store(server).get(try BlobKey("k"))
            Issue.record("a refused request succeeded")
        } catch let error as StoreError {
            #expect(error.code == "permissionDenied")
            #expect(error.message.contains("check AWS_ACCESS_KEY_ID"))
            #expect(!error.message.contains("never-shown-secret"))
        }
        #expect(server.received.count == 1)
    }

    @Test("every request is signed with the real payload hash, and the secret is never sent")
    func signedRequests() async throws {
        let server = try FaultServer([.status(200)])
        defer { server.stop() }
        let body = Data("payload".utf8)
        try await store(server).put(try BlobKey("k"), data: body)
        let request = try #require(server.received.first)
        #expect(request.headers["x-amz-content-sha256"] == SigV4Signer.payloadHash(body))
        #expect(request.headers["authorization"]?.hasPrefix("AWS4-HMAC-SHA256 Credential=AKIDTEST/") == true)
        #expect(request.headers["host"] == "127.0.0.1:\(server.port)")
        #expect(request.body == body)
        #expect(!request.headers.values.contains { $0.contains("never-shown-secret") })
    }

    @Test("put-if-absent sends If-None-Match: * and takes a first 412 as taken, without reading back")
    func firstPreconditionFailed() async throws {
        let server = try FaultServer([.status(412, body: "<Error><Code>PreconditionFailed</Code></Error>")])
        defer { server.stop() }
        await #expect(throws: StoreError.alreadyExists("j/1")) {
            try await store(server).putIfAbsent(try BlobKey("j/1"), data: Data("mine".utf8))
        }
        #expect(server.received.map(\.method) == ["PUT"])
        #expect(server.received.first?.headers["if-none-match"] == "*")
    }

    @Test("put-if-absent whose answer was lost, then 412: our bytes in the bucket mean we won")
    func lostAnswerOurs() async throws {
        let server = try FaultServer([.drop, .status(412), .status(200, body: "mine")])
        defer { server.stop() }
        try await store(server).putIfAbsent(try BlobKey("j/1"), data: Data("mine".utf8))
        #expect(server.received.map(\.method) == ["PUT", "PUT", "GET"])
    }

    @Test("put-if-absent whose answer was lost, then 412: another writer's bytes mean we lost")
    func lostAnswerTheirs() async throws {
        let server = try FaultServer([.drop, .status(412), .status(200, body: "theirs")])
        defer { server.stop() }
        await #expect(throws: StoreError.alreadyExists("j/1")) {
            try await store(server).putIfAbsent(try BlobKey("j/1"), data: Data("mine".utf8))
        }
    }

    @Test("put-if-absent after a 500, then 412: settled by reading back too")
    func serverErrorThenTaken() async throws {
        let server = try FaultServer([.status(500), .status(412), .status(200, body: "theirs")])
        defer { server.stop() }
        await #expect(throws: StoreError.alreadyExists("j/1")) {
            try await store(server).putIfAbsent(try BlobKey("j/1"), data: Data("mine".utf8))
        }
        #expect(server.received.map(\.method) == ["PUT", "PUT", "GET"])
    }

    @Test("an endpoint where nothing listens is unavailable, saying it is unreachable")
    func unreachable() async throws {
        let port = try FaultServer.closedPort()
        let store = S3Store(
            location: try S3Location(url: "s3://bucket/p?endpoint=http://127.0.0.1:\(port)"), credentials: Self.credentials,
            retry: Self.quick, logger: Self.quiet)
        let started = ContinuousClock.now
        do {
            _ = try await store.get(try BlobKey("k"))
            Issue.record("a request to a closed port succeeded")
        } catch let error as StoreError {
            #expect(error.code == "serverUnavailable")
            #expect(error.message.contains("http://127.0.0.1:\(port) is unreachable"), "\(error.message)")
            #expect(error.message.contains("connection refused"), "\(error.message)")
        }
        // It gives up instead of retrying for good (a few quick retries: under a second
        // here, but 44 s once under ThreadSanitizer with every suite running at once).
        #expect(ContinuousClock.now - started < .seconds(120))
    }

    @Test("list follows continuation tokens and strips the prefix")
    func listPages() async throws {
        func page(_ keys: [String], next: String?) -> FaultServer.Answer {
            let contents = keys.map { "<Contents><Key>pre/\($0)</Key></Contents>" }.joined()
            let truncation = next.map { "<IsTruncated>true</IsTruncated><NextContinuationToken>\($0)</NextContinuationToken>" }
                ?? "<IsTruncated>false</IsTruncated>"
            return .status(200, body: "<ListBucketResult>\(truncation)\(contents)</ListBucketResult>")
        }
        let server = try FaultServer([page(["c/1", "c/2"], next: "tok/en+="), page(["c/3"], next: nil)])
        defer { server.stop() }
        let keys = try await store(server).list(prefix: "c/", after: try BlobKey("c/0"), limit: 10)
        #expect(keys.map(\.key.rawValue) == ["c/1", "c/2", "c/3"])
        let targets = server.received.map(\.target)
        #expect(targets.first?.contains("start-after=pre%2Fc%2F0") == true)
        #expect(targets.first?.contains("prefix=pre%2Fc%2F") == true)
        #expect(targets.last?.contains("continuation-token=tok%2Fen%2B%3D") == true)
    }

    @Test("a range past the end gives no bytes; a missing key is notFound")
    func rangesAndMissing() async throws {
        let server = try FaultServer([
            .status(416, body: "<Error><Code>InvalidRange</Code></Error>"),
            .status(404, body: "<Error><Code>NoSuchKey</Code></Error>"),
            .status(404),  // HEAD of the key
            .status(200),  // HEAD of the bucket
        ])
        defer { server.stop() }
        let store = try store(server)
        #expect(try await store.get(try BlobKey("k"), range: 100..<200).isEmpty)
        #expect(server.received.first?.headers["range"] == "bytes=100-199")
        await #expect(throws: StoreError.notFound("k")) { try await store.get(try BlobKey("k")) }
        #expect(try await store.size(of: try BlobKey("k")) == nil)
        #expect(server.received.map(\.target).last == "/bucket")
    }

    @Test("backoff delays grow exponentially and stay within the cap")
    func backoff() {
        let policy = S3RetryPolicy(maximumAttempts: 10, baseDelay: .milliseconds(100), maximumDelay: .seconds(2))
        let seed: UInt64 = 7
        print("backoff: seed \(seed)")
        var random = SeededRandom(seed: seed)
        var previousCap = Duration.zero
        for attempt in 1...10 {
            // 100 ms, 200, 400, 800, 1600, then the 2 s cap.
            let cap = min(Duration.seconds(2), .milliseconds(100) * (1 << (attempt - 1)))
            let delays = (0..<200).map { _ in policy.delay(afterAttempt: attempt, using: &random) }
            #expect(delays.allSatisfy { $0 >= .zero && $0 <= cap }, "attempt \(attempt): outside 0...\(cap)")
            // Uniform over 0...cap ("full jitter"): 200 draws reach past three quarters of it
            // (all below would be a 4^-200 chance) and average about half. A delay that stays
            // zero, constant or grows slower than doubling fails here.
            let largest = delays.max()!
            let mean = delays.map { $0 / cap }.reduce(0, +) / Double(delays.count)
            #expect(largest > cap * 0.75, "attempt \(attempt): largest \(largest) of cap \(cap)")
            #expect(mean > 0.4 && mean < 0.6, "attempt \(attempt): mean \(mean) of cap \(cap)")
            // Each doubling shows: this attempt waits longer than the last one ever could.
            if cap > previousCap { #expect(largest > previousCap, "attempt \(attempt)") }
            previousCap = cap
        }
        #expect(policy.delay(afterAttempt: 40, using: &random) <= .seconds(2))
        #expect(S3RetryPolicy(baseDelay: .zero).delay(afterAttempt: 3, using: &random) == .zero)
        #expect(S3RetryPolicy.isRetryable(status: 503, code: "SlowDown"))
        #expect(S3RetryPolicy.isRetryable(status: 429, code: nil))
        #expect(S3RetryPolicy.isRetryable(status: 400, code: "RequestTimeout"))
        #expect(!S3RetryPolicy.isRetryable(status: 412, code: "PreconditionFailed"))
        #expect(!S3RetryPolicy.isRetryable(status: 403, code: "AccessDenied"))
        #expect(!S3RetryPolicy.isRetryable(status: 404, code: "NoSuchKey"))
    }
}
