// Release-mode harness for Scripts/bench (not a test; it only reports).
//
//   icloudfs-bench micro [--quick]
//       The hot loops of the container format, as one JSON object on stdout: the chunker and
//       SHA-256 in GB/s over random bytes, the journal fold (creates applied to a Tree) and a
//       snapshot's decode in items/s. Each figure is the median of several runs.
//   icloudfs-bench make-container STORE CONTAINER ITEMS [--per-entry N] [--big-folder N]
//       Writes a container of ITEMS items (folders of 1,000 files of 4 KiB) into the directory
//       store STORE with the format's own code: identity, chunks, journal entries of 1,000
//       operations (--per-entry), and a snapshot at the last entry, as a device writes them.
//       --big-folder N: the first folder, `big`, holds N files instead (counted in ITEMS).
//       Prints a JSON object naming a file to stat once the container is mounted.
//   icloudfs-bench null-mount MOUNTPOINT [--log FILE | --file-per-item FOLDER | --passthrough-file-per-item FOLDER]
//       Serves a null filesystem (names in memory, bytes dropped) on icloudfs's own kernel
//       layer until it is unmounted: the kernel layer's share of W3 and W7. --log FILE keeps
//       every write in one file, --file-per-item FOLDER in a file per created file, and
//       --passthrough-file-per-item FOLDER has the kernel write that file (FUSE passthrough):
//       what keeping the bytes costs in each shape.
import BlobStore
import ContainerFormat
import Foundation
import SystemPackage

// MARK: - Helpers

func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// Deterministic pseudo-random bytes (SplitMix64): the same input every run.
func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
        let words = raw.bindMemory(to: UInt64.self)
        for i in 0..<words.count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            words[i] = z ^ (z >> 31)
        }
    }
    return bytes
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("icloudfs-bench: \(message)\n".utf8))
    exit(2)
}

let mtime = Timestamp(seconds: 1_700_000_000)

/// Journal entries creating `count` items: folders `dir-N` of `perFolder` files each, in
/// commits of `perCommit` operations. Files get `content(index)`. With `bigFolder` > 0 a
/// first folder `big` of `bigFolder` files comes before them (its items count in `count`).
func creatingCommits(
    items count: Int, perFolder: Int = 1000, perCommit: Int = 1000, bigFolder: Int = 0,
    content: (Int) -> Content
) -> [Commit] {
    var ops: [ItemOperation] = []
    ops.reserveCapacity(count)
    var folder = ItemID.root
    var made = 0
    var fileIndex = 0
    if bigFolder > 0 {
        folder = RandomID.makeItemID()
        ops.append(.create(.init(
            id: folder, parent: .root, name: "big", kind: .folder, mode: 0o755, mtime: mtime)))
        made += 1
        while made < min(count, bigFolder + 1) {
            ops.append(.create(.init(
                id: RandomID.makeItemID(), parent: folder, name: "big-\(made - 1).txt", kind: .file,
                mode: 0o644, mtime: mtime, content: content(fileIndex))))
            fileIndex += 1
            made += 1
        }
    }
    let offset = made  // the regular folders start here
    while made < count {
        if (made - offset) % (perFolder + 1) == 0 {
            folder = RandomID.makeItemID()
            ops.append(.create(.init(
                id: folder, parent: .root, name: "dir-\((made - offset) / (perFolder + 1))", kind: .folder,
                mode: 0o755, mtime: mtime)))
        } else {
            ops.append(.create(.init(
                id: RandomID.makeItemID(), parent: folder, name: "file-\(fileIndex).txt", kind: .file,
                mode: 0o644, mtime: mtime, content: content(fileIndex))))
            fileIndex += 1
        }
        made += 1
    }
    var commits: [Commit] = []
    var start = 0
    while start < ops.count {
        let end = min(start + perCommit, ops.count)
        commits.append(Commit(
            commitID: UUID().uuidString, device: "bench", deviceID: "bench-device", time: mtime,
            ops: Array(ops[start..<end])))
        start = end
    }
    return commits
}

// MARK: - micro

func micro(quick: Bool) -> [String: Any] {
    let repetitions = quick ? 3 : 5
    let size = (quick ? 64 : 256) << 20
    let data = randomBytes(size, seed: 42)
    var result: [String: Any] = ["repetitions": repetitions, "bytes": size]

    // Chunker: boundaries of a whole buffer (what a written file goes through).
    let chunker = Chunker()
    var chunkCount = 0
    var chunkerRates: [Double] = []
    for _ in 0..<repetitions {
        let start = now()
        chunkCount = data.withUnsafeBytes { chunker.chunkLengths(of: $0).count }
        chunkerRates.append(Double(size) / (now() - start) / 1e9)
    }
    result["chunker_GBps"] = median(chunkerRates)
    result["chunker_chunks"] = chunkCount

    // SHA-256 of 1 MiB pieces (a chunk's name), through ChunkHash.
    let piece = 1 << 20
    var shaRates: [Double] = []
    var sink: UInt8 = 0
    for _ in 0..<repetitions {
        let start = now()
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let end = min(offset + piece, raw.count)
                sink ^= ChunkHash(of: UnsafeRawBufferPointer(rebasing: raw[offset..<end])).bytes[0]
                offset = end
            }
        }
        shaRates.append(Double(size) / (now() - start) / 1e9)
    }
    result["sha256_GBps"] = median(shaRates)

    // The journal fold: creates of files with one chunk each, 1,000 per commit.
    let items = quick ? 20_000 : 100_000
    let ref = ChunkRef(hash: ChunkHash(of: [UInt8](repeating: 1, count: 4096)), size: 4096)
    let commits = creatingCommits(items: items) { _ in Content(size: 4096, chunks: [ref]) }
    var foldRates: [Double] = []
    var tree = Tree()
    for _ in 0..<repetitions {
        tree = Tree()
        let start = now()
        for (index, commit) in commits.enumerated() {
            _ = tree.apply(commit, seq: UInt64(index + 1))
        }
        foldRates.append(Double(items) / (now() - start))
    }
    guard tree.count == items + 1 else { fail("fold made \(tree.count) items of \(items + 1)") }
    result["fold_items_per_s"] = median(foldRates)
    result["fold_items"] = items

    // A snapshot of that tree: encode and decode (what a new device does before it mounts).
    let encoded = SnapshotCoding.encode(Snapshot(of: tree))
    var decodeRates: [Double] = []
    for _ in 0..<repetitions {
        let start = now()
        guard let snapshot = try? SnapshotCoding.decode(encoded) else { fail("snapshot decode") }
        let rebuilt = snapshot.tree
        decodeRates.append(Double(rebuilt.count) / (now() - start))
    }
    result["snapshot_decode_items_per_s"] = median(decodeRates)
    result["snapshot_bytes"] = encoded.count
    if sink == 0xFF { result["sink"] = Int(sink) }  // keeps the hashing from being optimised away
    return result
}

