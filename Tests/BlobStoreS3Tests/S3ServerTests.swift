import BlobStore
import ContainerFormat
import Foundation
import Logging
import Replica
import Testing
import TestSupport

@testable import BlobStoreS3

/// Against the real S3 server that `Scripts/test` starts (Ceph RGW); skipped without it.
@Suite(.enabled(if: S3TestServer.isAvailable, "no S3 test server (Scripts/test starts one)"))
struct S3ServerTests {
    static let quick = S3RetryPolicy(maximumAttempts: 3, baseDelay: .milliseconds(10), maximumDelay: .milliseconds(50))

    /// The message of the error `body` throws, or a recorded issue.
    func storeError(_ body: () async throws -> Void) async -> StoreError? {
        do {
            try await body()
            Issue.record("expected an error")
        } catch let error as StoreError {
            return error
        } catch {
            Issue.record("not a StoreError: \(error)")
        }
        return nil
    }

    @Test("a wrong secret: permissionDenied, saying to check the credentials")
    func badCredentials() async throws {
        let good = try S3Credentials.resolve()
        let wrong = S3Credentials(accessKeyID: good.accessKeyID, secretAccessKey: "wrong-secret", source: "test")
        let store = try #require(try S3TestServer.store("badcredentials", retry: Self.quick, credentials: wrong))
        let error = await storeError { _ = try await store.get(try BlobKey("identity")) }
        #expect(error?.code == "permissionDenied")
        #expect(error?.message.contains("refused the credentials (SignatureDoesNotMatch") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") == true)
        #expect(error?.message.contains("wrong-secret") == false)
        let unknown = S3Credentials(accessKeyID: "NOSUCHKEY", secretAccessKey: "x", source: "test")
        let stranger = try #require(try S3TestServer.store("badcredentials", retry: Self.quick, credentials: unknown))
        let refused = await storeError { try await stranger.put(try BlobKey("k"), data: Data()) }
        #expect(refused?.message.contains("InvalidAccessKeyId") == true, "\(refused?.message ?? "")")
    }

    @Test("a bucket that does not exist: one line naming the bucket, for get, head, put and list")
    func missingBucket() async throws {
        let store = try #require(try S3TestServer.store("nobucket", retry: Self.quick, bucket: "icloudfs-no-such-bucket"))
        let key = try BlobKey("c/identity")
        let errors = [
            await storeError { _ = try await store.get(key) },
            await storeError { _ = try await store.size(of: key) },
            await storeError { try await store.putIfAbsent(key, data: Data("x".utf8)) },
            await storeError { _ = try await store.list(prefix: "c/", after: nil, limit: 10) },
        ]
        for error in errors {
            #expect(error?.code == "serverUnavailable")
            #expect(error?.message.hasPrefix("S3 bucket 'icloudfs-no-such-bucket' does not exist at") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("\n") == false)
        }
    }

    @Test("a clock an hour off: the message says to set the clock")
    func clockSkew() async throws {
        let store = try #require(
            try S3TestServer.store("skew", retry: Self.quick, clock: { Date().addingTimeInterval(3600) }))
        let error = await storeError { _ = try await store.get(try BlobKey("k")) }
        #expect(error?.message.contains("RequestTimeTooSkewed") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("set the system clock") == true)
    }

    @Test("several processes racing put-if-absent on one S3 key: exactly one wins, its bytes stay")
    func racingProcesses() async throws {
        let folder = TemporaryDirectory("s3race")
        defer { folder.remove() }
        let prefix = S3TestServer.uniquePrefix("race")
        let url = S3TestServer.url(prefix: prefix)
        let store = try S3Store.open(url: url)
        for round in 0..<4 {
            let start = folder.sub("start-\(round)")
            let key = "c/journal/\(round)"
            let (winners, clean) = try HelperProcess.racePutIfAbsent(
                store: url, key: key, writers: 6, startFile: start)
            #expect(clean)
            #expect(winners.count == 1, "round \(round): winners \(winners)")
            let stored = try await store.get(try BlobKey(key))
            #expect(String(decoding: stored, as: UTF8.self) == "writer-\(winners.first ?? -1)")
        }
    }

    @Test("a 4 KiB edit in a 64 MB file adds only a chunk or two to the bucket")
    func smallEditUploadsLittle() async throws {
        let store = try #require(try S3TestServer.store("edit"))
        let folder = TemporaryDirectory("s3edit")
        defer { folder.remove() }
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        let configuration = ReplicaConfiguration(
            container: "iCloud.com.example.s3edit", cacheDirectory: folder.sub("cache"), deviceName: "editor")
        let replica = try await Replica.open(configuration, store: store, logger: logger)
        var random = SeededRandom(seed: 64)
        var data = random.data(count: 64 << 20)
        let id = try replica.makeFile("big.bin", in: .root, mode: 0o644).id
        var file = try await replica.open(id, write: true, truncate: true)
        try replica.write(file, offset: 0, data: data)
        try replica.close(file)
        try await replica.push()
        let before = try await objectSizes(store)

        let offset = 40_000_000
        data.replaceSubrange(offset..<offset + 4096, with: random.data(count: 4096))
        file = try await replica.open(id, write: true, truncate: false)
        try replica.write(file, offset: UInt64(offset), data: data[offset..<offset + 4096])
        try replica.close(file)
        try await replica.push()
        let after = try await objectSizes(store)

        let added = after.filter { before[$0.key] == nil }
        let chunks = added.filter { $0.key.contains("/chunks/") }
        let addedBytes = added.values.reduce(0, +)
        print("4 KiB edit in a 64 MiB file on S3: \(added.count) new objects, \(chunks.count) chunks, \(addedBytes) bytes (the file was \(before.values.reduce(0, +)) bytes in \(before.count) objects)")
        #expect((1...2).contains(chunks.count), "\(chunks.count) new chunks")
        #expect(addedBytes <= 2 * 4 << 20 + 64 << 10, "\(addedBytes) new bytes")

        // Another device reads the edited file back from the bucket.
        let reader = try await Replica.open(
            ReplicaConfiguration(container: configuration.container, cacheDirectory: folder.sub("cache-b"), deviceName: "reader"),
            store: store, logger: logger)
        let readerFile = try await reader.open(try reader.lookup("big.bin", in: .root).id, write: false, truncate: false)
        let window = try await reader.read(readerFile, offset: UInt64(offset - 10), count: 4116)
        #expect(window == data[(offset - 10)..<(offset + 4106)])
        try reader.close(readerFile)
    }

    /// Every object under the store's prefix with its size.
    func objectSizes(_ store: S3Store) async throws -> [String: UInt64] {
        var sizes: [String: UInt64] = [:]
        for object in try await store.listAll(prefix: "") {
            sizes[object.key.rawValue] = object.size
        }
        return sizes
    }
}
