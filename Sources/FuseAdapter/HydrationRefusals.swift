import Foundation
import Synchronization

/// Readers that must not download (`-o nohydrate`): thumbnailers, indexers and virus
/// scanners read every file they meet, and on a mount of placeholders a file manager opening
/// a folder of photos would download all of them. Such a program's open of a file whose
/// content is not all here fails at once with EPERM (as openVFS answers them), with nothing
/// downloaded; files already here open as for anyone. docs/SEMANTICS.md "Readers that must
/// not download".
final class HydrationRefusals: Sendable {
    /// Program names (the executable's file name; the kernel's 15-byte `comm` matches its
    /// first 15 bytes).
    let programs: Set<String>
    private let refused = Atomic<Int>(0)

    init(programs: Set<String>) {
        self.programs = programs
    }

    /// Opens refused so far (`status` shows them).
    var count: Int { refused.load(ordering: .relaxed) }

    /// Whether the process `pid` is one of `programs`; counts a refusal when it is.
    func refuses(_ pid: pid_t) -> Bool {
        guard !programs.isEmpty, pid > 0, let name = Self.programName(of: pid) else { return false }
        let listed = programs.contains(name.executable) || programs.contains { $0.utf8.prefix(15).elementsEqual(name.command.utf8) }
        if listed { refused.add(1, ordering: .relaxed) }
        return listed
    }

    /// The executable's file name (from `/proc/PID/exe`, when readable) and the kernel's
    /// name of the thread (`comm`, at most 15 bytes).
    private static func programName(of pid: pid_t) -> (executable: String, command: String)? {
        let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .newlines)
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        let executable = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        guard command != nil || executable != nil else { return nil }
        // A replaced executable reads "/path (deleted)".
        let file = executable.map { path in
            String(path.split(separator: "/").last ?? "").replacingOccurrences(of: " (deleted)", with: "")
        }
        return (file ?? "", command ?? "")
    }

    /// Thumbnailers, indexers and scanners of GNOME, KDE, Xfce and Debian's usual ones.
    static let defaultPrograms: Set<String> = [
        // Thumbnailers and their services
        "tumblerd", "gdk-pixbuf-thumbnailer", "totem-video-thumbnailer", "evince-thumbnailer", "atril-thumbnailer",
        "xreader-thumbnailer", "ffmpegthumbnailer", "gsf-office-thumbnailer", "gnome-epub-thumbnailer",
        "gnome-mobi-thumbnailer", "gnome-font-viewer-thumbnailer", "gnome-thumbnail-font", "librsvg-thumbnailer",
        "heif-thumbnailer", "webp-thumbnailer", "folks-thumbnailer",
        // Indexers
        "tracker-miner-fs-3", "tracker-extract-3", "tracker-miner-fs", "tracker-extract", "localsearch-3",
        "localsearch-extractor-3", "baloo_file", "baloo_file_extractor", "recollindex",
        // Virus scanners
        "clamscan", "clamd", "clamdscan",
    ]
}
