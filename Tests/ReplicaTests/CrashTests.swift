import ContainerFormat
import Foundation
import Replica
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

struct CrashTests {
    /// The content the helper writes for file number `n` (same formula as the helper).
    func content(_ n: Int) -> Data {
        Data((0..<(n * 37_003 % 300_000 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) })
    }

    @Test("killed at random points of the upload pipeline, a device resumes: every acknowledged file arrives once, intact")
    func killDuringUpload() async throws {
        var random = SystemRandomNumberGenerator()
        for round in 0..<6 {
            let devices = Devices()
            defer { devices.remove() }
            let store = devices.folder.sub("store")
            let cache = devices.folder.sub("cache-crashy")
            _ = devices.store  // creates the store folder
            let (child, pipe) = try HelperProcess.start(["write-files", store, cache, devices.container, "25"])
            let delay = Int.random(in: 30...900, using: &random)
            try await Task.sleep(for: .milliseconds(delay))
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let acked = output.split(separator: "\n").filter { $0.hasPrefix("acked ") }.map { String($0.dropFirst(6)) }

            let drain = try HelperProcess.run(["drain", store, cache, devices.container])
            #expect(drain.status == 0, "round \(round): drain failed: \(drain.output)")

            let checker = try await devices.open("checker")
            let names = try checker.names()
            #expect(!names.contains { $0.contains("conflicted copy") || $0.hasSuffix(" 2") },
                    "round \(round) (kill after \(delay) ms): duplicates \(names)")
            for name in acked {
                let n = Int(name.dropFirst(5))!
                #expect(try await checker.readFile(name) == content(n), "round \(round): \(name) differs")
            }
            #expect(Set(acked).isSubset(of: Set(names)), "round \(round): lost \(Set(acked).subtracting(names))")
            print("round \(round): killed after \(delay) ms, \(acked.count) acknowledged, \(names.count) in the store")
        }
    }
}
