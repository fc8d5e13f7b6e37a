import Replica
import Testing

@testable import ICloudFSCommands

/// `-o` lists as mount(8), fstab and `icloudfs mount` hand them over.
struct MountOptionsTests {
    func parsed(_ list: String) throws(MountOptionError) -> MountOptions {
        var options = MountOptions()
        try options.parse(list)
        return options
    }

    /// The error `list` is refused with, or nil (recorded as a failure) if it is accepted.
    func refusal(_ list: String, sourceLocation: SourceLocation = #_sourceLocation) -> MountOptionError? {
        do {
            _ = try parsed(list)
            Issue.record("'\(list)' was accepted", sourceLocation: sourceLocation)
            return nil
        } catch {
            return error
        }
    }

    @Test("no options give the documented defaults")
    func defaults() throws {
        let options = try parsed("")
        #expect(options == MountOptions())
        #expect(options.store == nil && options.cache == nil && options.device == nil)
        #expect(options.poll == .seconds(2))
        #expect(!options.readOnly && !options.remount && !options.acl)
        #expect(!options.allowOther && !options.defaultPermissions && !options.foreground && !options.debug)
        #expect(options.uid == nil && options.gid == nil && options.umask == nil)
        #expect(!options.greedy && options.autoCollect && !options.offline)
        #expect(options.cacheSize == 10 << 30)
        #expect(options.uploadLimit == nil)
        #expect(options.uploadWait == .seconds(60))
        #expect(options.offlineWait == .seconds(15))
        #expect(options.accessTimes == .relative)
        #expect(options.folderAccessTimes)
        #expect(options.kernelFlags.isEmpty)
        #expect(try parsed(",,") == MountOptions())
    }

    @Test("store=, cache= and device= set their fields, keeping every '=' after the first in the value")
    func paths() throws {
        let options = try parsed("store=s3://bucket/p?endpoint=http://h:9000&region=eu-west-1,cache=/var/cache/x,device=my laptop")
        #expect(options.store == "s3://bucket/p?endpoint=http://h:9000&region=eu-west-1")
        #expect(options.cache == "/var/cache/x")
        #expect(options.device == "my laptop")
        var changed = options
        changed.store = nil
        changed.cache = nil
        changed.device = nil
        #expect(changed == MountOptions(), "nothing else changed")
    }

    @Test("poll=, upload_wait= and offline_wait= take durations in ms, s, m, h or plain seconds")
    func durations() throws {
        let options = try parsed("poll=500ms,upload_wait=2m,offline_wait=3")
        #expect(options.poll == .milliseconds(500))
        #expect(options.uploadWait == .seconds(120))
        #expect(options.offlineWait == .seconds(3))
        #expect(try parsed("poll=1.5s").poll == .milliseconds(1500))
        #expect(try parsed("upload_wait=1h").uploadWait == .seconds(3600))
        #expect(try parsed("offline_wait=0").offlineWait == .zero)
    }

    @Test("ro and rw set read-only and read-write; the last one given wins")
    func readOnly() throws {
        #expect(try parsed("ro").readOnly)
        #expect(try !parsed("ro,rw").readOnly)
        #expect(try parsed("rw,ro").readOnly)
        #expect(try parsed("rw") == MountOptions())
    }

    @Test("remount is recorded, with the flags given beside it")
    func remount() throws {
        let options = try parsed("remount,ro,noexec")
        #expect(options.remount)
        #expect(options.readOnly)
        #expect(options.kernelFlags == ["noexec"])
    }

    @Test("relatime, atime, strictatime and noatime set the access-time rule; noatime also goes to the kernel")
    func accessTimes() throws {
        #expect(try parsed("strictatime").accessTimes == .strict)
        #expect(try parsed("strictatime,relatime").accessTimes == .relative)
        #expect(try parsed("strictatime,atime").accessTimes == .relative)
        let never = try parsed("noatime")
        #expect(never.accessTimes == .never)
        #expect(never.kernelFlags == ["noatime"])
        #expect(try parsed("relatime").kernelFlags.isEmpty)
        #expect(try parsed("strictatime").kernelFlags.isEmpty)
    }

    @Test("nodiratime stops listings moving access times; diratime turns it back on")
    func folderAccessTimes() throws {
        #expect(try !parsed("nodiratime").folderAccessTimes)
        #expect(try parsed("nodiratime,diratime").folderAccessTimes)
        #expect(try parsed("nodiratime").accessTimes == .relative)
    }

    @Test("acl turns POSIX ACLs on and noacl off, the last one winning")
    func acl() throws {
        #expect(try parsed("acl").acl)
        #expect(try !parsed("acl,noacl").acl)
        #expect(try parsed("noacl,acl").acl)
    }

    @Test("uid= and gid= are decimal, umask= is octal")
    func owners() throws {
        let options = try parsed("uid=1000,gid=100,umask=027")
        #expect(options.uid == 1000)
        #expect(options.gid == 100)
        #expect(options.umask == 0o27)
        #expect(try parsed("umask=777").umask == 0o777)
        #expect(try parsed("uid=0").uid == 0)
        #expect(try parsed("gid=4294967295").gid == UInt32.max)
    }

