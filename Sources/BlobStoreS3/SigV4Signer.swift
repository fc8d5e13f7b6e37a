import Crypto
import Foundation

/// AWS Signature Version 4 for S3, as a pure function of the request, the credentials and a
/// date the caller passes in (so tests can sign with a skewed clock, and with the documented
/// example's date).
///
/// Signed: every header given (which must include `host`), plus `x-amz-date`,
/// `x-amz-content-sha256` and, with temporary credentials, `x-amz-security-token`.
/// The payload hash is the real SHA-256 of the body (Ceph RGW 16 refuses requests without
/// `x-amz-content-sha256`, and a real hash also protects the body over plain http).
public struct SigV4Signer: Sendable {
    public let credentials: S3Credentials
    public let region: String
    public let service: String

    public init(credentials: S3Credentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    /// What is signed: `path` already URI-encoded (as it goes on the wire), `query` raw.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [(name: String, value: String)]
        public var headers: [(name: String, value: String)]
        public var payloadHash: String

        public init(
            method: String, path: String, query: [(name: String, value: String)] = [],
            headers: [(name: String, value: String)], payloadHash: String
        ) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.payloadHash = payloadHash
        }
    }

    /// SHA-256 of the empty body, for GET, HEAD and DELETE.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    public static func payloadHash(_ body: Data) -> String {
        hex(SHA256.hash(data: body))
    }

    /// The request's headers with the signing headers and `authorization` added.
    public func sign(_ request: Request, date: Date) -> [(name: String, value: String)] {
        let stamp = SigV4Signer.timestamp(date)
        var headers = request.headers
        headers.append(("x-amz-date", stamp))
        headers.append(("x-amz-content-sha256", request.payloadHash))
        if let token = credentials.sessionToken { headers.append(("x-amz-security-token", token)) }
        let canonical = canonicalRequest(request, headers: headers)
        let day = String(stamp.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = "AWS4-HMAC-SHA256\n\(stamp)\n\(scope)\n\(SigV4Signer.hex(SHA256.hash(data: Data(canonical.request.utf8))))"
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = SigV4Signer.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
        headers.append((
            "authorization",
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(canonical.signedHeaders), Signature=\(signature)"
        ))
        return headers
    }

    /// The canonical request text and the signed header list (exposed for tests).
    func canonicalRequest(_ request: Request, headers: [(name: String, value: String)]) -> (request: String, signedHeaders: String) {
        var byName: [String: [String]] = [:]
        for (name, value) in headers {
            let trimmed = value.trimmingCharacters(in: .whitespaces)
                .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            byName[name.lowercased(), default: []].append(trimmed)
        }
        let names = byName.keys.sorted()
        let canonicalHeaders = names.map { "\($0):\(byName[$0]!.joined(separator: ","))\n" }.joined()
        let signedHeaders = names.joined(separator: ";")
        let text = [
            request.method, request.path, SigV4Signer.canonicalQuery(request.query), canonicalHeaders, signedHeaders,
            request.payloadHash,
        ].joined(separator: "\n")
        return (text, signedHeaders)
    }

    /// `name=value` pairs, each URI-encoded, sorted by name then value, joined by `&`; the
    /// same string is sent on the wire so that what is signed is what arrives.
    public static func canonicalQuery(_ query: [(name: String, value: String)]) -> String {
        query.map { (uriEncode($0.name, keepSlash: false), uriEncode($0.value, keepSlash: false)) }
            .sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
            .map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
    }

    /// RFC 3986 encoding as SigV4 wants it: unreserved characters stay, everything else is
    /// `%XX` (upper-case hex); `/` stays in paths only.
    public static func uriEncode(_ text: String, keepSlash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// `YYYYMMDDTHHMMSSZ` in UTC, computed without calendars or locales.
    public static func timestamp(_ date: Date) -> String {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { String(n).leftPadded(to: 2) }
        return "\(String(year).leftPadded(to: 4))\(two(month))\(two(day))T\(two(secondOfDay / 3600))\(two(secondOfDay / 60 % 60))\(two(secondOfDay % 60))Z"
    }

    static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
