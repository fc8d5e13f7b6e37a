import ICloudFSCommands

@main
enum MountMain {
    static func main() async {
        await MountHelper.run()
    }
}
