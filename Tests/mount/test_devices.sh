# Two devices of one store, one after the other: placeholders, then downloads on read.
test_placeholders_download_on_read() {
    mount_device a
    mkdir "$T/a/Documents"
    head -c 3000000 /dev/urandom > "$T/source.bin"
    cp "$T/source.bin" "$T/a/Documents/data.bin"
    echo small > "$T/a/Documents/small.txt"
    sync_wait a
    assert_eq "$(xattr isUploaded "$T/a/Documents/data.bin")" 1 "uploaded on a"
    mount_device b
    local f="$T/b/Documents/data.bin"
    assert_eq "$(stat -c %s "$f")" 3000000 "size before download"
    assert_eq "$(xattr isDownloaded "$f")" 0
    assert_eq "$(xattr downloadingStatus "$f")" notDownloaded
    assert_eq "$(xattr percentDownloaded "$f")" 0
    assert_eq "$(xattr isUploaded "$f")" 1
    assert_eq "$(sha256sum < "$f")" "$(sha256sum < "$T/source.bin")" "content"
    assert_eq "$(xattr isDownloaded "$f")" 1
    assert_eq "$(xattr downloadingStatus "$f")" current
    assert_eq "$(xattr percentDownloaded "$f")" 100
    # Every attribute of the table is listed, and unknown ones are ENODATA.
    assert_eq "$(getfattr -d "$f" 2>/dev/null | grep -c '^user.icloud.')" 11 "listed attributes"
    getfattr -n user.icloud.noSuchThing "$f" 2>&1 | grep -q "No such attribute"
    getfattr -n user.noSuchThing "$f" 2>&1 | grep -q "No such attribute"
    # Other namespaces do not exist here (so ls -l stops asking for SELinux labels and ACLs).
    getfattr -n security.selinux "$f" 2>&1 | grep -q "Operation not supported"
    getfattr -n system.posix_acl_access "$f" 2>&1 | grep -q "Operation not supported"
    assert_eq "$(xattr itemIdentifier "$f")" "$(xattr itemIdentifier "$T/a/Documents/data.bin")"
    assert_eq "$(xattr percentUploaded "$T/b")" 100 "container progress"
}

# A change on one mounted device reaches another mounted device.
test_remote_changes_reach_mounted_device() {
    mount_device a
    mount_device b
    echo first > "$T/a/shared.txt"
    sync_wait a
    eventually 'test -f "$T/b/shared.txt"'
    assert_eq "$(cat "$T/b/shared.txt")" first
    echo second > "$T/a/shared.txt"
    sync_wait a
    eventually 'grep -q second "$T/b/shared.txt"'
    mv "$T/a/shared.txt" "$T/a/renamed.txt"
    sync_wait a
    eventually 'test -f "$T/b/renamed.txt"'
    test ! -e "$T/b/shared.txt"
}

# Unmounting with uploads pending keeps them; the next mount of that cache uploads them.
test_unmount_with_pending_uploads() {
    mount_device a
    mv "$T/store" "$T/store.away"
    echo "written while the store was away" > "$T/a/pending.txt"
    assert_eq "$(xattr isUploaded "$T/a/pending.txt")" 0
    umount "$T/a"
    mv "$T/store.away" "$T/store"
    mount_device a
    sync_wait a
    mount_device b
    assert_eq "$(cat "$T/b/pending.txt")" "written while the store was away"
}

# kill -9 of the daemon after fsync and before upload: the data is there after remount.
test_kill_after_fsync() {
    mount_device a
    echo base > "$T/a/base.txt"
    sync_wait a
    mv "$T/store" "$T/store.away"
    python3 - "$T/a/fsynced.bin" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"durable " * 100000)
os.fsync(fd)
os.close(fd)
PY
    kill -9 "$(daemon_of a)"
    fusermount3 -uz "$T/a" || umount -l "$T/a"
    mv "$T/store.away" "$T/store"
    mount_device a
    python3 -c "import sys; assert open(sys.argv[1],'rb').read() == b'durable ' * 100000" "$T/a/fsynced.bin"
    sync_wait a
    mount_device b
    python3 -c "import sys; assert open(sys.argv[1],'rb').read() == b'durable ' * 100000" "$T/b/fsynced.bin"
}

