import SyncAttributes
import Testing

struct OpenVFSDataTests {
    @Test("user.openvfs.data is the MessagePack map openVFS writes: five keys in byte order, shortest forms")
    func encoding() {
        let data = OpenVFSData(etag: "e1", fileID: "ID", size: 300, state: .dehydrated, pinState: .alwaysLocal)
        let expected: [UInt8] =
            [0x85, 0xa4] + Array("etag".utf8) + [0xa2] + Array("e1".utf8) + [0xa6] + Array("fileid".utf8) + [0xa2]
            + Array("ID".utf8) + [0xa8] + Array("pinstate".utf8) + [0x02] + [0xa4] + Array("size".utf8)
            + [0xcd, 0x01, 0x2c] + [0xa5] + Array("state".utf8) + [0x01]
        #expect(data.encoded == expected)
    }

    @Test("sizes and strings past the short forms")
    func largerValues() {
        let long = String(repeating: "x", count: 40)
        let bytes = OpenVFSData(etag: long, fileID: "", size: 5 << 32, state: .hydrated, pinState: .unspecified).encoded
        #expect(Array(bytes[1...7]) == [0xa4] + Array("etag".utf8) + [0xd9, 40])
        #expect(bytes.contains(0xcf))
        let sizeAt = bytes.firstIndex(of: 0xcf)!
        #expect(Array(bytes[sizeAt..<sizeAt + 9]) == [0xcf, 0, 0, 0, 5, 0, 0, 0, 0])
    }
}
