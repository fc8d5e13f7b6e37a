import BlobStore
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// A store in an S3 bucket (AWS S3, Ceph RGW, MinIO, Garage, R2, ...): key `K` is the
/// object `PREFIX/K`.
///
/// - put-if-absent is `PUT` with `If-None-Match: *`; `412` means the key is taken. When an
///   earlier attempt of the same call may have landed (its response was lost), a `412` is
///   settled by reading the object back: our own bytes mean we won.
/// - list is `ListObjectsV2` with `start-after`, following continuation tokens.
/// - ranged get is `GET` with `Range`; a range past the end gives no bytes (as in
///   ``DirectoryStore``).
public struct S3Store: BlobStore {
    public let s3Location: S3Location
    let client: S3Client
    let credentials: S3Credentials
    /// Set once the bucket is known to exist, so that a `404` to `HEAD` (which has no body)
    /// is only checked against a missing bucket once.
    private let bucket = BucketState()

    public var location: String { s3Location.description }

    /// - Parameters:
    ///   - clock: the time requests are signed with; only tests change it.
    public init(
        location: S3Location, credentials: S3Credentials, retry: S3RetryPolicy = .standard,
        logger: Logger = Logger(label: "icloudfs.s3"), requestTimeout: Duration = .seconds(120),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        s3Location = location
        self.credentials = credentials
        let timeout = requestTimeout.components
        client = S3Client(
            location: location, signer: SigV4Signer(credentials: credentials, region: location.region), retry: retry,
            logger: logger,
            clock: clock, requestTimeout: .nanoseconds(timeout.seconds * 1_000_000_000 + timeout.attoseconds / 1_000_000_000))
    }

