import BlobStore
import Foundation
import Testing
import TestSupport

@testable import BlobStoreS3

struct S3LocationTests {
    @Test("a custom endpoint uses path-style addressing, and keys go under the prefix")
    func customEndpoint() throws {
        let location = try S3Location(url: "s3://bucket/some/prefix/?endpoint=http://127.0.0.1:7480&region=eu-central-1")
        #expect(location.bucket == "bucket")
        #expect(location.prefix == "some/prefix")
        #expect(location.region == "eu-central-1")
        #expect(location.origin == "http://127.0.0.1:7480")
        #expect(location.hostHeader == "127.0.0.1:7480")
        #expect(location.path(of: location.objectKey("c/journal/1")) == "/bucket/some/prefix/c/journal/1")
        #expect(location.bucketPath == "/bucket")
        #expect(location.storeKey(fromObjectKey: "some/prefix/c/x") == "c/x")
        #expect(location.storeKey(fromObjectKey: "some/prefixes/c/x") == nil)
        #expect("\(location)" == "s3://bucket/some/prefix at http://127.0.0.1:7480")
    }

    @Test("without an endpoint the store is AWS, virtual-hosted, and the region defaults")
    func aws() throws {
        let location = try S3Location(url: "s3://my-bucket")
        #expect(location.prefix.isEmpty)
        #expect(location.region == "us-east-1")
        #expect(location.origin == "https://my-bucket.s3.us-east-1.amazonaws.com")
        #expect(location.path(of: location.objectKey("k")) == "/k")
        #expect(location.bucketPath == "/")
        let regional = try S3Location(url: "s3://my.dotted.bucket/p", defaultRegion: "ap-south-1")
        #expect(regional.origin == "https://s3.ap-south-1.amazonaws.com")
        #expect(regional.path(of: regional.objectKey("k")) == "/my.dotted.bucket/p/k")
    }

    @Test("bad store URLs fail with a message naming the problem")
    func badURLs() {
        let cases = [
            ("s3://", "bucket name"), ("s3://UPPER/x", "bucket name"), ("s3://bkt/a//c", "prefix"),
            ("s3://bucket/p?endpoint=ftp://x", "endpoint"), ("s3://bucket/p?colour=blue", "unknown parameter 'colour'"),
            ("s3://bucket/p?endpoint=http://h:1/path", "endpoint"),
        ]
        for (url, words) in cases {
            do {
                _ = try S3Location(url: url)
                Issue.record("\(url) was accepted")
            } catch let error as StoreError {
                #expect(error.message.contains(words), "\(url): \(error.message)")
            } catch {
                Issue.record("\(url): \(error)")
            }
        }
    }
}

struct S3CredentialsTests {
    let folder = TemporaryDirectory("aws")

