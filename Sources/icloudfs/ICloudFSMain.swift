import ICloudFSCommands

@main
enum ICloudFSMain {
    static func main() async {
        // The package installs mount.icloudfs (and mount.fuse.icloudfs, which mount(8) runs
        // to remount) as links to this binary (one copy of the statically linked runtime).
        let name = CommandLine.arguments.first?.split(separator: "/").last
        if name == "mount.icloudfs" || name == "mount.fuse.icloudfs" {
            await MountHelper.run()
        }
        await ICloudFS.run(Array(CommandLine.arguments.dropFirst()))
    }
}
