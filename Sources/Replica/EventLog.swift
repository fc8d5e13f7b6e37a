import ContainerFormat
import Foundation
import Synchronization

/// One remote change as `icloudfs monitor` shows it.
public struct ChangeEvent: Codable, Sendable {
    public var time: String
    /// created, modified, attributes, moved, deleted, conflict
    public var kind: String
    public var path: String
    public var device: String
    public var item: String
}

/// Remote changes as they arrive, handed to whoever follows them (`icloudfs monitor`, through
/// the mount's control channel), like NSMetadataQuery / `brctl monitor`. Nothing is kept:
/// a follower sees the changes that arrive while it follows.
final class EventLog: Sendable {
    typealias Event = ChangeEvent
    typealias Follower = @Sendable ([Event]) -> Void

    private let followers = Mutex<(next: Int, all: [Int: Follower])>((0, [:]))

    /// Calls `follower` with each later batch of events (on the sync loop's thread: it must
    /// not block); returns the number that `unfollow` takes.
    func follow(_ follower: @escaping Follower) -> Int {
        followers.withLock { followers in
            defer { followers.next += 1 }
            followers.all[followers.next] = follower
            return followers.next
        }
    }

    var hasFollowers: Bool { followers.withLock { !$0.all.isEmpty } }

    func unfollow(_ number: Int) {
        _ = followers.withLock { $0.all.removeValue(forKey: number) }
    }

    /// The events one applied journal entry stands for.
    static func events(for commit: Commit, seq: UInt64, in tree: Tree, outcome: FoldOutcome) -> [Event] {
        let time = ISO8601DateFormatter().string(from: Date())
        var events: [Event] = []
        for op in commit.ops {
            let kind: String
            switch op {
            case .create: kind = "created"
            case .update(let update): kind = update.content == nil ? "attributes" : "modified"
            case .move: kind = "moved"
            case .delete: kind = "deleted"
            }
            let id = op.itemID
            events.append(Event(time: time, kind: kind, path: tree.path(of: id) ?? id.rawValue, device: commit.device, item: id.rawValue))
        }
        for id in outcome.changed.sorted() {
            guard let item = tree.item(id), item.conflictOf != nil, item.version == seq else { continue }
            events.append(Event(time: time, kind: "conflict", path: tree.path(of: id) ?? id.rawValue, device: commit.device, item: id.rawValue))
        }
        return events
    }

    func append(_ events: [Event]) {
        guard !events.isEmpty else { return }
        for follower in followers.withLock({ Array($0.all.values) }) { follower(events) }
    }
}

extension Replica {
    /// Calls `follower` with each batch of remote changes as it is applied, until
    /// `stopFollowingChanges` with the number returned.
    public func followChanges(_ follower: @escaping @Sendable ([ChangeEvent]) -> Void) -> Int {
        events.follow(follower)
    }

    public func stopFollowingChanges(_ number: Int) {
        events.unfollow(number)
    }
}
