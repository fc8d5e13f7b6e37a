import ArgumentParser
import FuseAdapter

/// `icloudfs`: mount a cloud container and see and steer its sync.
public struct ICloudFS: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "icloudfs",
        abstract: "Mount a cloud ubiquity container as a folder, and inspect and control its sync.",
        version: "icloudfs \(ICloudFSVersion.current) (libfuse \(FuseLibrary.version))"
    )

    public init() {}
}

public enum ICloudFSVersion {
    public static let current = "0.1.0"
}
