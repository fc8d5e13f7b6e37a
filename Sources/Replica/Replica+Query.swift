import ContainerFormat
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What `icloudfs query` asks (docs/SEMANTICS.md "Metadata queries"), as an
/// `NSMetadataQuery` would: a scope and conditions, all of which an item must meet.
public struct MetadataQuery: Codable, Sendable, Equatable {
    /// `documents`: the container's `Documents` folder and what is in it (what users see as
    /// documents); `data`: everything else; `all`: both.
    public enum Scope: String, Codable, Sendable, CaseIterable {
        case documents, data, all
    }

    public var scope: Scope
    /// A shell pattern (`fnmatch`) the item's name must match.
    public var name: String?
    /// Files whose content is (true) or is not (false) all on this device.
    public var downloaded: Bool?
    /// Items with changes not yet all in the store.
    public var uploading: Bool?
    /// Items with conflict copies.
    public var conflicts: Bool?
    /// Items of these kinds (`ItemKind` names: file, folder, symlink, ...).
    public var kinds: Set<String>?
    /// Files of at least / at most this many bytes (folders and other kinds fail).
    public var minimumSize: UInt64?
    public var maximumSize: UInt64?
    /// Items modified at or after / before this time.
    public var modifiedAfter: Timestamp?
    public var modifiedBefore: Timestamp?
    /// Files with at least / at most this share of their content on this device (0 to 100).
    public var minimumPercentDownloaded: Double?
    public var maximumPercentDownloaded: Double?

    public init(scope: Scope = .all, name: String? = nil, downloaded: Bool? = nil, uploading: Bool? = nil, conflicts: Bool? = nil) {
        self.scope = scope
        self.name = name
        self.downloaded = downloaded
        self.uploading = uploading
        self.conflicts = conflicts
    }

    /// Whether `item` (as the user sees it) meets the conditions on kind, size and time.
    func admits(_ item: Item) -> Bool {
        if let kinds, !kinds.contains(item.kind.rawValue) { return false }
        if minimumSize != nil || maximumSize != nil {
            guard item.kind == .file else { return false }
            if let minimumSize, item.size < minimumSize { return false }
            if let maximumSize, item.size > maximumSize { return false }
        }
        if let modifiedAfter, item.mtime < modifiedAfter { return false }
        if let modifiedBefore, !(item.mtime < modifiedBefore) { return false }
        return true
    }

    /// Whether a file with `percent` of its content here meets the conditions on it.
    func admits(kind: ItemKind, percentDownloaded percent: Double) -> Bool {
        guard minimumPercentDownloaded != nil || maximumPercentDownloaded != nil else { return true }
        guard kind == .file else { return false }
        if let minimumPercentDownloaded, percent < minimumPercentDownloaded { return false }
        if let maximumPercentDownloaded, percent > maximumPercentDownloaded { return false }
        return true
    }
}

/// One item a query found, with its sync state.
public struct MetadataItem: Codable, Sendable, Equatable {
    public var id: String
    public var path: String
    public var kind: String
    public var size: UInt64
    /// The modification time, ISO 8601 in UTC with nanoseconds.
    public var modified: String
    public var downloaded: Bool
    public var downloading: Bool
    public var percentDownloaded: Double
    public var uploaded: Bool
    public var uploading: Bool
    public var percentUploaded: Double
    public var conflict: Bool
}