    @Test("the environment's keys come first, with the session token")
    func environment() throws {
        let credentials = try S3Credentials.resolve(
            environment: ["AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "s3cret", "AWS_SESSION_TOKEN": "tok", "AWS_PROFILE": "other"],
            home: folder.path)
        #expect(credentials.accessKeyID == "AKID")
        #expect(credentials.secretAccessKey == "s3cret")
        #expect(credentials.sessionToken == "tok")
        #expect(!"\(credentials)".contains("s3cret"))
    }

    @Test("a profile is read from ~/.aws/credentials, then from ~/.aws/config")
    func profiles() throws {
        defer { folder.remove() }
        try FileManager.default.createDirectory(atPath: folder.sub(".aws"), withIntermediateDirectories: true)
        try """
            # comment
            [default]
            aws_access_key_id = DEFAULTKEY
            aws_secret_access_key = defaultsecret

            [work]
            aws_access_key_id=WORKKEY
            aws_secret_access_key=worksecret
            aws_session_token = worktoken
            """.write(toFile: folder.sub(".aws/credentials"), atomically: true, encoding: .utf8)
        try """
            [profile lab]
            region = eu-north-1
            aws_access_key_id = LABKEY
            aws_secret_access_key = labsecret
            """.write(toFile: folder.sub(".aws/config"), atomically: true, encoding: .utf8)
        #expect(try S3Credentials.resolve(environment: [:], home: folder.path).accessKeyID == "DEFAULTKEY")
        let work = try S3Credentials.resolve(environment: ["AWS_PROFILE": "work"], home: folder.path)
        #expect(work.accessKeyID == "WORKKEY" && work.sessionToken == "worktoken")
        #expect(try S3Credentials.resolve(environment: ["AWS_PROFILE": "lab"], home: folder.path).accessKeyID == "LABKEY")
        #expect(S3Credentials.profileRegion(environment: ["AWS_PROFILE": "lab"], home: folder.path) == "eu-north-1")
        #expect(throws: StoreError.self) { try S3Credentials.resolve(environment: ["AWS_PROFILE": "nope"], home: folder.path) }
    }

    @Test("no credentials anywhere: a message saying what to set")
    func none() {
        do {
            _ = try S3Credentials.resolve(environment: [:], home: folder.sub("empty"))
            Issue.record("credentials found in an empty home")
        } catch let error as StoreError {
            #expect(error.code == "permissionDenied")
            #expect(error.message.contains("AWS_ACCESS_KEY_ID"))
        } catch {
            Issue.record("\(error)")
        }
    }
}

struct S3XMLTests {
    @Test("a ListObjectsV2 page: keys, truncation and the continuation token")
    func listPage() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><Prefix>p/</Prefix>
            <IsTruncated>true</IsTruncated><NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
            <Contents><Key>p/a</Key><LastModified>2026-11-25T04:30:00.250Z</LastModified><Size>1</Size><ETag>&quot;x&quot;</ETag></Contents>
            <Contents><Key>p/b&amp;c</Key><Size>2</Size></Contents></ListBucketResult>
            """
        let page = try S3XML.listPage(Data(xml.utf8))
        #expect(page.keys == ["p/a", "p/b&c"])
        #expect(page.objects.map(\.size) == [1, 2])
        #expect(page.objects[0].modified == Date(timeIntervalSince1970: 1_795_581_000.25))
        #expect(page.objects[1].modified == nil)
        #expect(page.isTruncated)
        #expect(page.nextContinuationToken == "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=")
        #expect(try S3XML.listPage(Data("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>".utf8)).keys.isEmpty)
        #expect(throws: (any Error).self) { try S3XML.listPage(Data("<Error><Code>X</Code></Error>".utf8)) }
        #expect(throws: (any Error).self) { try S3XML.listPage(Data("not xml".utf8)) }
    }

    @Test("a ListObjectsV2 page with a delimiter: the common prefixes")
    func commonPrefixes() throws {
        let xml = """
            <ListBucketResult><Prefix>p/</Prefix><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>
            <Contents><Key>p/loose</Key><Size>1</Size></Contents>
            <CommonPrefixes><Prefix>p/iCloud.a/</Prefix></CommonPrefixes><CommonPrefixes><Prefix>p/iCloud.b/</Prefix></CommonPrefixes>
            </ListBucketResult>
            """
        let page = try S3XML.listPage(Data(xml.utf8))
        #expect(page.commonPrefixes == ["p/iCloud.a/", "p/iCloud.b/"])
        #expect(page.keys == ["p/loose"])
    }

    @Test("an error body: code, message and bucket")
    func errorBody() {
        let xml = #"<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message></Message><BucketName>nob</BucketName></Error>"#
        #expect(S3XML.errorBody(Data(xml.utf8)) == S3ErrorBody(code: "NoSuchBucket", message: nil, bucket: "nob"))
        #expect(S3XML.errorBody(Data()) == nil)
        #expect(S3XML.errorBody(Data("<html>bad gateway</html>".utf8)) == nil)
    }

    @Test("answers XMLParser would trap on are refused as malformed: bytes that are not UTF-8, instructions, comments")
    func hostileDocuments() {
        // Found by Scripts/fuzz: an instruction whose target is not UTF-8 trapped FoundationXML.
        var instruction = Data("<?xml".utf8)
        instruction.append(0xFB)
        instruction.append(Data(#"version="1.0"?><ListBucketResult></ListBucketResult>"#.utf8))
        var comment = Data("<ListBucketResult><!-- ".utf8)
        comment.append(0xFF)
        comment.append(Data(" --></ListBucketResult>".utf8))
        for document in [instruction, comment, Data("<ListBucketResult><?x y?></ListBucketResult>".utf8),
                         Data("<!DOCTYPE x><ListBucketResult></ListBucketResult>".utf8)] {
            #expect(throws: (any Error).self) { try S3XML.listPage(document) }
            #expect(S3XML.errorBody(document) == nil)
        }
    }
}
