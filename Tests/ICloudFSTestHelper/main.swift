import BlobStore
import Foundation
import SystemPackage

// A child process for tests that need several processes or a kill at a chosen moment.
// Usage: icloudfs-testhelper COMMAND ARGS...

func waitForFile(_ path: String) {
    while !FileManager.default.fileExists(atPath: path) { usleep(1000) }
}

let arguments = CommandLine.arguments.dropFirst()
switch arguments.first {
case "race-put-if-absent":
    // ROOT KEY VALUE START_FILE: waits for START_FILE, then tries to create KEY.
    let args = Array(arguments.dropFirst())
    let store = try DirectoryStore(root: FilePath(args[0]), create: false)
    waitForFile(args[3])
    do {
        try await store.putIfAbsent(try BlobKey(args[1]), data: Data(args[2].utf8))
        print("won")
    } catch StoreError.alreadyExists {
        print("lost")
    }
default:
    FileHandle.standardError.write(Data("icloudfs-testhelper: unknown command\n".utf8))
    exit(2)
}