extension Replica {
    /// The live items `query` selects, by path (byte order), answered from the device's tree
    /// under one look at the state (no walk of the mount).
    public func query(_ query: MetadataQuery) -> [MetadataItem] {
        let found = state.withLock { state in
            // Nothing in here captures `state` in a closure: each such capture copied it.
            let pending = state.itemsWithPendingChanges
            let names = NameMatcher(query.name)
            var found: [MetadataItem] = []
            let documents = state.view.child(named: "Documents", in: .root).flatMap { $0.kind == .folder ? $0.id : nil }
            var stack: [(id: ItemID, path: String)]
            switch query.scope {
            case .documents:
                guard let documents else { return found }
                if let item = state.liveItem(documents), names.matches(item.name),
                    let match = match(item, in: "", named: "Documents", query, &state, pending)
                {
                    found.append(match)
                }
                stack = [(documents, "Documents")]
            case .data, .all:
                stack = [(.root, "")]
            }
            // The tree once (its tables retained, not copied); an item copied once to test
            // it, and again with its unsaved writes only if it is found.
            let view = state.view
            while let (folder, folderPath) = stack.popLast() {
                for (key, child) in view.namedChildren(of: folder) ?? [:] {
                    if query.scope == .data, folder == .root, child == documents { continue }
                    let matches = names.matches(key.name)
                    // Most items of a large container fail the name: no item, no path for
                    // them; only folders with something in them are walked into.
                    let walked = view.hasChildren(child)
                    guard walked || matches else { continue }
                    if walked { stack.append((child, folderPath.isEmpty ? key.name : folderPath + "/" + key.name)) }
                    // A hard link shows as the item it names, at this path.
                    guard matches, var item = view.item(child) else { continue }
                    if item.kind == .hardLink {
                        guard let linked = item.linkedItem, let target = view.liveItem(linked) else { continue }
                        item = target
                    }
                    if let match = match(item, in: folderPath, named: key.name, query, &state, pending) {
                        found.append(match)
                    }
                }
            }
            return found
        }
        // Sorted outside the lock, by index: moving the items themselves cost more.
        let order = found.indices.sorted { found[$0].path.precedesInBytes(found[$1].path) }
        return order.map { found[$0] }
    }

    /// `item`, named `name` in the folder at `folderPath`, if it meets the query's sync
    /// conditions (its path is made only then).
    private func match(
        _ item: Item, in folderPath: String, named name: String, _ query: MetadataQuery, _ state: inout ReplicaState,
        _ pending: Set<ItemID>
    ) -> MetadataItem? {
        // The conditions first, each looking only at what it needs: the whole sync state
        // costs more, and most items of a large container fail them.
        let conflict = state.view.hasUnresolvedConflicts(item.id)
        if let wanted = query.conflicts, conflict != wanted { return nil }
        if query.downloaded != nil || query.uploading != nil {
            let record = state.content[item.id]
            if let wanted = query.downloaded, item.kind != .file || isDownloaded(item, record) != wanted { return nil }
            if let wanted = query.uploading, isUploading(item, record, &state, pending) != wanted { return nil }
        }
        let item = state.liveItem(item.id) ?? item  // with its unsaved writes
        guard query.admits(item) else { return nil }
        let sync = fileState(item, &state, pending)
        guard query.admits(kind: item.kind, percentDownloaded: sync.percentDownloaded) else { return nil }
        return MetadataItem(
            id: item.id.rawValue, path: folderPath.isEmpty ? name : folderPath + "/" + name, kind: item.kind.rawValue, size: item.kind == .folder ? 0 : item.size,
            modified: MetadataItem.isoTime(item.mtime), downloaded: sync.isDownloaded, downloading: sync.isDownloading,
            percentDownloaded: sync.percentDownloaded, uploaded: sync.isUploaded, uploading: sync.isUploading,
            percentUploaded: sync.percentUploaded, conflict: conflict)
    }
}

/// A query's name pattern, worked out once: `*.txt`, `draft*`, `*note*` and plain names are
/// compared as bytes (`fnmatch` and string slicing per item were most of a query's time).
struct NameMatcher {
    private enum Form {
        case any, exact([UInt8]), prefix([UInt8]), suffix([UInt8]), contains([UInt8]), glob(String)
    }

    private let form: Form

