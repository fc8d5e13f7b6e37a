import ICloudFSCommands

@main
enum ICloudFSMain {
    static func main() async {
        await ICloudFS.run(Array(CommandLine.arguments.dropFirst()))
    }
}
