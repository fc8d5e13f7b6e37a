import BlobStore
import Foundation
import SystemPackage

/// One container's objects in a blob store (docs/FORMAT.md):
/// `identity`, `chunks/<ab>/<sha256>`, `journal/<seq>`, `snapshots/<seq>`.
public struct ContainerStore: Sendable {
    public let store: any BlobStore
    public let container: String

    public init(store: any BlobStore, container: String) throws {
        guard ContainerStore.isValidName(container) else { throw FormatError.invalidContainerName(container) }
        self.store = store
        self.container = container
    }

    /// The highest seq a journal entry or snapshot may have: seqs are stored as SQLite
    /// integers (Int64) on every device, and a forged higher one must not trap them.
    public static let maximumSeq = UInt64(Int64.max)

    /// The largest object of each kind a device reads: far above what icloudfs writes, far
    /// below what would exhaust memory (a 1 TB sparse file in a directory store).
    enum MaximumSize {
        static let identity: UInt64 = 1 << 20
        static let journalEntry: UInt64 = 256 << 20
        static let snapshot: UInt64 = 4 << 30
    }

    public static func isValidName(_ name: String) -> Bool {
        !name.hasPrefix(".") && name.utf8.count <= 255 && !name.contains("/") && BlobKey.isValid(name)
    }

    /// The names of the containers in `store`: its top folders that may be one (a folder
    /// can be a container still being made: `readIdentity` tells).
    public static func containerNames(in store: any BlobStore) async throws -> [String] {
        try await store.listFolders(prefix: "").filter(isValidName)
    }

    // MARK: Keys

    var identityKey: BlobKey { BlobKey(validated: "\(container)/identity") }

    public func chunkKey(_ hash: ChunkHash) -> BlobKey {
        let hex = hash.hex
        return BlobKey(validated: "\(container)/chunks/\(hex.prefix(2))/\(hex)")
    }

    public func journalKey(_ seq: UInt64) -> BlobKey {
        BlobKey(validated: "\(container)/journal/\(ContainerStore.padded(seq))")
    }

    /// Where the key-value store's records are: `kv/SEQ`, appended as journal entries are.
    public var keyValuePrefix: String { "\(container)/kv/" }

    public func keyValueKey(_ seq: UInt64) -> BlobKey {
        BlobKey(validated: keyValuePrefix + ContainerStore.padded(seq))
    }

    /// The seq of a key under `keyValuePrefix`, or nil if it is not a record's key.
    public func keyValueSeq(of key: BlobKey) -> UInt64? {
        let name = key.rawValue.dropFirst(keyValuePrefix.count)
        guard key.rawValue.hasPrefix(keyValuePrefix), name.count == 20, let seq = UInt64(name),
            seq > 0, seq <= ContainerStore.maximumSeq
        else { return nil }
        return seq
    }

    func snapshotKey(_ seq: UInt64) -> BlobKey {
        BlobKey(validated: "\(container)/snapshots/\(ContainerStore.padded(seq))")
    }