    init(_ pattern: String?) {
        guard let pattern else {
            form = .any
            return
        }
        var inner = Array(pattern.utf8)
        let star = UInt8(ascii: "*")
        let leading = inner.first == star
        if leading { inner.removeFirst() }
        let trailing = inner.last == star
        if trailing { inner.removeLast() }
        if inner.contains(where: { [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "\\")].contains($0) }) {
            form = .glob(pattern)
        } else if inner.isEmpty {
            form = leading || trailing ? .any : .exact([])
        } else {
            form = switch (leading, trailing) {
            case (false, false): .exact(inner)
            case (true, false): .suffix(inner)
            case (false, true): .prefix(inner)
            case (true, true): .contains(inner)
            }
        }
    }

    func matches(_ name: String) -> Bool {
        switch form {
        case .any: return true
        case .glob(let pattern): return fnmatch(pattern, name, 0) == 0
        case .exact(let bytes): return name.utf8.elementsEqual(bytes)
        case .prefix(let bytes): return name.utf8.starts(with: bytes)
        case .suffix(let bytes):
            let utf8 = name.utf8
            return utf8.count >= bytes.count && utf8.suffix(bytes.count).elementsEqual(bytes)
        case .contains(let bytes): return name.utf8.firstRange(of: bytes) != nil
        }
    }
}

extension MetadataItem {
    /// This item as one line of JSON, keys sorted, as `JSONEncoder` would write it but made
    /// by hand: a query of 100,000 items spent seconds in `JSONEncoder` and `JSONDecoder`.
    public var jsonLine: String {
        var line = "{"
        line += "\"conflict\":\(conflict),\"downloaded\":\(downloaded),\"downloading\":\(downloading),"
        line += "\"id\":" + MetadataItem.quoted(id) + ",\"kind\":" + MetadataItem.quoted(kind)
        line += ",\"modified\":" + MetadataItem.quoted(modified) + ",\"path\":" + MetadataItem.quoted(path)
        line += ",\"percentDownloaded\":\(MetadataItem.number(percentDownloaded)),\"percentUploaded\":\(MetadataItem.number(percentUploaded))"
        line += ",\"size\":\(size),\"uploaded\":\(uploaded),\"uploading\":\(uploading)}"
        return line
    }

    /// `text` as a JSON string.
    public static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A whole number without a fraction (`100`), else as Swift prints a double.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// `2026-11-28T02:08:52.126183569Z`, written digit by digit (`String(format:)` was most
    /// of a 100,000-item query's time).
    static func isoTime(_ time: Timestamp) -> String {
        var seconds = time_t(time.seconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(30)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = max(0, value)
            while divisor > 0 {
                bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        digits(Int(parts.tm_year) + 1900, 4)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        bytes.append(UInt8(ascii: "."))
        digits(Int(time.nanoseconds), 9)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A container at a glance (`icloudfs containers`): its items and how far they are synced.
public struct ContainerSummary: Codable, Sendable, Equatable {
    public var container: String
    public var items: Int
    public var files: Int
    /// The size of its files.
    public var bytes: UInt64
    /// Files whose content is all on this device.
    public var downloaded: Int
    public var downloading: Int
    /// Items with changes not yet all in the store.
    public var uploading: Int
    public var conflicts: Int
    /// Why uploads stop, while they do (the store out of reach, a full quota).
    public var uploadError: String?

    /// One word or a few: `synced`, `uploading N`, `downloading N`, `N conflicts`, or the
    /// upload error.
    public var state: String {
        if let uploadError { return "error: \(uploadError)" }
        if uploading > 0 { return "uploading \(uploading)" }
        if downloading > 0 { return "downloading \(downloading)" }
        if conflicts > 0 { return "\(conflicts) conflict\(conflicts == 1 ? "" : "s")" }
        return "synced"
    }
}

extension Replica {
    /// Every item's sync state summed up (one query of all items).
    public func summary() -> ContainerSummary {
        let items = query(MetadataQuery())
        var summary = ContainerSummary(
            container: configuration.container, items: items.count, files: 0, bytes: 0, downloaded: 0, downloading: 0,
            uploading: 0, conflicts: 0, uploadError: state.withLock { $0.uploadError })
        for item in items {
            if item.kind == ItemKind.file.rawValue {
                summary.files += 1
                summary.bytes += item.size
                if item.downloaded { summary.downloaded += 1 }
            }
            if item.downloading { summary.downloading += 1 }
            if item.uploading { summary.uploading += 1 }
            if item.conflict { summary.conflicts += 1 }
        }
        return summary
    }
}
