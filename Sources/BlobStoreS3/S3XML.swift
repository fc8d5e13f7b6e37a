import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// One page of `ListObjectsV2`.
package struct S3ListPage: Equatable {
    /// Each object's key, size and `LastModified` text, in the order listed.
    var objects: [S3ListedObject] = []
    var keys: [String] { objects.map(\.key) }
    var isTruncated = false
    var nextContinuationToken: String?
    /// With a delimiter: the key prefixes that end at it (`CommonPrefixes`).
    var commonPrefixes: [String] = []
}

package struct S3ListedObject: Equatable {
    var key: String
    var size: UInt64 = 0
    var lastModified = ""

    /// `LastModified` (ISO 8601, e.g. `2026-11-25T04:30:00.000Z`); nil if it is not one.
    var modified: Date? {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return withFraction.date(from: lastModified) ?? ISO8601DateFormatter().date(from: lastModified)
    }
}

/// The `<Error>` body S3 sends with a failure status.
package struct S3ErrorBody: Equatable {
    var code: String?
    var message: String?
    var bucket: String?
}

/// Reads the few XML documents S3 answers with. Only element text is collected, by path,
/// so that namespaces and unknown elements are ignored.
package enum S3XML {
    package static func listPage(_ data: Data) throws -> S3ListPage {
        var page = S3ListPage()
        let found = try collect(data) { path, text in
            switch path {
            case ["ListBucketResult", "Contents", "Key"]: page.objects.append(S3ListedObject(key: text))
            case ["ListBucketResult", "Contents", "Size"] where !page.objects.isEmpty:
                page.objects[page.objects.count - 1].size = UInt64(text) ?? 0
            case ["ListBucketResult", "Contents", "LastModified"] where !page.objects.isEmpty:
                page.objects[page.objects.count - 1].lastModified = text
            case ["ListBucketResult", "CommonPrefixes", "Prefix"]: page.commonPrefixes.append(text)
            case ["ListBucketResult", "IsTruncated"]: page.isTruncated = text == "true"
            case ["ListBucketResult", "NextContinuationToken"]: page.nextContinuationToken = text
            default: break
            }
        }
        guard found == "ListBucketResult" else {
            throw XMLError.unexpected(root: found)
        }
        return page
    }

    /// The error body, or nil when there is none (HEAD) or it is not S3's XML.
    package static func errorBody(_ data: Data) -> S3ErrorBody? {
        guard !data.isEmpty else { return nil }
        var body = S3ErrorBody()
        let root = try? collect(data) { path, text in
            switch path {
            case ["Error", "Code"]: body.code = text
            case ["Error", "Message"]: body.message = text.isEmpty ? nil : text
            case ["Error", "BucketName"]: body.bucket = text
            default: break
            }
        }
        return root == "Error" ? body : nil
    }

    enum XMLError: Error, CustomStringConvertible {
        case malformed(String)
        case unexpected(root: String?)

        var description: String {
            switch self {
            case .malformed(let why): "malformed XML from the S3 server: \(why)"
            case .unexpected(let root): "unexpected XML from the S3 server (root element \(root ?? "none"))"
            }
        }
    }

    /// Calls `visit` with each element's path (local names) and its text; returns the root's name.
    private static func collect(_ data: Data, _ visit: ([String], String) -> Void) throws -> String? {
        let collector = TextCollector()
        let parser = XMLParser(data: try plainDocument(data))
        parser.delegate = collector
        guard parser.parse() else {
            throw XMLError.malformed(parser.parserError.map { "\($0)" } ?? "unknown error")
        }
        for (path, text) in collector.elements { visit(path, text) }
        return collector.root
    }

    /// The document without its XML declaration, if it is one FoundationXML can take:
    /// valid UTF-8, and no comment, DTD, CDATA or processing instruction (S3 answers hold
    /// none). On Linux XMLParser traps on a comment, instruction or name whose bytes are not
    /// UTF-8 (it force-unwraps their decoding; the fuzzer found `<?xml\u{FB}...`), and a
    /// server's answer must never end the daemon.
    static func plainDocument(_ data: Data) throws -> Data {
        guard var text = String(validating: data, as: UTF8.self)?[...] else {
            throw XMLError.malformed("not UTF-8")
        }
        text = text.drop { $0.isWhitespace }
        if text.hasPrefix("<?xml "), let end = text.range(of: "?>") { text = text[end.upperBound...] }
        guard !text.contains("<?"), !text.contains("<!") else {
            throw XMLError.malformed("a comment, DTD, CDATA section or processing instruction")
        }
        return Data(text.utf8)
    }

    private final class TextCollector: NSObject, XMLParserDelegate {
        var stack: [String] = []
        var text = ""
        var root: String?
        var elements: [([String], String)] = []

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
            if root == nil { root = local }
            stack.append(local)
            text = ""
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            text += string
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
            elements.append((stack, text))
            stack.removeLast()
            text = ""
        }
    }
}
