import BlobStore
import Foundation

/// One collection's record, `CONTAINER/gc/NUMBER` (FORMAT.md "Collection"): what it chose
/// to delete and when, so that devices about to name one of those chunks keep it.
public struct CollectionRecord: Codable, Hashable, Sendable {
    public static let formatVersion = 1
    /// The least time a sweep has, however short the grace.
    public static let shortestSweep: Int64 = 60

    public var format: Int
    /// Its number in `gc/` (taken like a journal number: the next free one).
    public var number: UInt64
    public var device: String
    /// When it was written.
    public var started: Timestamp
    /// No chunk is deleted before this time (started + grace).
    public var sweepAfter: Timestamp
    /// No chunk is deleted after this time (sweepAfter + grace, at least a minute): devices
    /// waiting for the sweep to end wait until then at the most.
    public var deadline: Timestamp
    /// The journal head the candidates were chosen at.
    public var head: UInt64
    /// Chunks no item, version or deleted item named at `head`, written before
    /// `started - grace`.
    public var candidates: [ChunkHash]
    /// Packs in which no chunk located there is named at `head` (a chunk's location is
    /// the last pack an entry put it in), written before `started - grace`.
    public var candidatePacks: [ChunkHash]
    /// When the sweep ended (nil: not yet).
    public var swept: Timestamp?
    public var deletedChunks: Int
    public var deletedBytes: UInt64
    /// Journal entries below this number may be gone (a snapshot at or after it exists);
    /// the highest of any record is the container's journal floor.
    public var journalFrom: UInt64

    public init(
        number: UInt64, device: String, started: Timestamp, grace: Int64, head: UInt64, candidates: [ChunkHash],
        candidatePacks: [ChunkHash] = [], journalFrom: UInt64
    ) {
        format = Self.formatVersion
        self.number = number
        self.device = device
        self.started = started
        sweepAfter = started.adding(seconds: grace)
        deadline = sweepAfter.adding(seconds: max(grace, Self.shortestSweep))
        self.head = head
        self.candidates = candidates
        self.candidatePacks = candidatePacks
        swept = nil
        deletedChunks = 0
        deletedBytes = 0
        self.journalFrom = journalFrom
    }

    /// Whether its sweep may still delete chunks at `now`.
    public func mayDelete(at now: Timestamp) -> Bool { swept == nil && now < deadline }

    enum CodingKeys: String, CodingKey {
        case format, number, device, started, sweepAfter, deadline, head, candidates, candidatePacks, swept,
            deletedChunks, deletedBytes, journalFrom
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        format = try container.decode(Int.self, forKey: .format)
        guard format <= Self.formatVersion else {
            throw FormatError.unsupportedFormat(what: "collection record", version: format)
        }
        number = try container.decode(UInt64.self, forKey: .number)
        device = try container.decode(String.self, forKey: .device)
        started = try container.decode(Timestamp.self, forKey: .started)
        sweepAfter = try container.decode(Timestamp.self, forKey: .sweepAfter)
        deadline = try container.decode(Timestamp.self, forKey: .deadline)
        head = try container.decode(UInt64.self, forKey: .head)
        func hashes(_ key: CodingKeys) throws -> [ChunkHash] {
            try (container.decodeIfPresent([String].self, forKey: key) ?? []).map { hex in
                guard let hash = ChunkHash(hex: hex) else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not a hash")
                }
                return hash
            }
        }
        candidates = try hashes(.candidates)
        // Absent in records written before packs.
        candidatePacks = try hashes(.candidatePacks)
        swept = try container.decodeIfPresent(Timestamp.self, forKey: .swept)
        deletedChunks = try container.decode(Int.self, forKey: .deletedChunks)
        deletedBytes = try container.decode(UInt64.self, forKey: .deletedBytes)
        journalFrom = try container.decode(UInt64.self, forKey: .journalFrom)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(format, forKey: .format)
        try container.encode(number, forKey: .number)
        try container.encode(device, forKey: .device)
        try container.encode(started, forKey: .started)
        try container.encode(sweepAfter, forKey: .sweepAfter)
        try container.encode(deadline, forKey: .deadline)
        try container.encode(head, forKey: .head)
        try container.encode(candidates.map(\.hex), forKey: .candidates)
        if !candidatePacks.isEmpty { try container.encode(candidatePacks.map(\.hex), forKey: .candidatePacks) }
        try container.encodeIfPresent(swept, forKey: .swept)
        try container.encode(deletedChunks, forKey: .deletedChunks)
        try container.encode(deletedBytes, forKey: .deletedBytes)
        try container.encode(journalFrom, forKey: .journalFrom)
    }
}

