import ArgumentParser
import BlobStore
import ContainerFormat
import Foundation
import FuseAdapter
import Logging
import Replica

/// `icloudfs mount CONTAINER MOUNTPOINT [-o OPTIONS] [--foreground]`, or
/// `icloudfs mount --all [LABEL] MOUNTPOINT ...`
struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a container, or every container of a store (--all), at a folder (returns once the mount is usable).",
        discussion: """
            Options (-o a,b=c; several -o allowed):
              store=URL          the store: /path, file:///path, or
                                 s3://BUCKET/PREFIX?endpoint=URL&region=R
                                 (default $XDG_DATA_HOME/icloudfs/store; S3 keys
                                 from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
                                 AWS_PROFILE or ~/.aws/credentials)
              cache=DIR          this device's cache (default
                                 $XDG_CACHE_HOME/icloudfs/CONTAINER; with --all
                                 $XDG_CACHE_HOME/icloudfs/all~containers, one
                                 folder per container inside)
              all                as --all (for fstab and mount -t icloudfs)
              device=NAME        name shown in conflict copies (default: host name)
              poll=DURATION      how often to look for remote changes (default 2s)
              greedy             download every file in the background
                                 (default: on demand)
              cache_size=SIZE    bound on downloaded content, e.g. 500M (default 10G)
              offline            never contact the store; queue changes until
                                 remounted online
              nogc               never collect the container from this device (by
                                 default a device collects when none has for a day)
              upload_limit=RATE  upload bandwidth in bytes/s, e.g. 1M (default none)
              upload_wait=DURATION  how long a read waits for a file another
                                 device is still uploading (default 60s)
              offline_wait=DURATION  how long a read waits for a store out of
                                 reach before it fails (default 15s)
              nohydrate=A:B      programs whose opens of files not downloaded fail
                                 (EPERM) instead of downloading; +A:B adds to the
                                 default (thumbnailers, indexers, scanners), empty
                                 for none
              nonotify           no desktop notifications (conflicts, files that
                                 cannot be uploaded, sync stopped for longer than
                                 notify_wait=DURATION, default 10m)
              uid=N, gid=N       show this owner/group for every item instead of
                                 the stored one (default: stored owners as
                                 root, the mounting user otherwise)
              ro, allow_other, default_permissions, umask=OCTAL
                                 (allow_other turns default_permissions on)
              acl                POSIX ACLs (setfacl, getfacl), checked by the
                                 kernel, stored and synced (default: noacl)
              noexec, nosuid, nodev, sync, dirsync: kernel mount flags
              relatime, strictatime, noatime
                                 when reads move access times (default
                                 relatime; kept on this device)
              nodiratime         listing a folder leaves its access time
              remount            change a mounted container's flags
                                 (mount -o remount,ro DIR; remount,rw)
              foreground, debug  stay in the foreground; log each operation
            With --all, MOUNTPOINT shows one folder per container of the store, \
            named as macOS names them (iCloud.com.example.notes is iCloud~com~example~notes), \
            each synced as a mount of that container alone; containers made by other devices \
            appear within the poll interval, and mkdir of such a name at the top makes a new \
            one. cache_size bounds each container's cache.
            Examples:
              icloudfs mount iCloud.com.example.notes ~/notes -o store=/srv/icloud
              icloudfs mount --all ~/iCloud -o store=/srv/icloud
            """
    )

    @Argument(help: "The container identifier, e.g. iCloud.com.example.notes (with --all: a label for mount to show, or left out).")
    var container: String

    @Argument(help: "An existing empty folder to mount on (with --all and no label: the first argument).")
    var mountPoint: String?

    @Flag(help: "Mount every container of the store, one folder each.")
    var all = false

    @Option(name: .customShort("o"), help: "Mount options, comma-separated (listed above).")
    var options: [String] = []

    @Flag(help: "Stay in the foreground (logs go to standard error).")
    var foreground = false

    @Flag(help: .hidden)
    var reportReady = false

    func validate() throws {
        var parsed = MountOptions()
        for list in options {
            do { try parsed.parse(list) } catch { throw ValidationError(error.description) }
        }
        if all || parsed.all { return }
        guard mountPoint != nil else { throw ValidationError("give the container and the mount point (or --all and the mount point)") }
        guard ContainerStore.isValidName(container) else {
            throw ValidationError(FormatError.invalidContainerName(container).message)
        }
    }

    func run() async throws {
        var parsed = MountOptions()
        for list in options { try parsed.parse(list) }
        let all = self.all || parsed.all
        // With --all and one argument, it is the mount point; the source shown is "icloudfs".
        let (source, given) = mountPoint.map { (container, $0) } ?? ("icloudfs", container)
        let mountPoint = URL(fileURLWithPath: given).standardizedFileURL.path
        if parsed.remount {
            return try Remount.apply(parsed, at: mountPoint)
        }
        if foreground || parsed.foreground {
            try await Mounter(container: source, mountPoint: mountPoint, options: parsed, all: all, reportReady: reportReady).run()
        } else {
            try Daemon.start(
                arguments: ["mount"] + (all ? ["--all"] : []) + [source, mountPoint, "--foreground", "--report-ready"]
                    + options.flatMap { ["-o", $0] })
        }
    }
}
