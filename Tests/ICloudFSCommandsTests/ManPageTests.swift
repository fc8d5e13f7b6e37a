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
    }

    /// A value for each `NAME=`*PLACEHOLDER* of the page, unlike the default.
    static let samples = [
        "URL": "/srv/icloud", "DIR": "/var/cache/icloudfs/notes", "NAME": "laptop", "DURATION": "5s",
        "SIZE": "500M", "RATE": "1M", "N": "1000", "OCTAL": "027", "\\*": "systemd.automount",
    ]

    /// The options the page's OPTIONS section lists: each term line's bold names, with a sample
    /// value where the name is followed by a placeholder (`**store=***URL*`, `**x-***\**`).
    static func listedOptions(_ page: String) throws -> [(name: String, option: String)] {
        let start = try #require(page.range(of: "\n# OPTIONS\n"))
        let end = page.range(of: "\n# ", range: start.upperBound..<page.endIndex)?.lowerBound ?? page.endIndex
        var listed: [(String, String)] = []
        for line in page[start.upperBound..<end].split(separator: "\n") where line.hasPrefix("**") {
            for match in line.matches(of: /\*\*([^*]+)\*\*(?:\*((?:\\\*|[^*])+)\*)?/) {
                let name = match.output.1.replacingOccurrences(of: "\\", with: "")
                guard let placeholder = match.output.2 else {
                    listed.append((name, name))
                    continue
                }
                let sample = try #require(samples[String(placeholder)], "no sample value for \(placeholder) (of \(name))")
                listed.append((name, name + sample))
            }
        }
        return listed
    }

    @Test("each -o option mount.icloudfs(8) lists is accepted by the parser, and changes what is parsed unless it is ignored")
    func mountOptionsParse() throws {
        let listed = try Self.listedOptions(try Self.page("mount.icloudfs.8.md"))
        // The page lists 40-odd options: a page the pattern no longer reads fails here.
        #expect(listed.count >= 40, "\(listed.map(\.option))")
        let names = Set(listed.map(\.name))
        for name in ["store=", "cache_size=", "umask=", "noatime", "nodiratime", "remount", "nosuid", "_netdev", "x-", "comment="] {
            #expect(names.contains(name), "\(name) not read from the page")
        }
        // Options whose effect is the default show it after their opposite.
        let opposite = [
            "rw": "ro", "relatime": "strictatime", "atime": "strictatime", "diratime": "nodiratime", "noacl": "acl",
            "notify": "nonotify",
        ]
        for (name, option) in listed {
            do {
                var options = MountOptions()
                do {
                    try options.parse(option)
                } catch {
                    Issue.record("mount.icloudfs.8.md lists \(option), which the parser refuses: \(error)")
                    continue
                }
                let bare = name.hasSuffix("=") ? String(name.dropLast()) : name
                let ignored = (MountOptions.ignored.contains(bare) && MountOptions.handlers[bare] == nil)
                    || name == "x-" || name == "comment="
                if ignored {
                    #expect(options == MountOptions(), "\(option) is documented as ignored but changed \(options)")
                } else if let before = opposite[bare] {
                    var after = MountOptions()
                    try after.parse(before + "," + option)
                    var base = MountOptions()
                    try base.parse(before)
                    #expect(after != base, "\(option) after \(before) changed nothing")
                } else {
                    #expect(options != MountOptions(), "\(option) changed nothing")
                }
            }
        }
        // And the parser does not take everything: an option the page does not list is refused.
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
