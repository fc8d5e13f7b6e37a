import ArgumentParser
import Foundation
import Testing

@testable import ICloudFSCommands

/// The man pages (docs/man, turned into roff by Scripts/package) list everything the code
/// parses: every `-o` option and every command with each of its options.
struct ManPageTests {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/man").standardized

    static func page(_ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }

    @Test("mount.icloudfs(8) lists every -o option the parser knows")
    func mountOptions() throws {
        let page = try Self.page("mount.icloudfs.8.md")
        let names = Set(MountOptions.handlers.keys).union(MountOptions.kernelFlagNames).union(MountOptions.ignored)
        for name in names.sorted() {
            let written = name.replacingOccurrences(of: "_", with: "\\_")
            #expect(page.contains("**\(name)") || page.contains("**\(written)"), "mount.icloudfs.8.md lacks \(name)")
        }
        // And the parser knows what the page names: each handler takes its option.
        var options = MountOptions()
        #expect(throws: MountOptionError.self) { try options.parse("no_such_option") }
    }

    @Test("icloudfs(1) lists every command and each of its options")
    func commands() throws {
        let page = try Self.page("icloudfs.1.md")
        for command in ICloudFS.configuration.subcommands {
            let name = command.configuration.commandName ?? ""
            #expect(page.contains("**\(name)**"), "icloudfs.1.md lacks the command \(name)")
            let help = command.helpMessage(columns: 200)
            let options = Set(help.matches(of: /--([a-z][a-z-]*)/).map { String($0.output.1) })
                .subtracting(["help", "version"])
            for option in options.sorted() {
                #expect(page.contains("**\\-\\-\(option)**"), "icloudfs.1.md lacks \(name) --\(option)")
            }
        }
    }
}
