import ArgumentParser
import ContainerFormat
import Foundation

/// `icloudfs kv get|set|rm|list|watch MOUNT ...`: the container's key-value store, through
/// the mount's daemon (docs/SEMANTICS.md "The key-value store").
struct KeyValueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kv",
        abstract: "Read and write the container's key-value store (small settings synced between devices).",
        discussion: """
            Values are JSON: strings, numbers, true/false, arrays and objects (not null). At most \
            1,024 keys of at most 64 bytes, 1 MiB for keys and values together; a write beyond \
            that is refused. Writes work offline and reach the store when it answers; the latest \
            write of a key wins on every device.
            """,
        subcommands: [Get.self, SetValues.self, Remove.self, List.self, Watch.self])

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a key's value as JSON (exit 1 if the key is absent).")

        @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String
        @Argument(help: "The key.") var key: String

        func run() async throws {
            let json = try KeyValueCommand.result(of: .keyValueGet(key), at: mountPoint)
            guard json != Data("null".utf8) else {
                throw ExitMessage("no key \(key.debugDescription) in the key-value store of \(mountPoint)")
            }
            FileHandle.standardOutput.write(json + Data("\n".utf8))
        }
    }

    /// Not `Set`: that would hide Swift's `Set` in this scope.
    struct SetValues: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Set keys to JSON values, all in one write: KEY JSON [KEY JSON ...].")

        @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String
        /// Taken as they come, dashes too: a negative number (`temp -3`) is a value, not an option.
        @Argument(
            parsing: .captureForPassthrough, help: "Pairs of a key and its value as JSON, e.g. level 3 name '\"Ada\"' temp -3.")
        var pairs: [String] = []

        func validate() throws {
            guard !pairs.isEmpty, pairs.count % 2 == 0 else {
                throw ValidationError("give keys and JSON values in pairs: KEY JSON [KEY JSON ...]")
            }
        }

        func run() async throws {
            var values: [String: KeyValue] = [:]
            for index in stride(from: 0, to: pairs.count, by: 2) {
                let (key, text) = (pairs[index], pairs[index + 1])
                guard let value = KeyValue(json: text) else {
                    throw ExitMessage("the value of \(key.debugDescription) is not JSON (or is null): \(text); quote strings, e.g. '\"text\"'")
                }
                values[key] = value
            }
            _ = try KeyValueCommand.result(of: .keyValueSet(values), at: mountPoint)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove keys, all in one write.")

        @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String
        @Argument(help: "The keys.") var keys: [String]

        func run() async throws {
            _ = try KeyValueCommand.result(of: .keyValueRemove(keys), at: mountPoint)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every key and its value (KEY, a tab, JSON).")

        @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String
        @Flag(help: "One JSON object of all keys and values.") var json = false

        func run() async throws {
            let data = try KeyValueCommand.result(of: .keyValueList, at: mountPoint)
            if json { return FileHandle.standardOutput.write(data + Data("\n".utf8)) }
            let values = try FormatCoding.decode([String: KeyValue].self, from: data)
            let lines = values.keys.sorted().map { "\($0)\t\(values[$0]!.json)\n" }.joined()
            FileHandle.standardOutput.write(Data(lines.utf8))
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print each change other devices make as a JSON line with its reason and keys (Ctrl-C ends).")

        @Argument(help: "The mount point, a container's folder in a mount of all, or the name of a mounted container.") var mountPoint: String

        func run() async throws {
            let client = try ControlClient(mountRoot: mountPoint)
            try client.send(.keyValueWatch)
            while let answer = client.next() {
                guard case .change(let json) = answer else { continue }
                FileHandle.standardOutput.write(json + Data("\n".utf8))
            }
        }
    }

    /// Asks the daemon of the mount at `mountPoint`; its `result`, or its refusal as the error.
    static func result(of request: ControlChannel.Request, at mountPoint: String) throws -> Data {
        let client = try ControlClient(mountRoot: mountPoint)
        try client.send(request)
        switch client.next() {
        case .result(let json): return json
        case .failed(let message): throw ExitMessage(message)
        default: throw ExitMessage("the mount at \(mountPoint) did not answer (is icloudfs the same version?)")
        }
    }
}