# Without fsync, created files and folders are recorded in the cache a few milliseconds
# after the calls (docs/SEMANTICS.md): half a second later they survive a kill -9.
test_kill_shortly_after_close() {
    mount_device a
    mv "$T/store" "$T/store.away"
    mkdir "$T/a/dir"
    for i in 1 2 3 4 5; do echo "file $i" > "$T/a/dir/f$i.txt"; done
    mv "$T/a/dir/f5.txt" "$T/a/dir/moved.txt"
    sleep 0.5
    kill -9 "$(daemon_of a)"
    fusermount3 -uz "$T/a" || umount -l "$T/a"
    mv "$T/store.away" "$T/store"
    mount_device a
    assert_eq "$(ls "$T/a/dir" | tr '\n' ' ')" "f1.txt f2.txt f3.txt f4.txt moved.txt " "after the kill"
    assert_eq "$(cat "$T/a/dir/f3.txt")" "file 3"
    sync_wait a
    mount_device b
    assert_eq "$(cat "$T/b/dir/moved.txt")" "file 5" "on device b"
}

# New files' cache files are made ahead under their final names: after a kill -9 with some
# made and not taken (and a create perhaps too recent to be recorded), the next start
# removes the files nothing names; an unmount removes the ones it made ahead
# (docs/ARCHITECTURE.md).
test_cache_files_made_ahead_do_not_outlive_a_kill() {
    content_files() { find "$T/cache-a/content" -type f ! -name '.*' | wc -l; }
    mount_device a
    mkdir "$T/a/dir"
    for i in $(seq 1 40); do echo "file $i" > "$T/a/dir/f$i.txt"; done
    sleep 0.5
    echo "perhaps too late" > "$T/a/dir/last.txt"
    kill -9 "$(daemon_of a)"
    fusermount3 -uz "$T/a" || umount -l "$T/a"
    local left; left=$(content_files)
    if [ "$left" -le 41 ]; then
        echo "    expected the kill to leave files made ahead, found $left cache files"
        return 1
    fi
    mount_device a
    assert_eq "$(ls "$T/a/dir" | grep -c '^f')" "40" "files after the kill"
    assert_eq "$(cat "$T/a/dir/f17.txt")" "file 17"
    local files daemon; files=$(ls "$T/a/dir" | wc -l); daemon=$(daemon_of a)
    umount "$T/a"
    eventually "! kill -0 $daemon"  # the daemon's last work follows the unmount
    # At most one per file: most of a run of small files rest in the staging log instead.
    local cached; cached=$(content_files)
    if [ "$cached" -gt "$files" ]; then
        echo "    $cached cache files after an unmount, for $files files: files made ahead outlived it"
        return 1
    fi
}

