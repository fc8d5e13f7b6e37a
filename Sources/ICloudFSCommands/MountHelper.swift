import Foundation

/// `mount.icloudfs SOURCE DIR [-sfnv] [-o OPTIONS]`: what mount(8) and fstab run;
/// `mount.icloudfs -V` prints the version.
public enum MountHelper {
    public static func run() async -> Never {
        // The background mount runs this binary again with `icloudfs mount` arguments.
        if CommandLine.arguments.dropFirst().first == "mount" {
            return await ICloudFS.run(Array(CommandLine.arguments.dropFirst()))
        }
        var positional: [String] = []
        var options: [String] = []
        var arguments = CommandLine.arguments.dropFirst()[...]
        while let argument = arguments.popFirst() {
            switch argument {
            case "-o":
                guard let value = arguments.popFirst() else { return await ICloudFS.run(["mount", "--help"]) }
                options.append(value)
            case "-s", "-f", "-n", "-v":
                continue  // sloppy, fake, no mtab, verbose: nothing to do for a FUSE mount
            case "-h", "--help":
                return await ICloudFS.run(["mount", "--help"])
            case "-V", "--version":
                print(ICloudFSVersion.line)
                exit(0)
            default:
                if argument.hasPrefix("-o") {
                    options.append(String(argument.dropFirst(2)))
                } else {
                    positional.append(argument)
                }
            }
        }
        return await ICloudFS.run(["mount"] + positional + options.flatMap { ["-o", $0] })
    }
}
