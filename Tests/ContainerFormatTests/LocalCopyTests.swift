import BlobStore
import ContainerFormat
import Foundation
import SystemPackage
import TestSupport
import Testing

/// A directory store's chunks reach a content file by `copy_file_range` and are checked
/// there (`ContainerStore.openChunk`, `copy`): what is copied is the chunk or an error.
struct LocalCopyTests {
    let folder = TemporaryDirectory("local-copy")

    func setUp(_ bytes: Data) async throws -> (ContainerStore, ChunkRef, FileDescriptor) {
        let container = try ContainerStore(store: try DirectoryStore(root: FilePath(folder.sub("store"))), container: "c")
        let hash = ChunkHash(of: bytes)
        try await container.writeChunks([(hash, bytes)])
        let target = try FileDescriptor.open(
            FilePath(folder.sub("content")), .readWrite, options: [.create], permissions: [.ownerReadWrite])
        return (container, ChunkRef(hash: hash, size: UInt32(bytes.count)), target)
    }

    @Test("a chunk is copied into the file at its offset, and checked")
    func copiesAtOffset() async throws {
        defer { folder.remove() }
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let (container, ref, target) = try await setUp(bytes)
        defer { try? target.close() }
        let chunk = try #require(try container.openChunk(ref))
        try container.copy(chunk, of: ref, into: target, at: 5000)
        let written = try FileIO.read(target, offset: 5000, count: bytes.count)
        #expect(written == bytes)
    }

    @Test("a chunk changed in the store, or of another size, is corruptChunk")
    func corruptIsAnError() async throws {
        defer { folder.remove() }
        let bytes = Data(repeating: 7, count: 200_000)
        let (container, ref, target) = try await setUp(bytes)
        defer { try? target.close() }
        let path = folder.sub("store/c/chunks/\(ref.hash.hex.prefix(2))/\(ref.hash.hex)")
        try Data(repeating: 8, count: bytes.count).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) {
            try container.copy(try #require(try container.openChunk(ref)), of: ref, into: target, at: 0)
        }
        try Data(repeating: 7, count: bytes.count - 1).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) {
            try container.copy(try #require(try container.openChunk(ref)), of: ref, into: target, at: 0)
        }
        try Data(repeating: 7, count: bytes.count + 1).write(to: URL(fileURLWithPath: path))
        #expect(throws: FormatError.corruptChunk(hash: ref.hash.hex)) { _ = try container.openChunk(ref) }
    }
}