    static func padded(_ seq: UInt64) -> String {
        let digits = String(seq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    // MARK: Identity

    /// The container's identity, or nil when the container does not exist yet.
    public func readIdentity() async throws -> Identity? {
        let data: Data
        do {
            data = try await store.get(identityKey, maximumSize: MaximumSize.identity)
        } catch StoreError.notFound {
            return nil
        } catch StoreError.badObject(let why) {
            throw FormatError.malformed(what: "\(container)/identity", why: why)
        }
        let identity: Identity
        do {
            identity = try FormatCoding.decode(Identity.self, from: data)
        } catch {
            throw FormatError.malformed(what: "\(container)/identity", why: "\(error)")
        }
        guard identity.format <= Identity.formatVersion else {
            throw FormatError.unsupportedFormat(what: "\(container)/identity", version: identity.format)
        }
        guard identity.chunking.isValid else {
            throw FormatError.malformed(what: "\(container)/identity", why: "impossible chunk sizes")
        }
        return identity
    }

    /// Creates the container with `proposed` unless it exists; returns the identity in force
    /// (the existing one when another device created it first).
    public func createIdentity(_ proposed: Identity) async throws -> Identity {
        do {
            try await store.putIfAbsent(identityKey, data: FormatCoding.encode(proposed))
            return proposed
        } catch StoreError.alreadyExists {
            guard let existing = try await readIdentity() else {
                throw FormatError.malformed(what: "\(container)/identity", why: "exists but cannot be read")
            }
            return existing
        }
    }

    // MARK: Chunks

    /// The chunk's bytes, checked against its hash and size: from its pack when the journal
    /// said where (`packed`), else (or if that pack is gone) from its own object.
    public func readChunk(_ ref: ChunkRef, packedAt packed: PackedLocation?) async throws -> Data {
        if let packed, packed.size == ref.size {
            do {
                return try await readChunk(packed.chunk(ref.hash), inPack: packed.pack)
            } catch StoreError.notFound {
                // Repacked or collected: the object, if any, still serves.
            }
        }
        return try await readChunk(ref)
    }

    /// The chunk's bytes from its own object, checked against its hash and size.
    public func readChunk(_ ref: ChunkRef) async throws -> Data {
        let data: Data
        do {
            // A chunk larger than its reference says is corrupt: never read more.
            data = try await store.get(chunkKey(ref.hash), maximumSize: UInt64(ref.size))
        } catch StoreError.badObject {
            throw FormatError.corruptChunk(hash: ref.hash.hex)
        }
        // Hashing a chunk takes a while: not on the few threads that run tasks.
        try await BlockingIO.run {
            guard data.count == Int(ref.size), ChunkHash(of: data) == ref.hash else {
                throw FormatError.corruptChunk(hash: ref.hash.hex)
            }
        }
        return data
    }

    /// A chunk open for reading from its local file (`BlobStore.openLocally`; nil where the
    /// store cannot: use `readChunk`); `read(_:of:)` reads and checks it. Blocks.
    public func openChunk(_ ref: ChunkRef) throws -> LocalObject? {
        do {
            return try store.openLocally(chunkKey(ref.hash), maximumSize: UInt64(ref.size))
        } catch StoreError.badObject {
            throw FormatError.corruptChunk(hash: ref.hash.hex)
        }
    }

    /// An opened chunk's bytes, checked against its hash and size. Blocks.
    public func read(_ chunk: LocalObject, of ref: ChunkRef) throws -> Data {
        guard chunk.size == UInt64(ref.size) else { throw FormatError.corruptChunk(hash: ref.hash.hex) }
        let data: Data
        do {
            data = try chunk.read()
        } catch StoreError.badObject {
            throw FormatError.corruptChunk(hash: ref.hash.hex)
        }
        guard ChunkHash(of: data) == ref.hash else { throw FormatError.corruptChunk(hash: ref.hash.hex) }
        return data
    }

    // MARK: Packs

    public func packKey(_ id: ChunkHash) -> BlobKey {
        let hex = id.hex
        return BlobKey(validated: "\(container)/packs/\(hex.prefix(2))/\(hex)")
    }

    /// Stores a pack whole, once (named by its bytes: one already there is the same); durable
    /// when this returns.
    public func writePack(_ pack: Pack) async throws {
        do {
            try await store.putIfAbsent(packKey(pack.id), data: pack.bytes)
        } catch StoreError.alreadyExists {
            return
        }
    }

    /// Stores a pack even if it is there, so that its time is now (a collection that chose
    /// it then keeps it).
    public func rewritePack(_ pack: Pack) async throws {
        try await store.put(packKey(pack.id), data: pack.bytes)
    }

    /// One chunk of a pack, by a ranged read, checked against its hash and size.
    public func readChunk(_ chunk: PackedChunk, inPack pack: ChunkHash) async throws -> Data {
        let data = try await store.get(packKey(pack), range: chunk.range)
        try await BlockingIO.run {
            guard data.count == Int(chunk.size), ChunkHash(of: data) == chunk.hash else {
                throw FormatError.corruptChunk(hash: chunk.hash.hex)
            }
        }
        return data
    }

    public func hasChunk(_ hash: ChunkHash) async throws -> Bool {
        try await store.size(of: chunkKey(hash)) != nil
    }

    /// Stores chunks once each (one already there is left as it is); all are durable when
    /// this returns.
    public func writeChunks(_ chunks: [(hash: ChunkHash, data: Data)]) async throws {
        try await store.putAllIfAbsent(chunks.map { (chunkKey($0.hash), $0.data) })
    }

    // MARK: Journal

    public enum Entry: Sendable {
        case missing
        case commit(Commit)
        /// Present but not a commit at all: it still takes its number. (An entry of a newer
        /// format throws instead: skipping it would misread the container.)
        case unreadable(String)
    }

    public func readEntry(_ seq: UInt64) async throws -> Entry {
        let data: Data
        do {
            data = try await store.get(journalKey(seq), maximumSize: MaximumSize.journalEntry)
        } catch StoreError.notFound {
            return .missing
        } catch StoreError.badObject(let why) {
            return .unreadable("journal \(seq) cannot be read: \(why)")
        }
        let commit: Commit
        do {
            commit = try JournalCoding.decode(data)
        } catch {
            return .unreadable("journal \(seq) is malformed (\(data.count) bytes): \(error)")
        }
        guard commit.format <= Commit.formatVersion else {
            throw FormatError.unsupportedFormat(what: "journal entry \(seq)", version: commit.format)
        }
        return .commit(commit)
    }

    /// Tries to make `commit` entry number `seq`. False when another device took the number
    /// first: read the entries up to it and try the next one.
    public func append(_ commit: Commit, at seq: UInt64, as encoding: JournalCoding.Encoding) async throws -> Bool {
        do {
            try await store.putIfAbsent(journalKey(seq), data: JournalCoding.encode(commit, as: encoding))
            return true
        } catch StoreError.alreadyExists {
            return false
        }
    }

    // MARK: Snapshots

    public func writeSnapshot(_ tree: Tree) async throws {
        do {
            try await store.putIfAbsent(snapshotKey(tree.head), data: SnapshotCoding.encode(Snapshot(of: tree)))
        } catch StoreError.alreadyExists {
            return  // the fold is deterministic: another device wrote the same tree
        }
    }

    /// The newest snapshot that can be read and its tree, with a line for each one that
    /// could not.
    public func latestSnapshot() async throws -> (loaded: LoadedSnapshot?, problems: [String]) {
        let keys = try await store.listAll(prefix: "\(container)/snapshots/").map(\.key)
        var problems: [String] = []
        for key in keys.reversed() {
            do {
                let snapshot = try SnapshotCoding.decode(try await store.get(key, maximumSize: MaximumSize.snapshot))
                guard snapshot.format <= Snapshot.formatVersion else {
                    problems.append("\(key): format \(snapshot.format) is newer than this icloudfs")
                    continue
                }
                guard key == snapshotKey(snapshot.seq) else {
                    problems.append("\(key): records seq \(snapshot.seq)")
                    continue
                }
                guard try await store.size(of: journalKey(snapshot.seq)) != nil else {
                    problems.append("\(key): journal entry \(snapshot.seq) does not exist")
                    continue
                }
                // The tree is built on another core while the items are checked (a million
                // items take a second or two for each).
                async let tree = Self.tree(of: snapshot)
                if let problem = Snapshot.problem(in: snapshot.items, seq: snapshot.seq) {
                    _ = await tree
                    problems.append("\(key): \(problem)")
                    continue
                }
                return (LoadedSnapshot(snapshot: snapshot, tree: await tree), problems)
            } catch StoreError.badObject(let why) {
                problems.append("\(key): \(why)")
            } catch let error as StoreError {
                throw error
            } catch {
                problems.append("\(key): malformed (\(error))")
            }
        }
        return (nil, problems)
    }

    /// `snapshot.tree`, built on a thread of its own (not one of the tasks' few threads).
    private static func tree(of snapshot: Snapshot) async -> Tree {
        await withCheckedContinuation { built in
            DispatchQueue.global().async { built.resume(returning: snapshot.tree) }
        }
    }
}

/// A snapshot read from the store, and the tree it records.
public struct LoadedSnapshot: Sendable {
    public var snapshot: Snapshot
    public var tree: Tree
}

extension Snapshot {
    /// Why the items cannot be a tree, or nil. Snapshots are untrusted like all store content.
    package static func problem(in items: [Item], seq: UInt64) -> String? {
        guard seq <= ContainerStore.maximumSeq else { return "seq \(seq) is beyond the journal's range" }
        var ids = Set<ItemID>()
        for item in items {
            guard item.id.isValid else { return "invalid id \(item.id)" }
            guard ids.insert(item.id).inserted else { return "item \(item.id) appears twice" }
            // Every version was written by a journal entry at or before the snapshot's.
            guard item.version <= seq, item.contentVersion <= seq else {
                return "item \(item.id): version \(item.version) is after the snapshot's seq \(seq)"
            }
            if item.id == .root {
                guard item.kind == .folder, !item.deleted else { return "the root is not a live folder" }
                continue
            }
            if let problem = ItemName.problem(with: item.name) { return "item \(item.id): \(problem)" }
            let content = Content(size: item.size, chunks: item.chunks)
            if let problem = Tree.problem(kind: item.kind, content: content, target: item.target) {
                return "item \(item.id): \(problem)"
            }
        }
        return nil
    }
}
