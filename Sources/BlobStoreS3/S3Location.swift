import BlobStore
import Foundation

/// Where an S3 store is: parsed from `s3://BUCKET/PREFIX?endpoint=URL&region=R`.
///
/// With an `endpoint` (MinIO, Ceph RGW, Garage, R2, ...) requests use path-style addressing
/// (`ENDPOINT/BUCKET/KEY`), which every S3-compatible server understands without DNS set-up.
/// Without one the store is AWS: `https://BUCKET.s3.REGION.amazonaws.com/KEY`
/// (virtual-hosted style), or path style when the bucket name has a dot, which TLS
/// wildcard certificates do not cover.
public struct S3Location: Sendable, Equatable, CustomStringConvertible {
    public var bucket: String
    /// Key prefix inside the bucket, without slashes at either end; may be empty.
    public var prefix: String
    public var region: String
    /// `http` or `https`.
    public var scheme: String
    /// Host name or address, without the port.
    public var host: String
    public var port: Int?
    /// True when the bucket is the first path component rather than part of the host name.
    public var pathStyle: Bool

    /// The region when neither the URL nor the environment names one.
    public static let defaultRegion = "us-east-1"

    /// Parses a store URL. `defaultRegion` is used when the URL has no `region=` (the
    /// caller passes `AWS_REGION` or the profile's region here).
    public init(url: String, defaultRegion: String? = nil) throws {
        guard url.hasPrefix("s3://") else { throw S3Location.invalid(url, "it must start with s3://") }
        var rest = Substring(url.dropFirst("s3://".count))
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        let bucketEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        bucket = String(rest[..<bucketEnd])
        prefix = String(rest[bucketEnd...]).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        guard S3Location.isValidBucket(bucket) else {
            throw S3Location.invalid(url, "'\(bucket)' is not a valid bucket name (3-63 of a-z, 0-9, '.', '-')")
        }
        guard prefix.isEmpty || BlobKey.isValid(prefix) else {
            throw S3Location.invalid(url, "the prefix '\(prefix)' may only have parts of A-Z a-z 0-9 . _ -")
        }

        var endpoint: String?
        var region: String?
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            let value = parts.count > 1 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
            switch parts[0] {
            case "endpoint": endpoint = value
            case "region": region = value
            default: throw S3Location.invalid(url, "unknown parameter '\(parts[0])' (known: endpoint, region)")
            }
        }
        self.region = region.flatMap { $0.isEmpty ? nil : $0 } ?? defaultRegion ?? S3Location.defaultRegion

        if let endpoint {
            guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
                scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
                components.path.isEmpty || components.path == "/", components.query == nil
            else {
                throw S3Location.invalid(url, "endpoint '\(endpoint)' must look like http://HOST:PORT or https://HOST")
            }
            self.scheme = scheme
            self.host = host
            self.port = components.port
            pathStyle = true
        } else {
            scheme = "https"
            port = nil
            pathStyle = bucket.contains(".")
            host = pathStyle ? "s3.\(self.region).amazonaws.com" : "\(bucket).s3.\(self.region).amazonaws.com"
        }
    }

    /// `host` or `host:port`, as sent in the `Host` header (and signed).
    public var hostHeader: String {
        guard let port else { return host }
        let isDefault = (scheme == "http" && port == 80) || (scheme == "https" && port == 443)
        return isDefault ? host : "\(host):\(port)"
    }

    /// The origin requests go to, e.g. `http://127.0.0.1:7480`.
    public var origin: String { "\(scheme)://\(hostHeader)" }

    /// The URL path of an object key (already safe: keys and prefix are `[A-Za-z0-9._-/]`).
    public func path(of key: String) -> String {
        pathStyle ? "/\(bucket)/\(key)" : "/\(key)"
    }

    /// The path of the bucket itself (list, HEAD bucket).
    public var bucketPath: String { pathStyle ? "/\(bucket)" : "/" }

    /// The object key in the bucket for a store key: `PREFIX/KEY`.
    public func objectKey(_ key: String) -> String {
        prefix.isEmpty ? key : "\(prefix)/\(key)"
    }

    /// The store key for an object key from a listing, or nil when it is outside the prefix.
    public func storeKey(fromObjectKey objectKey: String) -> String? {
        if prefix.isEmpty { return objectKey }
        guard objectKey.hasPrefix(prefix + "/") else { return nil }
        return String(objectKey.dropFirst(prefix.count + 1))
    }

    /// For messages: `s3://bucket/prefix at http://host:port`, never credentials.
    public var description: String {
        let path = prefix.isEmpty ? bucket : "\(bucket)/\(prefix)"
        return "s3://\(path) at \(origin)"
    }

    static func isValidBucket(_ name: String) -> Bool {
        guard (3...63).contains(name.utf8.count) else { return false }
        return name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    static func invalid(_ url: String, _ why: String) -> StoreError {
        .failed("store \(url): \(why)")
    }
}