    /// Opens `s3://BUCKET/PREFIX?endpoint=URL&region=R` with credentials and region from
    /// the environment and the AWS shared files.
    public static func open(
        url: String, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger = Logger(label: "icloudfs.s3")
    ) throws -> S3Store {
        let region = environment["AWS_REGION"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["AWS_DEFAULT_REGION"].flatMap { $0.isEmpty ? nil : $0 }
            ?? S3Credentials.profileRegion(environment: environment)
        let location = try S3Location(url: url, defaultRegion: region)
        return S3Store(location: location, credentials: try S3Credentials.resolve(environment: environment), logger: logger)
    }

    public func get(_ key: BlobKey, maximumSize: UInt64) async throws -> Data {
        let response = try await client.send(.GET, path: path(key), maximumBody: maximumSize)
        guard response.status == 200 else { throw error(response, "GET", key) }
        noteBucketSeen()
        return response.body
    }

    public func get(_ key: BlobKey, range: Range<UInt64>) async throws -> Data {
        guard !range.isEmpty else {
            guard try await size(of: key) != nil else { throw StoreError.notFound(key.rawValue) }
            return Data()
        }
        let response = try await client.send(
            .GET, path: path(key), headers: [("range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")])
        switch response.status {
        case 206:
            noteBucketSeen()
            return response.body
        case 200:
            // A server that ignores Range sends the whole object.
            let body = response.body
            let start = Int(min(range.lowerBound, UInt64(body.count)))
            let end = Int(min(range.upperBound, UInt64(body.count)))
            return body.subdata(in: start..<end)
        case 416:
            // The range starts at or past the end: clamped, that is no bytes.
            return Data()
        default:
            throw error(response, "GET", key)
        }
    }

    public func size(of key: BlobKey) async throws -> UInt64? {
        let response = try await client.send(.HEAD, path: path(key))
        switch response.status {
        case 200:
            noteBucketSeen()
            return response.headers.first(name: "content-length").flatMap { UInt64($0) } ?? 0
        case 404:
            try await requireBucket()
            return nil
        default:
            // HEAD answers carry no error body; a GET of one byte tells what is wrong.
            let probe = try await client.send(.GET, path: path(key), headers: [("range", "bytes=0-0")])
            throw error(probe.isSuccess ? response : probe, "HEAD", key)
        }
    }

    public func putIfAbsent(_ key: BlobKey, data: Data) async throws {
        let response = try await client.send(.PUT, path: path(key), headers: [("if-none-match", "*")], body: data)
        switch response.status {
        case 200..<300:
            noteBucketSeen()
        case 412:
            guard response.earlierAttemptMayHaveApplied else { throw StoreError.alreadyExists(key.rawValue) }
            // Our earlier attempt may be the one that created it: only our bytes mean we won.
            let stored = try await get(key)
            client.logger.info("S3 put-if-absent \(key): settled a lost answer by reading back (\(stored == data ? "ours" : "another writer's"))")
            guard stored == data else { throw StoreError.alreadyExists(key.rawValue) }
        default:
            throw error(response, "PUT", key)
        }
    }

    public func put(_ key: BlobKey, data: Data) async throws {
        let response = try await client.send(.PUT, path: path(key), body: data)
        guard response.isSuccess else { throw error(response, "PUT", key) }
        noteBucketSeen()
    }

    public func list(prefix: String, after: BlobKey?, limit: Int) async throws -> [StoredObject] {
        var objects: [StoredObject] = []
        var token: String?
        while objects.count < limit {
            var query: [(name: String, value: String)] = [
                ("list-type", "2"), ("prefix", s3Location.objectKey(prefix)),
                ("max-keys", String(min(limit - objects.count, 1000))),
            ]
            if let token {
                query.append(("continuation-token", token))
            } else if let after {
                query.append(("start-after", s3Location.objectKey(after.rawValue)))
            }
            let page = try await listPage(query, of: prefix)
            for object in page.objects {
                // Objects written by other tools may have names that are not store keys.
                if let storeKey = s3Location.storeKey(fromObjectKey: object.key), let key = try? BlobKey(storeKey) {
                    // A time that cannot be read counts as now: collection keeps such objects.
                    objects.append(StoredObject(key: key, size: object.size, modified: object.modified ?? Date()))
                }
            }
            guard page.isTruncated, let next = page.nextContinuationToken else { break }
            token = next
        }
        return Array(objects.prefix(limit))
    }

    public func listFolders(prefix: String) async throws -> [String] {
        var names: [String] = []
        var token: String?
        let objectPrefix = s3Location.objectKey(prefix)
        repeat {
            var query: [(name: String, value: String)] = [
                ("list-type", "2"), ("prefix", objectPrefix), ("delimiter", "/"), ("max-keys", "1000"),
            ]
            if let token { query.append(("continuation-token", token)) }
            let page = try await listPage(query, of: prefix)
            for common in page.commonPrefixes where common.hasPrefix(objectPrefix) && common.hasSuffix("/") {
                names.append(String(common.dropFirst(objectPrefix.count).dropLast()))
            }
            token = page.isTruncated ? page.nextContinuationToken : nil
        } while token != nil
        return names.sorted()
    }

    public func delete(_ key: BlobKey) async throws {
        let response = try await client.send(.DELETE, path: path(key))
        switch response.status {
        case 200..<300:
            return
        case 404 where response.errorBody?.code != "NoSuchBucket":
            return
        default:
            throw error(response, "DELETE", key)
        }
    }

    // MARK: - Internals

    /// One page of `ListObjectsV2` with `query`'s parameters.
    private func listPage(_ query: [(name: String, value: String)], of prefix: String) async throws -> S3ListPage {
        let response = try await client.send(.GET, path: s3Location.bucketPath, query: query)
        guard response.status == 200 else { throw error(response, "LIST", nil) }
        noteBucketSeen()
        do {
            return try S3XML.listPage(response.body)
        } catch {
            throw StoreError.failed("S3 list of \(prefix) in bucket '\(s3Location.bucket)': \(error)")
        }
    }

    private func path(_ key: BlobKey) -> String {
        s3Location.path(of: s3Location.objectKey(key.rawValue))
    }

    private func noteBucketSeen() {
        bucket.seen.store(true, ordering: .relaxed)
    }

    /// Throws the missing-bucket error when `HEAD` of the bucket says it is not there.
    private func requireBucket() async throws {
        guard !bucket.seen.load(ordering: .relaxed) else { return }
        let response = try await client.send(.HEAD, path: s3Location.bucketPath)
        switch response.status {
        case 200..<300: noteBucketSeen()
        case 404: throw S3ErrorMapping.noSuchBucket(s3Location)
        default: throw error(response, "HEAD", nil)
        }
    }

    private final class BucketState: Sendable {
        let seen = Atomic<Bool>(false)
    }

    private func error(_ response: S3Response, _ operation: String, _ key: BlobKey?) -> StoreError {
        S3ErrorMapping.storeError(
            response, operation: operation, key: key?.rawValue, location: s3Location, credentials: credentials,
            attempts: client.retry.maximumAttempts)
    }
}