# A run of small files one process makes has no cache file per file: their bytes rest in the
# staging log from their close until something opens them (docs/ARCHITECTURE.md, "The path
# of a small file"). What such a file meets while written (a read, a write elsewhere, growing
# large, fsync, a truncate, an open by another process) moves it into a cache file first.
# Every file reads back whole here, after a remount, and on a new device.
test_a_run_of_small_files_rests_in_the_staging_log() {
    mount_device a
    mkdir -p "$T/a/run" "$T/expected"
    seeded_python "$T/a/run" "$T/expected" <<'PY'
def keep(name, data):
    with open(os.path.join(expected, name), "wb") as f:
        f.write(data)
for i in range(60):  # the run: small files written in order, some empty or all zeros
    data = rng.randbytes(rng.randrange(0, 9000)) if i % 10 else bytes(rng.choice([0, 1, 5000]))
    with open(os.path.join(folder, f"s{i}"), "wb") as f:
        f.write(data[:100]); f.write(data[100:])
    keep(f"s{i}", data)
for kind in ("seek", "large", "readback", "fsync", "truncate", "other-open"):
    for i in range(3):  # the run goes on between them
        data = rng.randbytes(500)
        with open(os.path.join(folder, f"{kind}-pad{i}"), "wb") as f:
            f.write(data)
        keep(f"{kind}-pad{i}", data)
    path = os.path.join(folder, kind)
    data = bytearray(rng.randbytes(4000))
    with open(path, "w+b") as f:
        f.write(data)
        if kind == "seek":
            f.flush(); f.seek(1000); f.write(b"X" * 10); data[1000:1010] = b"X" * 10
        elif kind == "large":
            more = rng.randbytes(400_000); f.flush(); f.write(more); data += more
        elif kind == "readback":
            f.flush(); f.seek(0); assert f.read() == data
        elif kind == "fsync":
            f.flush(); os.fsync(f.fileno())
        elif kind == "truncate":
            f.flush(); f.truncate(1500); del data[1500:]
        elif kind == "other-open":
            f.flush()
            with open(path, "rb") as other:
                assert other.read() == data
            f.write(b"tail"); data += b"tail"
    keep(kind, bytes(data))
PY
    # (Cache files are made ahead, so their count says little: the log's size says it.)
    local run logged
    run=$(cat "$T/expected"/s* | wc -c)
    logged=$(cat "$T/cache-a/staging"/*.log | wc -c)
    if [ "$logged" -lt $((run * 9 / 10)) ]; then
        echo "    $logged bytes in the staging log for a run of $run: the run did not rest there"
        return 1
    fi
    for f in "$T/expected"/*; do cmp "$f" "$T/a/run/$(basename "$f")"; done
    sync_wait a
    fusermount3 -u "$T/a"
    mount_device a
    for f in "$T/expected"/*; do cmp "$f" "$T/a/run/$(basename "$f")"; done
    mount_device b
    for f in "$T/expected"/*; do cmp "$f" "$T/b/run/$(basename "$f")"; done
}

# A daemon stopped (SIGKILL, ICLOUDFS_CRASH_AT) right after its staging log's pass compacted
# the first 64 MiB segment, mostly deleted (its pieces moved to the log's end, segments no
# record names removed), maybe before the records of the moves were saved: after a remount
# the segment goes (if it had not), and every file reads back whole from where its record
# says, here and on device b.
test_a_staging_log_compaction_stopped_loses_nothing() {
    (export ICLOUDFS_CRASH_AT=staging-compacted; mount_device a)
    mkdir -p "$T/a/run" "$T/expected"
    seeded_python "$T/a/run" "$T/expected" <<'PY'
for i in range(1100):  # 64 KiB each: the first 1,024 fill the first segment
    data = rng.randbytes(65536)
    with open(os.path.join(folder, f"f{i:04d}"), "wb") as f:
        f.write(data)
    if i % 10 == 0 or i >= 1024:
        with open(os.path.join(expected, f"f{i:04d}"), "wb") as f:
            f.write(data)
PY
    local first daemon
    first=$(ls "$T/cache-a/staging" | head -n1)
    sync_wait a
    daemon=$(daemon_of a)
    # The compaction may come (and stop the daemon) before the last of these deletes.
    for f in "$T"/a/run/*; do [ -e "$T/expected/$(basename "$f")" ] || rm "$f" 2>/dev/null || break; done
    eventually "! kill -0 $daemon"  # stopped at the crash point: it compacted
    fusermount3 -uz "$T/a"
    mount_device a
    for f in "$T"/a/run/*; do [ -e "$T/expected/$(basename "$f")" ] || rm "$f"; done
    # Before any read: an open moves a file out of the log, which would empty it too.
    eventually "[ ! -e '$T/cache-a/staging/$first' ]"
    for f in "$T/expected"/*; do cmp "$f" "$T/a/run/$(basename "$f")"; done
    sync_wait a
    mount_device b
    for f in "$T/expected"/*; do cmp "$f" "$T/b/run/$(basename "$f")"; done
}
