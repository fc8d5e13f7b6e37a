import BlobStore
import Foundation

/// An access key pair (and session token), found the way the AWS tools find it.
///
/// Order: `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`) from the
/// environment; else the profile `AWS_PROFILE` (or `default`) in the shared credentials file
/// (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`), then in the config file
/// (`AWS_CONFIG_FILE`, else `~/.aws/config`, whose sections are `[profile NAME]`).
/// The secret never appears in `description`, in logs or in error messages.
public struct S3Credentials: Sendable, Equatable, CustomStringConvertible {
    public var accessKeyID: String
    public var secretAccessKey: String
    public var sessionToken: String?
    /// Where they came from, for messages: `environment` or `profile NAME in FILE`.
    public var source: String

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil, source: String = "given") {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
        self.source = source
    }

    public var description: String { "access key \(accessKeyID) (from \(source))" }

    /// Finds credentials in `environment` and the shared files; throws `permissionDenied`
    /// with what to set when there are none.
    public static func resolve(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        home: String = NSHomeDirectory()
    ) throws -> S3Credentials {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let key = value("AWS_ACCESS_KEY_ID"), let secret = value("AWS_SECRET_ACCESS_KEY") {
            return S3Credentials(
                accessKeyID: key, secretAccessKey: secret, sessionToken: value("AWS_SESSION_TOKEN"), source: "environment")
        }
        let profile = value("AWS_PROFILE") ?? "default"
        for (file, section) in profileFiles(environment: environment, home: home, profile: profile) {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8),
                let settings = AWSConfigFile.parse(text)[section],
                let key = settings["aws_access_key_id"], let secret = settings["aws_secret_access_key"]
            else { continue }
            return S3Credentials(
                accessKeyID: key, secretAccessKey: secret, sessionToken: settings["aws_session_token"],
                source: "profile \(profile) in \(file)")
        }
        throw StoreError.permissionDenied(
            "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with a profile in ~/.aws/credentials"
                + (value("AWS_PROFILE") != nil ? " (profile \(profile) was not found)" : ""))
    }

    /// The region of the profile in the config file (`region = ...`), if any.
    public static func profileRegion(
        environment: [String: String] = ProcessInfo.processInfo.environment, home: String = NSHomeDirectory()
    ) -> String? {
        let profile = environment["AWS_PROFILE"].flatMap { $0.isEmpty ? nil : $0 } ?? "default"
        for (file, section) in profileFiles(environment: environment, home: home, profile: profile).reversed() {
            if let text = try? String(contentsOfFile: file, encoding: .utf8),
                let region = AWSConfigFile.parse(text)[section]?["region"]
            {
                return region
            }
        }
        return nil
    }

    /// The credentials file (section `NAME`) first, then the config file (`profile NAME`,
    /// or `default`).
    static func profileFiles(environment: [String: String], home: String, profile: String) -> [(String, String)] {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let credentials = value("AWS_SHARED_CREDENTIALS_FILE") ?? "\(home)/.aws/credentials"
        let config = value("AWS_CONFIG_FILE") ?? "\(home)/.aws/config"
        return [(credentials, profile), (config, profile == "default" ? "default" : "profile \(profile)")]
    }
}

/// The INI dialect of `~/.aws/credentials` and `~/.aws/config`: `[section]` headers,
/// `key = value` lines, `#` and `;` comments. Nested (indented) values are skipped.
enum AWSConfigFile {
    static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        for rawLine in text.split(whereSeparator: \.isNewline) {
            if rawLine.first == " " || rawLine.first == "\t" { continue }
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                let name = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
                current = name
                sections[name, default: [:]] = sections[name] ?? [:]
                continue
            }
            guard let section = current, let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            sections[section, default: [:]][key] = value
        }
        return sections
    }
}
