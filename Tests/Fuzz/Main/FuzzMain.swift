import CLinux
import FuzzTargets
import Foundation

#if FUZZING
/// The fuzz build (`Scripts/fuzz`: `-sanitize=fuzzer`): libFuzzer's driver runs the target
/// named by `ICLOUDFS_FUZZ_TARGET`. SwiftPM links an executable's `main` to this module's
/// entry point, so the entry point starts the driver itself.
@main
struct FuzzDriver {
    static func main() {
        _ = selectedTarget
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { bytes, size in
            selectedTarget.run(Data(bytes: bytes!, count: size))
            return 0
        })
    }
}

private let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["ICLOUDFS_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("icloudfs-fuzz: set ICLOUDFS_FUZZ_TARGET to one of \(names)\n".utf8))
        exit(2)
    }
    return target
}()
#else
/// Without libFuzzer: `icloudfs-fuzz [CORPUS]` replays a corpus folder (one subfolder per
/// target), as the tests do; `icloudfs-fuzz --seed CORPUS` writes the seed inputs.
@main
struct FuzzReplay {
    static func main() throws {
        var arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == "--seed" {
            arguments.removeFirst()
            try FuzzTarget.writeSeeds(corpus: arguments.first ?? "Tests/Fuzz/Corpus")
            return
        }
        let corpus = arguments.first ?? "Tests/Fuzz/Corpus"
        print("replayed \(FuzzTarget.replay(corpus: corpus)) inputs from \(corpus)")
    }
}
#endif
