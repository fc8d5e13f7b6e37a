import Foundation
import Testing

@testable import BlobStoreS3

/// The example signatures of AWS's "Signature Calculations for the Authorization Header:
/// Transferring Payload in a Single Chunk" (S3 API reference), with its example key pair.
struct SigV4SignerTests {
    let signer = SigV4Signer(
        credentials: S3Credentials(
            accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
        region: "us-east-1")
    /// 2013-05-24T00:00:00Z
    let date = Date(timeIntervalSince1970: 1_369_353_600)
    let host = ("host", "examplebucket.s3.amazonaws.com")

    func authorization(_ request: SigV4Signer.Request) -> String? {
        signer.sign(request, date: date).first { $0.name == "authorization" }?.value
    }

    @Test("GET object with a range: the documented signature")
    func getObject() {
        let request = SigV4Signer.Request(
            method: "GET", path: "/test.txt", headers: [host, ("range", "bytes=0-9")],
            payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(
            authorization(request)
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        )
        let canonical = signer.canonicalRequest(
            request,
            headers: request.headers + [("x-amz-date", "20130524T000000Z"), ("x-amz-content-sha256", SigV4Signer.emptyPayloadHash)])
        #expect(canonical.request.hasPrefix("GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"))
    }

    @Test("PUT object with an escaped key and extra headers: the documented signature")
    func putObject() {
        let body = Data("Welcome to Amazon S3.".utf8)
        let request = SigV4Signer.Request(
            method: "PUT", path: "/" + SigV4Signer.uriEncode("test$file.text", keepSlash: true),
            headers: [("date", "Fri, 24 May 2013 00:00:00 GMT"), host, ("x-amz-storage-class", "REDUCED_REDUNDANCY")],
            payloadHash: SigV4Signer.payloadHash(body))
        #expect(request.path == "/test%24file.text")
        #expect(request.payloadHash == "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
        #expect(authorization(request)?.hasSuffix("Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd") == true)
    }

    @Test("GET bucket lifecycle (a query name without a value): the documented signature")
    func getLifecycle() {
        let request = SigV4Signer.Request(
            method: "GET", path: "/", query: [("lifecycle", "")], headers: [host],
            payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(authorization(request)?.hasSuffix("Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543") == true)
    }

    @Test("list objects (query parameters sorted): the documented signature")
    func listObjects() {
        let request = SigV4Signer.Request(
            method: "GET", path: "/", query: [("prefix", "J"), ("max-keys", "2")], headers: [host],
            payloadHash: SigV4Signer.emptyPayloadHash)
        #expect(SigV4Signer.canonicalQuery(request.query) == "max-keys=2&prefix=J")
        #expect(authorization(request)?.hasSuffix("Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7") == true)
    }

    @Test("temporary credentials sign and send the session token")
    func sessionToken() {
        let withToken = SigV4Signer(
            credentials: S3Credentials(accessKeyID: "AKID", secretAccessKey: "secret", sessionToken: "TOKEN"),
            region: "eu-west-1")
        let headers = withToken.sign(
            SigV4Signer.Request(method: "GET", path: "/k", headers: [host], payloadHash: SigV4Signer.emptyPayloadHash),
            date: date)
        #expect(headers.contains { $0.name == "x-amz-security-token" && $0.value == "TOKEN" })
        let authorization = headers.first { $0.name == "authorization" }?.value ?? ""
        #expect(authorization.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token"))
        #expect(authorization.contains("/eu-west-1/s3/aws4_request"))
        #expect(!headers.contains { $0.value.contains("secret") })
    }

    @Test("timestamps are UTC, zero-padded, across leap days and years")
    func timestamps() {
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 0)) == "19700101T000000Z")
        #expect(SigV4Signer.timestamp(date) == "20130524T000000Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 951_782_400 + 3723.9)) == "20000229T010203Z")
        #expect(SigV4Signer.timestamp(Date(timeIntervalSince1970: 4_102_444_799)) == "20991231T235959Z")
    }

    @Test("query values are percent-encoded, slashes included")
    func queryEncoding() {
        #expect(SigV4Signer.canonicalQuery([("prefix", "a/b c"), ("continuation-token", "x+y=")])
            == "continuation-token=x%2By%3D&prefix=a%2Fb%20c")
    }
}
