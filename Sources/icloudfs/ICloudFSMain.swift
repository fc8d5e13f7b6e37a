import ICloudFSCommands

@main
enum ICloudFSMain {
    static func main() async {
        // The package installs mount.icloudfs as a link to this binary (one copy of the
        // statically linked runtime, not two).
        if CommandLine.arguments.first?.split(separator: "/").last == "mount.icloudfs" {
            await MountHelper.run()
        }
        await ICloudFS.run(Array(CommandLine.arguments.dropFirst()))
    }
}
