import Foundation
import Testing
import ContainerFormat

@testable import ICloudFSCommands

@Suite struct ControlChannelTests {
    @Test("every request survives its line, paths with spaces and tabs-free names included")
    func requests() {
        let requests: [ControlChannel.Request] = [
            .deleted(under: nil), .deleted(under: "Docs/old notes"), .collect(dryRun: false), .collect(dryRun: true), .changes,
            .keyValueGet("a key\twith a tab\nand a newline"), .keyValueList, .keyValueWatch,
            .keyValueSet(["level": .integer(3), "tabs\t": .string("line\nbreak"), "list": .array([.bool(true), .real(0.5)])]),
            .keyValueRemove(["one", "two"]), .summary, .uploaded(milliseconds: 600_000), .uploaded(milliseconds: 0),
        ]
        for request in requests {
            #expect(ControlChannel.Request(line: request.line) == request, "\(request.line)")
        }
    }

    @Test("unknown requests and malformed arguments are refused")
    func unknownRequests() {
        for line in ["", "delete", "collect\twet", "changes\tnow", "gc", "kv-get", "kv-get\tnot json", "kv-set\t[1]", "kv-rm\t{}", "kv-list\tx", "uploaded", "uploaded\t-1", "uploaded\tsoon"] {
            #expect(ControlChannel.Request(line: line) == nil, "\(line)")
        }
    }

    @Test("every answer survives its line; a newline in a message cannot split it")
    func answers() {
        let answers: [ControlChannel.Answer] = [
            .result(Data(#"{"a":1}"#.utf8)), .step("sweeping 3 of 9"), .failed("store unreachable"),
            .change(Data(#"{"kind":"created"}"#.utf8)),
        ]
        for answer in answers {
            #expect(ControlChannel.Answer(line: answer.line) == answer, "\(answer.line)")
        }
        let split = ControlChannel.Answer.failed("two\nlines").line
        #expect(!split.contains("\n"))
        #expect(ControlChannel.Answer(line: split) == .failed("two lines"))
        #expect(ControlChannel.Answer(line: "nonsense") == nil)
    }

    @Test("a connection carries lines both ways and ends when the other side hangs up")
    func connection() throws {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        let left = ControlConnection(descriptor: pair[0])
        let right = ControlConnection(descriptor: pair[1])
        #expect(left.send("first"))
        #expect(left.send(String(repeating: "x", count: 100_000)))
        #expect(right.receive() == "first")
        #expect(right.receive()?.count == 100_000)
        left.hangUp()
        #expect(right.receive() == nil)
    }
}