/// What the chunks of a tree are for: a chunk named by a live item is live; one named only
/// by past versions or deleted items is history.
public struct ChunkUse: Sendable {
    public var live: Set<ChunkHash> = []
    public var history: Set<ChunkHash> = []

    public init(of tree: Tree) {
        for item in tree.allItems {
            let live = !item.deleted && tree.isLive(item.id)
            for chunk in item.chunks {
                if live { self.live.insert(chunk.hash) } else { history.insert(chunk.hash) }
            }
            for version in item.history ?? [] {
                for chunk in version.chunks { history.insert(chunk.hash) }
            }
        }
        history.subtract(live)
    }

    public func contains(_ hash: ChunkHash) -> Bool { live.contains(hash) || history.contains(hash) }
}

extension ContainerStore {
    /// The largest collection record a device reads (a candidate is 67 bytes of JSON).
    static let maximumRecordSize: UInt64 = 512 << 20

    func collectionKey(_ number: UInt64) -> BlobKey {
        BlobKey(validated: "\(container)/gc/\(ContainerStore.padded(number))")
    }

    /// Every collection record, oldest first, with a line for each that cannot be read.
    public func collectionRecords() async throws -> (records: [CollectionRecord], problems: [String]) {
        var records: [CollectionRecord] = []
        var problems: [String] = []
        for number in try await collectionNumbers() {
            do {
                if let record = try await collectionRecord(number) { records.append(record) }
            } catch FormatError.malformed(let what, let why) {
                problems.append("\(what): \(why)")
            }
        }
        return (records, problems)
    }

    /// One record, or nil when it is gone.
    public func collectionRecord(_ number: UInt64) async throws -> CollectionRecord? {
        let key = collectionKey(number)
        let data: Data
        do {
            data = try await store.get(key, maximumSize: Self.maximumRecordSize)
        } catch StoreError.notFound {
            return nil
        } catch StoreError.badObject(let why) {
            throw FormatError.malformed(what: key.rawValue, why: why)
        }
        do {
            return try FormatCoding.decode(CollectionRecord.self, from: data)
        } catch let error as FormatError {
            throw error
        } catch {
            throw FormatError.malformed(what: key.rawValue, why: "\(error)")
        }
    }

    /// The numbers of the records in the store, oldest first (a listing only).
    public func collectionNumbers() async throws -> [UInt64] {
        try await store.listAll(prefix: "\(container)/gc/").compactMap { UInt64($0.key.rawValue.split(separator: "/").last ?? "") }
    }

    /// Writes `record` under the next free number after `after` (its number is set).
    public func addCollectionRecord(_ record: inout CollectionRecord, after: UInt64) async throws {
        var number = after + 1
        while true {
            record.number = number
            do {
                try await store.putIfAbsent(collectionKey(number), data: FormatCoding.encode(record))
                return
            } catch StoreError.alreadyExists {
                number += 1
            }
        }
    }

    public func updateCollectionRecord(_ record: CollectionRecord) async throws {
        try await store.put(collectionKey(record.number), data: FormatCoding.encode(record))
    }

    public func deleteCollectionRecord(_ number: UInt64) async throws {
        try await store.delete(collectionKey(number))
    }

    /// Every chunk in the store, with its size and when it was written.
    public func listChunks() async throws -> [(hash: ChunkHash, size: UInt64, modified: Date)] {
        try await listNamedByHash("chunks", key: chunkKey)
    }

    /// When the chunk was last written, or nil when it is not in the store.
    public func chunkWritten(_ hash: ChunkHash) async throws -> Date? {
        try await written(chunkKey(hash))
    }

    /// The objects of `folder` whose key is `key` of the hash their name spells (others,
    /// such as temporary files, are left out), with sizes and times.
    private func listNamedByHash(
        _ folder: String, key: (ChunkHash) -> BlobKey
    ) async throws -> [(hash: ChunkHash, size: UInt64, modified: Date)] {
        try await store.listAll(prefix: "\(container)/\(folder)/").compactMap { object in
            guard let name = object.key.rawValue.split(separator: "/").last, let hash = ChunkHash(hex: String(name)),
                object.key == key(hash)
            else { return nil }
            return (hash, object.size, object.modified)
        }
    }