    @Test("allow_other, default_permissions, foreground, debug, greedy, nogc and offline each set their own field")
    func switches() throws {
        let expectations: [(String, (MountOptions) -> Bool)] = [
            ("allow_other", \.allowOther), ("default_permissions", \.defaultPermissions), ("foreground", \.foreground),
            ("debug", \.debug), ("greedy", \.greedy), ("nogc", { !$0.autoCollect }), ("offline", \.offline),
        ]
        for (name, isSet) in expectations {
            let options = try parsed(name)
            #expect(isSet(options), "\(name)")
            #expect(!isSet(MountOptions()), "\(name) is not the default")
            // Only that field: every other switch stays as it was.
            for (other, otherIsSet) in expectations where other != name {
                #expect(!otherIsSet(options), "\(name) also set \(other)")
            }
        }
    }

    @Test("cache_size= and upload_limit= take sizes in K, M, G, T (powers of 1024) or plain bytes")
    func sizes() throws {
        #expect(try parsed("cache_size=500M").cacheSize == 500 << 20)
        #expect(try parsed("cache_size=2G").cacheSize == 2 << 30)
        #expect(try parsed("cache_size=1T").cacheSize == 1 << 40)
        #expect(try parsed("cache_size=1.5G").cacheSize == 3 << 29)
        #expect(try parsed("cache_size=64KB").cacheSize == 64 << 10)
        #expect(try parsed("cache_size=4096").cacheSize == 4096)
        #expect(try parsed("cache_size=10g").cacheSize == 10 << 30)
        #expect(try parsed("upload_limit=1M").uploadLimit == 1 << 20)
        #expect(try parsed("upload_limit=500K").uploadLimit == 500 << 10)
        #expect(try parsed("upload_limit=12345").uploadLimit == 12345)
    }

    @Test("kernel flags go to the kernel in the order given, noatime among them")
    func kernelFlags() throws {
        #expect(try parsed("nosuid,noexec,nodev,sync,dirsync").kernelFlags == ["nosuid", "noexec", "nodev", "sync", "dirsync"])
        #expect(try parsed("exec,suid,dev").kernelFlags == ["exec", "suid", "dev"])
        #expect(try parsed("noexec,noatime,ro,nosuid").kernelFlags == ["noexec", "noatime", "nosuid"])
        var others = try parsed("nodev,noexec")
        others.kernelFlags = []
        #expect(others == MountOptions(), "kernel flags change nothing else")
    }

    @Test("options for mount(8) and systemd are accepted and change nothing")
    func ignored() throws {
        let list = "defaults,auto,noauto,user,nouser,users,nofail,_netdev,async,x-systemd.automount,x-systemd.idle-timeout=10min"
        #expect(try parsed(list) == MountOptions())
        #expect(try parsed("ro," + list + ",greedy") == parsed("ro,greedy"))
    }

    @Test("comment= (fstab notes for systemd) is accepted and changes nothing")
    func comment() throws {
        #expect(try parsed("comment=systemd.automount") == MountOptions())
        #expect(try parsed("ro,comment=x,greedy") == parsed("ro,greedy"))
    }

    @Test("an unknown option is refused, naming it")
    func unknown() {
        for (list, name) in [
            ("frobnicate", "frobnicate"), ("ro,frobnicate,rw", "frobnicate"), ("colour=blue", "colour"), ("RO", "RO"),
            // A kernel flag takes no value; a switch given a value is not a kernel flag either.
            ("noexec=1", "noexec"), ("cache_sizes=1G", "cache_sizes"),
        ] {
            let error = refusal(list)
            guard case .unknown(let named)? = error else {
                Issue.record("'\(list)': \(String(describing: error))")
                continue
            }
            #expect(named == name)
            #expect(error?.description.contains("'\(name)'") == true)
        }
    }

    @Test("an option that needs a value is refused without one, naming it")
    func missingValues() {
        for name in ["store", "cache", "device", "poll", "uid", "gid", "umask", "cache_size", "upload_limit", "upload_wait", "offline_wait"] {
            for list in [name, name + "="] {
                let error = refusal(list)
                guard case .missingValue(let named)? = error else {
                    Issue.record("'\(list)': \(String(describing: error))")
                    continue
                }
                #expect(named == name)
                #expect(error?.description.contains(name) == true)
            }
        }
    }

    @Test("a bad value is refused, naming the option as given")
    func badValues() {
        for list in [
            "poll=soon", "poll=-1s", "poll=1e300s", "poll=2x", "upload_wait=forever", "offline_wait=-5",
            "uid=abc", "uid=-1", "uid=4294967296", "gid=1.5", "umask=8", "umask=0x12",
            "cache_size=lots", "cache_size=-5M", "cache_size=1.5", "upload_limit=0", "upload_limit=0K", "upload_limit=fast",
        ] {
            let error = refusal(list)
            guard case .badValue(let option, _)? = error else {
                Issue.record("'\(list)': \(String(describing: error))")
                continue
            }
            #expect(option == list)
            #expect(error?.description.contains("'\(list)'") == true)
        }
    }
}
