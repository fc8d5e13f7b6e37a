import ContainerFormat
import Dispatch
import Foundation
@testable import Replica
import Testing
import TestSupport

struct BackgroundCloseTests {
    @Test("a remote edit that lands while a close waits to be queued still makes a conflict copy")
    func remoteEditWhileCloseWaits() async throws {
        let devices = Devices()
        defer { devices.remove() }
        let a = try await devices.open("a")
        let b = try await devices.open("b")
        try await a.writeFile("doc.txt", Data("base".utf8))
        try await a.push()
        try await b.pull()

        let file = try await a.open(try a.id("doc.txt"), write: true, truncate: true)
        try a.write(file, offset: 0, data: Data("mine".utf8))
        // Hold the background thread, so the close below waits while b's edit arrives.
        let gate = DispatchSemaphore(value: 0)
        a.commits.add { gate.wait() }
        a.closeSoon(file)
        try await b.writeFile("doc.txt", Data("theirs".utf8))
        try await b.push()
        try await a.pull()
        gate.signal()
        await a.commits.drain()
        try await a.push()
        try await b.pull()

        // Both versions stay: the queued one was based on the version a opened, not on
        // b's, which arrived before it was queued.
        for device in [a, b] {
            let names = try device.names()
            #expect(names.count == 2, "\(names)")
            let contents = try await Set(names.asyncMap { try await device.readFile($0) })
            #expect(contents == [Data("mine".utf8), Data("theirs".utf8)])
        }
    }
}

extension Sequence {
    fileprivate func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