    /// When the object was last written, or nil when it is not in the store.
    private func written(_ key: BlobKey) async throws -> Date? {
        try await store.list(prefix: key.rawValue, after: nil, limit: 1).first { $0.key == key }?.modified
    }

    public func deleteChunk(_ hash: ChunkHash) async throws {
        try await store.delete(chunkKey(hash))
    }

    /// Stores the chunk again even if it is there, so that its time is now (a collection
    /// whose candidates name it then keeps it).
    public func rewriteChunk(_ hash: ChunkHash, data: Data) async throws {
        try await store.put(chunkKey(hash), data: data)
    }

    /// Every pack in the store, with its size and when it was written.
    public func listPacks() async throws -> [(id: ChunkHash, size: UInt64, modified: Date)] {
        try await listNamedByHash("packs", key: packKey).map { (id: $0.hash, size: $0.size, modified: $0.modified) }
    }

    /// When the pack was last written, or nil when it is not in the store.
    public func packWritten(_ id: ChunkHash) async throws -> Date? {
        try await written(packKey(id))
    }

    public func deletePack(_ id: ChunkHash) async throws {
        try await store.delete(packKey(id))
    }

    /// What writes cut short left in the container (a device or collection killed while it
    /// wrote an object), written before `before`; how many went.
    public func removeAbandonedWrites(before: Date) async throws -> Int {
        try await store.removeAbandonedWrites(under: "\(container)/", before: before)
    }

    /// A whole pack's bytes and chunks, its index checked (a repack reads the chunks it keeps).
    public func readPack(_ id: ChunkHash) async throws -> (bytes: Data, chunks: [PackedChunk]) {
        let bytes = try await store.get(packKey(id))
        let chunks = try await BlockingIO.run {
            guard ChunkHash(of: bytes) == id else { throw FormatError.corruptChunk(hash: id.hex) }
            return try Pack.index(of: bytes)
        }
        return (bytes, chunks)
    }

    /// The journal entries and snapshots in the store, with sizes and times.
    public func listJournal() async throws -> [(seq: UInt64, size: UInt64, modified: Date)] {
        try await store.listAll(prefix: "\(container)/journal/").compactMap { object in
            guard let seq = UInt64(object.key.rawValue.split(separator: "/").last ?? "") else { return nil }
            return (seq, object.size, object.modified)
        }
    }

    public func listSnapshots() async throws -> [(seq: UInt64, size: UInt64)] {
        try await store.listAll(prefix: "\(container)/snapshots/").compactMap { object in
            guard let seq = UInt64(object.key.rawValue.split(separator: "/").last ?? "") else { return nil }
            return (seq, object.size)
        }
    }

    public func deleteEntry(_ seq: UInt64) async throws {
        try await store.delete(journalKey(seq))
    }

    public func deleteSnapshot(_ seq: UInt64) async throws {
        try await store.delete(snapshotKey(seq))
    }

    /// Removes entry `seq` if it is still `commit` (a device's own entry written below the
    /// journal floor, which nobody reads).
    public func withdraw(_ commit: Commit, at seq: UInt64) async throws {
        if case .commit(let found) = try await readEntry(seq), found.commitID == commit.commitID {
            try await deleteEntry(seq)
        }
    }

    /// The tree as of the newest entry: the newest readable snapshot, then the entries after
    /// it (or `tree`, when given, then the entries after its head).
    public func catchUp(_ tree: Tree? = nil, problems: (String) -> Void = { _ in }) async throws -> Tree {
        var tree = tree ?? Tree()
        if tree.head == 0 {
            let (loaded, snapshotProblems) = try await latestSnapshot()
            snapshotProblems.forEach(problems)
            if let loaded { tree = loaded.tree }
        }
        while true {
            let seq = tree.head + 1
            switch try await readEntry(seq) {
            case .missing:
                return tree
            case .commit(let commit):
                tree.apply(commit, seq: seq).rejected.forEach(problems)
            case .unreadable(let why):
                problems(why)
                tree.skip(seq: seq)
            }
        }
    }
}