// MARK: - make-container

func makeContainer(
    store path: String, container: String, items: Int, perCommit: Int, bigFolder: Int
) async throws -> [String: Any] {
    let started = now()
    let store = try DirectoryStore(root: FilePath(path))
    let format = try ContainerStore(store: store, container: container)
    if try await format.readIdentity() != nil { fail("container \(container) exists already in \(path)") }
    _ = try await format.createIdentity(Identity(container: container, token: UUID().uuidString, created: mtime))

    // 1,000 distinct 4 KiB contents, shared by the files in turn.
    let distinct = 1000
    var refs: [ChunkRef] = []
    var chunks: [(hash: ChunkHash, data: Data)] = []
    for i in 0..<distinct {
        let bytes = randomBytes(4096, seed: UInt64(i) + 1)
        let hash = ChunkHash(of: bytes)
        chunks.append((hash, Data(bytes)))
        refs.append(ChunkRef(hash: hash, size: 4096))
    }
    try await format.writeChunks(chunks)
    let commits = creatingCommits(items: items, perCommit: perCommit, bigFolder: bigFolder) {
        Content(size: 4096, chunks: [refs[$0 % distinct]])
    }
    var tree = Tree()
    for (index, commit) in commits.enumerated() {
        let seq = UInt64(index + 1)
        guard try await format.append(commit, at: seq, as: tree.nextEntryEncoding) else {
            fail("journal \(seq) exists already")
        }
        let outcome = tree.apply(commit, seq: seq)
        guard outcome.rejected.isEmpty else { fail("fold rejected: \(outcome.rejected.first!)") }
    }
    try await format.writeSnapshot(tree)
    var result: [String: Any] = [
        "items": tree.count - 1, "journal_entries": commits.count, "snapshot_seq": Int(tree.head),
        "probe": items > bigFolder + 2 ? "dir-0/file-\(bigFolder).txt" : "big/big-0.txt",
        "seconds": now() - started,
    ]
    if bigFolder > 0 { result["big_folder"] = ["path": "big", "entries": min(bigFolder, items - 1)] }
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    result["max_rss_MiB"] = Double(usage.ru_maxrss) / 1024  // kilobytes on Linux
    return result
}

// MARK: - main

func printJSON(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "micro":
    printJSON(micro(quick: arguments.contains("--quick")))
case "make-container":
    // --per-entry N: operations per journal entry (default 1,000; 1 makes one entry per item).
    // --big-folder N: a first folder `big` of N files (default none).
    var perEntry: Int? = 1000
    var bigFolder: Int? = 0
    var rest = Array(arguments.dropFirst(4))
    while rest.count >= 2 {
        switch rest[0] {
        case "--per-entry": perEntry = Int(rest[1])
        case "--big-folder": bigFolder = Int(rest[1])
        default: fail("make-container: unknown option \(rest[0])")
        }
        rest.removeFirst(2)
    }
    guard arguments.count >= 4, rest.isEmpty, let items = Int(arguments[3]), items > 0,
        let perEntry, perEntry > 0, let bigFolder, bigFolder >= 0
    else {
        fail("usage: icloudfs-bench make-container STORE CONTAINER ITEMS [--per-entry N] [--big-folder N]")
    }
    do {
        printJSON(try await makeContainer(
            store: arguments[1], container: arguments[2], items: items, perCommit: perEntry, bigFolder: bigFolder))
    } catch {
        fail("make-container: \(error)")
    }
case "null-mount":
    let keeping: NullFileSystem.Keeping
    switch arguments.count == 4 ? arguments[2] : nil {
    case "--log"?: keeping = .log(path: arguments[3])
    case "--file-per-item"?: keeping = .filePerItem(folder: arguments[3])
    case "--passthrough-file-per-item"?: keeping = .passthroughFilePerItem(folder: arguments[3])
    case nil where arguments.count == 2: keeping = .nothing
    default: fail("usage: icloudfs-bench null-mount MOUNTPOINT [--log FILE | --file-per-item FOLDER | --passthrough-file-per-item FOLDER]")
    }
    do {
        try nullMount(at: arguments[1], keeping: keeping)
    } catch {
        fail("null-mount: \(error)")
    }
default:
    fail(
        "usage: icloudfs-bench micro [--quick] | make-container STORE CONTAINER ITEMS [--per-entry N] [--big-folder N]"
            + " | null-mount MOUNTPOINT [--log FILE | --file-per-item FOLDER | --passthrough-file-per-item FOLDER]")
}
