// swift-tools-version:6.1
import PackageDescription

// Layers, each depending only on those below it (see docs/ARCHITECTURE.md):
//   icloudfs (CLI) -> ICloudFSCommands -> FuseAdapter -> Replica -> ContainerFormat -> BlobStore
//                                         FuseAdapter -> FuseKernel (the kernel protocol)
// BlobStoreS3 implements BlobStore over S3; only ICloudFSCommands (store=s3://) opens it.
let package = Package(
    name: "icloudfs",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "icloudfs", targets: ["icloudfs"]),
        // What mount(8) runs for `mount -t icloudfs` and fstab.
        .executable(name: "mount.icloudfs", targets: ["MountICloudFS"]),
        // Scripts/bench's micro-benchmarks and its 100,000-item container (release mode).
        .executable(name: "icloudfs-bench", targets: ["icloudfs-bench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
    ],
    targets: [
        // The FUSE kernel protocol's structures (the kernel's uapi header, linux-libc-dev) and
        // the few later additions this filesystem uses; no library.
        .systemLibrary(name: "CFuseKernel"),
        // Linux calls Swift's Glibc module does not show (syncfs, malloc_trim, mallopt).
        .systemLibrary(name: "CLinux"),
        // The `user.icloud.*` attributes: their names and value codecs, for the mount and the
        // commands alike (no dependencies).
        .target(name: "SyncAttributes"),
        // The remote: a small S3-shaped blob protocol and the directory store.
        .target(
            name: "BlobStore",
            dependencies: [
                "CLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The S3 store: SigV4 signing, retries, ListObjectsV2 over async-http-client.
        .target(
            name: "BlobStoreS3",
            dependencies: [
                "BlobStore",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The on-store format: identity, chunks, journal, snapshots, and the pure fold.
        // Snapshots are protobuf: Protos/ holds their schema, generated into Snapshot.pb.swift
        // by Scripts/generate-protos.
        .target(
            name: "ContainerFormat",
            dependencies: [
                "BlobStore",
                "CLinux",
                "SyncAttributes",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            exclude: ["Protos"],
            // Access to a class's stored properties is checked for exclusivity at run time:
            // in the generated protobuf code (a class per message), those checks were a third
            // of decoding a snapshot (1.7 -> 1.0 s for a million items). The compiler still
            // checks all it can see; this code keeps no shared mutable class state.
            swiftSettings: [.unsafeFlags(["-enforce-exclusivity=unchecked"])]
        ),
        // Collection: expires history past the retention policy, deletes chunks nothing
        // names, compacts the journal behind a snapshot (docs/FORMAT.md "Collection").
        .target(
            name: "Collection",
            dependencies: [
                "ContainerFormat",
                "BlobStore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // One device's local state: database, content cache, upload queue, change feed.
        .target(
            name: "Replica",
            dependencies: [
                "ContainerFormat",
                "SyncAttributes",
                "Collection",
                "BlobStore",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // The FUSE kernel protocol spoken on /dev/fuse: mounting, the request loop, typed
        // requests and replies, notifications, passthrough backing files. Knows no replica.
        .target(
            name: "FuseKernel",
            dependencies: [
                "CFuseKernel",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        // Translates kernel requests into Replica calls; no sync logic.
        .target(
            name: "FuseAdapter",
            dependencies: [
                "FuseKernel",
                "Replica",
                "SyncAttributes",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The `icloudfs` commands: argument parsing, output, exit codes.
        .target(
            name: "ICloudFSCommands",
            dependencies: [
                "CLinux",
                "FuseAdapter",
                "FuseKernel",
                "Replica",
                "SyncAttributes",
                "Collection",
                "ContainerFormat",
                "BlobStore",
                "BlobStoreS3",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(name: "icloudfs", dependencies: ["ICloudFSCommands"]),
        .executableTarget(name: "MountICloudFS", dependencies: ["ICloudFSCommands"]),
        .executableTarget(
            name: "icloudfs-bench",
            dependencies: [
                "ContainerFormat", "BlobStore", "FuseKernel", .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),

        // Test support shared by every test target.
        .target(
            name: "TestSupport",
            dependencies: ["BlobStore", "BlobStoreS3", "ContainerFormat"],
            path: "Tests/TestSupport"
        ),
        // A child process the tests start many times: races, crashes, kills.
        .executableTarget(
            name: "icloudfs-testhelper",
            dependencies: ["BlobStore", "BlobStoreS3", "ContainerFormat", "Replica"],
            path: "Tests/ICloudFSTestHelper"
        ),
        .testTarget(
            name: "BlobStoreTests", dependencies: ["BlobStore", "BlobStoreS3", "TestSupport", "icloudfs-testhelper"]),
        .testTarget(
            name: "BlobStoreS3Tests",
            dependencies: ["BlobStoreS3", "BlobStore", "Replica", "ContainerFormat", "TestSupport", "icloudfs-testhelper"]),
        .testTarget(name: "ContainerFormatTests", dependencies: ["ContainerFormat", "Collection", "TestSupport"]),
        .testTarget(name: "ICloudFSCommandsTests", dependencies: ["ICloudFSCommands"]),
        // The adapter's pure parts: the errno mapping, the inode and handle tables.
        // The protocol's encodings, checked against the header's layouts, without a mount.
        .testTarget(name: "FuseKernelTests", dependencies: ["FuseKernel", "CFuseKernel"]),
        .testTarget(
            name: "FuseAdapterTests",
            dependencies: [
                "FuseAdapter", "Replica", "ContainerFormat", "BlobStore", "SyncAttributes",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]),
        // Every decoder of untrusted bytes as a fuzz target (Scripts/fuzz), and its corpus replayed.
        .target(name: "FuzzTargets", dependencies: ["ContainerFormat", "Replica", "BlobStoreS3"], path: "Tests/Fuzz/Targets"),
        .executableTarget(name: "icloudfs-fuzz", dependencies: ["FuzzTargets", "CLinux"], path: "Tests/Fuzz/Main"),
        .testTarget(name: "FuzzCorpusTests", dependencies: ["FuzzTargets"]),
        .testTarget(
            name: "ReplicaTests",
            dependencies: ["Replica", "TestSupport", "icloudfs-testhelper", .product(name: "GRDB", package: "GRDB.swift")]),
    ],
    swiftLanguageModes: [.v6]
)
