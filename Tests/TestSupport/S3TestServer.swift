import BlobStore
import BlobStoreS3
import Foundation

/// The S3 server `Scripts/test` starts (`Scripts/s3-server up`), described by environment
/// variables; S3 tests are skipped when they are not set.
///
/// `ICLOUDFS_TEST_S3_ENDPOINT` (http://127.0.0.1:PORT), `ICLOUDFS_TEST_S3_BUCKET`,
/// `ICLOUDFS_TEST_S3_REGION`, and the usual `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`.
public enum S3TestServer {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    public static var endpoint: String? { environment["ICLOUDFS_TEST_S3_ENDPOINT"].flatMap { $0.isEmpty ? nil : $0 } }
    public static var bucket: String { environment["ICLOUDFS_TEST_S3_BUCKET"] ?? "icloudfs-test" }
    public static var region: String { environment["ICLOUDFS_TEST_S3_REGION"] ?? "us-east-1" }

    public static var isAvailable: Bool {
        endpoint != nil && environment["AWS_ACCESS_KEY_ID"] != nil && environment["AWS_SECRET_ACCESS_KEY"] != nil
    }

    /// A store URL for a fresh prefix in the test bucket (or another bucket).
    public static func url(prefix: String, bucket: String? = nil) -> String {
        "s3://\(bucket ?? self.bucket)/\(prefix)?endpoint=\(endpoint ?? "http://127.0.0.1:7480")&region=\(region)"
    }

    /// A unique prefix, so that every test starts from an empty store.
    public static func uniquePrefix(_ label: String) -> String {
        "tests/\(label)-\(UUID().uuidString)"
    }

    public static func location(prefix: String, bucket: String? = nil) throws -> S3Location {
        try S3Location(url: url(prefix: prefix, bucket: bucket))
    }

    /// A store on the test server, or nil when there is none.
    public static func store(
        _ label: String, retry: S3RetryPolicy = .standard, credentials: S3Credentials? = nil, bucket: String? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws -> S3Store? {
        guard isAvailable else { return nil }
        return S3Store(
            location: try location(prefix: uniquePrefix(label), bucket: bucket),
            credentials: try credentials ?? S3Credentials.resolve(), retry: retry, clock: clock)
    }
}
