import BlobStore
import ContainerFormat
import Foundation
import SystemPackage
import TestSupport
import Testing

/// A directory store's chunks are read from their files and checked (`ContainerStore.openChunk`,
/// `read(_:of:)`): what is read is the chunk or an error.
struct LocalCopyTests {
    let folder = TemporaryDirectory("local-copy")

    func setUp(_ bytes: Data) async throws -> (ContainerStore, ChunkRef) {
        let container = try ContainerStore(store: try DirectoryStore(root: FilePath(folder.sub("store"))), container: "c")
        let hash = ChunkHash(of: bytes)
        try await container.writeChunks([(hash, bytes)])
        return (container, ChunkRef(hash: hash, size: UInt32(bytes.count)))
    }

    @Test("a chunk read from its file is the chunk")
    func readsTheChunk() async throws {
        defer { folder.remove() }
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let (container, ref) = try await setUp(bytes)
        let chunk = try #require(try container.openChunk(ref))
        #expect(try container.read(chunk, of: ref) == bytes)
    }

    @Test("a chunk changed in the store, or of another size, is corruptChunk")
    func corruptIsAnError() async throws {
        defer { folder.remove() }
        let bytes = Data(repeating: 7, count: 200_000)
        let (container, ref) = try await setUp(bytes)
        let path = folder.sub("store/c/chunks/\(ref.hash.hex.prefix(2))/\(ref.hash.hex)")
        try Data(repeating: 8, count: bytes.count).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) {
            _ = try container.read(try #require(try container.openChunk(ref)), of: ref)
        }
        try Data(repeating: 7, count: bytes.count - 1).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) {
            _ = try container.read(try #require(try container.openChunk(ref)), of: ref)
        }
        try Data(repeating: 7, count: bytes.count + 1).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) { _ = try container.openChunk(ref) }
    }
}
