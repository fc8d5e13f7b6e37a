import BlobStore

/// Turns an S3 failure answer into the one-line ``StoreError`` a user sees (in `mount`'s
/// output and in `user.icloud.uploadingError`). Each message names what to fix.
enum S3ErrorMapping {
    static func storeError(
        _ response: S3Response, operation: String, key: String?, location: S3Location, credentials: S3Credentials,
        attempts: Int
    ) -> StoreError {
        let body = response.errorBody
        let code = body?.code ?? ""
        let status = response.status
        let what = key.map { "\(operation) \($0)" } ?? operation
        switch (status, code) {
        case (404, "NoSuchBucket"):
            return noSuchBucket(location)
        case (404, _):
            return .notFound(key ?? location.bucket)
        case (403, "RequestTimeTooSkewed"), (400, "RequestTimeTooSkewed"):
            // Transient on purpose: once the clock is set, the next retry works.
            return .failed(
                "the S3 server at \(location.origin) refused the request because this machine's clock is off by more than 15 minutes (RequestTimeTooSkewed): set the system clock (e.g. timedatectl set-ntp true)")
        case (403, "InvalidAccessKeyId"), (403, "SignatureDoesNotMatch"), (403, "InvalidToken"), (403, "ExpiredToken"),
            (400, "ExpiredToken"), (400, "InvalidToken"), (403, "TokenRefreshRequired"):
            return .permissionDenied(
                "the S3 server at \(location.origin) refused the credentials (\(code); credentials from \(credentials.source)): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or the profile in ~/.aws/credentials")
        case (403, "QuotaExceeded"), (507, _):
            return .quotaExceeded("S3 bucket '\(location.bucket)' is over its quota (\(code.isEmpty ? "\(status)" : code))")
        case (403, _):
            return .permissionDenied(
                "the S3 server at \(location.origin) denied \(what) in bucket '\(location.bucket)' (\(code.isEmpty ? "403 Forbidden" : code)): check the credentials (\(credentials.source)) and the bucket's permissions")
        case (301, _), (400, "AuthorizationHeaderMalformed"), (400, "IllegalLocationConstraintException"):
            let actual = response.headers.first(name: "x-amz-bucket-region")
            return .failed(
                "S3 bucket '\(location.bucket)' is not in region \(location.region)"
                    + (actual.map { ": add region=\($0) to the store URL" } ?? ": set region= in the store URL"))
        case (500..<600, _), (429, _):
            return .unavailable(
                "the S3 server at \(location.origin) answered \(status)\(code.isEmpty ? "" : " \(code)") to \(what) after \(attempts) attempts")
        default:
            let message = body?.message.map { ": \($0)" } ?? ""
            return .failed("S3 \(what) failed with \(status)\(code.isEmpty ? "" : " \(code)")\(message)")
        }
    }

    static func noSuchBucket(_ location: S3Location) -> StoreError {
        .unavailable(
            "S3 bucket '\(location.bucket)' does not exist at \(location.origin): create it, or fix the bucket name in store=")
    }
}
