# Inputs nobody here wrote: hostile offsets, names as bytes, permissions (docs/SEMANTICS.md).

test_seek_past_the_end_of_a_folder_lists_nothing() {
    mount_device a
    mkdir "$T/a/d"
    touch "$T/a/d/one" "$T/a/d/two"
    python3 - "$T/a/d" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
for offset in (1 << 40, 4, 2**62):  # 4: past `.`, `..`, one, two
    os.lseek(fd, offset, os.SEEK_SET)
    # getdents64 through scandir of the fd would rewind: read the raw syscall instead.
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(4096)
    n = libc.syscall(217, fd, buffer, 4096)  # getdents64
    assert n == 0, (offset, n, ctypes.get_errno())
os.close(fd)
PY
    assert_eq "$(ls "$T/a/d" | tr '\n' ' ')" "one two "
}

test_names_are_kept_as_bytes() {
    mount_device a
    mount_device b
    # café in NFC (é is one code point) and in NFD (e + combining acute): two files.
    printf nfc > "$T/a/$(printf 'caf\xc3\xa9')"
    printf nfd > "$T/a/$(printf 'cafe\xcc\x81')"
    assert_eq "$(ls "$T/a" | wc -l)" 2
    assert_eq "$(cat "$T/a/$(printf 'caf\xc3\xa9')")" nfc
    assert_eq "$(cat "$T/a/$(printf 'cafe\xcc\x81')")" nfd
    # Names that are not UTF-8 (Latin-1, random bytes, the private-use characters that stand
    # for such bytes in the store) are kept as they are, and reach the other device so.
    printf latin > "$T/a/$(printf 'a\xe9')"
    mkdir "$T/a/$(printf 'b\xe8\xff')"
    printf pua > "$T/a/$(printf 'c\xef\x9e\x80')"
    ln -s "$(printf 't\xe9')" "$T/a/$(printf 'l\xfe')"
    (cd "$T/a" && ls -A | od -An -c | tr -s ' ' > "$T/a.names")
    assert_eq "$(ls "$T/a" | wc -l)" 6
    sync_wait a
    eventually 'test "$(ls "$T/b" | wc -l)" = 6'
    (cd "$T/b" && ls -A | od -An -c | tr -s ' ' > "$T/b.names")
    diff "$T/a.names" "$T/b.names"
    assert_eq "$(cat "$T/b/$(printf 'cafe\xcc\x81')")" nfd
    assert_eq "$(cat "$T/b/$(printf 'caf\xc3\xa9')")" nfc
    assert_eq "$(cat "$T/b/$(printf 'a\xe9')")" latin
    assert_eq "$(cat "$T/b/$(printf 'c\xef\x9e\x80')")" pua
    test -d "$T/b/$(printf 'b\xe8\xff')"
    assert_eq "$(readlink "$T/b/$(printf 'l\xfe')" | od -An -c | tr -s ' ')" "$(printf 't\xe9\n' | od -An -c | tr -s ' ')"
    # 255 bytes is the limit, counted in bytes.
    touch "$T/a/$(printf 'x%.0s' $(seq 200))$(printf '\xe9%.0s' $(seq 55))"
    fails touch "$T/a/$(printf 'y%.0s' $(seq 200))$(printf '\xe9%.0s' $(seq 56))" 2>/dev/null
}

test_cache_is_private() {
    (umask 022 && mount_device a)
    echo secret > "$T/a/f"
    "$BIN/icloudfs" sync --wait "$T/a"
    assert_eq "$(stat -c %a "$T/cache-a")" 700
    local readable
    readable=$(find "$T/cache-a" -perm /044 -print)
    assert_eq "$readable" "" "files others can read"
}

test_allow_other_implies_default_permissions() {
    mount_device a allow_other
    grep " $T/a " /proc/mounts | grep -q default_permissions
    echo private > "$T/a/f"
    chmod 600 "$T/a/f"
    id nobody >/dev/null 2>&1 || skip "no user nobody"
    chmod o+x "$WORK" "$T"  # mktemp made them 0700: let nobody reach the mount
    fails setpriv --reuid=nobody --regid=nogroup --clear-groups cat "$T/a/f" 2>/dev/null
}

test_bad_option_values_fail_the_mount_with_one_line() {
    mkdir -p "$T/x"
    for option in cache_size=infG cache_size=1e300T poll=1e300s poll=nan upload_wait=infs; do
        fails "$BIN/icloudfs" mount "$CONTAINER" "$T/x" -o "store=$T/store,cache=$T/cache-x,$option" 2>"$T/err"
        assert_eq "$(wc -l <"$T/err")" 1 "$option: $(cat "$T/err")"
        grep -q "mount option '${option}'" "$T/err"
        fails grep -q " $T/x " /proc/mounts
    done
}

test_kernel_flags_reach_the_kernel() {
    mount_device a noexec,nosuid,nodev
    grep " $T/a " /proc/mounts | grep -q "nosuid,nodev,noexec"
    printf '#!/bin/sh\necho ran\n' > "$T/a/script"
    chmod 755 "$T/a/script"
    fails "$T/a/script" 2>/dev/null
}

test_full_cache_disk_gives_enospc_and_recovers() {
    mkdir -p "$T/cache-a"
    mount -t tmpfs -o size=24m tmpfs "$T/cache-a"
    mount_device a
    local status=0
    dd if=/dev/urandom of="$T/a/big" bs=1M count=64 conv=fsync status=none 2>"$T/err" || status=$?
    assert_eq "$status" 1 "dd should fail"
    grep -q "No space left on device" "$T/err" || { cat "$T/err"; false; }
    rm "$T/a/big"
    sync_wait a
    # Space is back (at once, or once big's close, queued when dd ended, has run): new files
    # can be written and read, and reach the store.
    eventually "[ \$(df --output=avail -B1 '$T/cache-a' | tail -n1) -gt 12000000 ]"
    echo after > "$T/a/after"
    dd if=/dev/urandom of="$T/a/medium" bs=1M count=4 conv=fsync status=none
    assert_eq "$(cat "$T/a/after")" after
    sync_wait a
    mount_device b
    eventually 'test "$(cat "$T/b/after")" = after'
    cmp "$T/a/medium" "$T/b/medium"
    local daemon
    daemon=$(daemon_of a)
    umount "$T/a"
    eventually '! kill -0 "$daemon"'
    umount "$T/cache-a"
}

test_corrupted_chunk_is_never_served() {
    mount_device a
    head -c 300000 /dev/urandom > "$T/a/precious"
    sync_wait a
    local pack
    pack=$(find "$T/store/$CONTAINER/packs" -type f | head -n1)
    # The file's one chunk is the pack's first bytes. Same size, other bytes: only the
    # hash can tell.
    head -c 300000 /dev/urandom | dd of="$pack" conv=notrunc status=none
    mount_device b
    eventually 'test -f "$T/b/precious"'
    fails cat "$T/b/precious" >/dev/null 2>"$T/err"
    grep -q "Input/output error" "$T/err"
    xattr downloadingError "$T/b/precious" | grep -q "^corruptChunk"
    assert_eq "$(xattr isDownloaded "$T/b/precious")" 0
}

test_kill_9_during_uploads_loses_no_acknowledged_byte() {
    mkdir -p "$T/expected"
    for round in $(seq 1 20); do
        mount_device a upload_limit=4M
        head -c $((RANDOM * 40 + 1)) /dev/urandom > "$T/expected/f$round"
        # Acknowledged: written and fsynced (dd conv=fsync), or renamed into place after it.
        dd if="$T/expected/f$round" of="$T/a/tmp$round" bs=64k conv=fsync status=none
        mv "$T/a/tmp$round" "$T/a/f$round"
        sync "$T/a/f$round"
        sleep "0.$((RANDOM % 4))"
        kill -9 "$(daemon_of a)"
        fusermount3 -u "$T/a" 2>/dev/null || umount -l "$T/a"
    done
    mount_device a
    for round in $(seq 1 20); do cmp "$T/a/f$round" "$T/expected/f$round"; done
    sync_wait a
    mount_device b
    for round in $(seq 1 20); do cmp "$T/b/f$round" "$T/expected/f$round"; done
    assert_eq "$(ls "$T/b" | wc -l)" 20
}

test_store_vanishing_mid_upload_loses_nothing() {
    mount_device a upload_limit=4M
    head -c 12000000 /dev/urandom > "$T/big"
    cp "$T/big" "$T/a/big"
    # Mid-upload (12 MB at 4 MB/s): the store goes away for 2 s, then returns.
    eventually 'test "$(xattr isUploading "$T/a/big")" = 1'
    sleep 1
    mv "$T/store" "$T/store.away"
    sleep 2
    mv "$T/store.away" "$T/store"
    sync_wait a
    mount_device b
    eventually 'test -f "$T/b/big"'
    cmp "$T/b/big" "$T/big"
}

test_lost_cache_bytes_fail_one_change_not_the_queue() {
    mount_device a
    mv "$T/store" "$T/store.away"
    head -c 300000 /dev/urandom > "$T/a/damaged"
    echo after > "$T/a/after"
    # Queued (an unmount queues what was written), the bytes are lost before they are
    # uploaded (a damaged disk, a cache cleaned by hand): same length, other bytes, no copy
    # aside.
    local id daemon
    id=$(xattr itemIdentifier "$T/a/damaged")
    daemon=$(daemon_of a)
    umount "$T/a"
    eventually '! kill -0 "$daemon"'
    head -c 300000 /dev/zero > "$T/cache-a/content/${id: -1}/$id"
    rm -rf "$T/cache-a/staged"
    mv "$T/store.away" "$T/store"
    mount_device a
    # The queue drains (it used to block for good on the lost chunk), and sync says what
    # did not make it.
    fails sync_wait a 2>"$T/err"
    grep -q "contentLost" "$T/err"
    grep -q "damaged" "$T/err"
    xattr uploadingError "$T/a/damaged" | grep -q "^contentLost"
    assert_eq "$(xattr isUploaded "$T/a/damaged")" 0
    mount_device b
    eventually 'test -f "$T/b/after"'
    assert_eq "$(cat "$T/b/after")" after
    fails cat "$T/b/damaged" >/dev/null
    # Writing the file again heals it.
    head -c 1000 /dev/urandom > "$T/a/damaged"
    sync_wait a
    eventually 'cmp "$T/a/damaged" "$T/b/damaged"'
}

test_pulled_changes_that_cannot_be_recorded_are_pulled_again() {
    mkdir -p "$T/cache-b"
    mount -t tmpfs -o size=16m tmpfs "$T/cache-b"
    mount_device a
    mount_device b
    echo one > "$T/a/one"
    sync_wait a
    eventually 'test -f "$T/b/one"'
    # b's cache disk fills up but for 64 KiB (room for its log), its reserve gone too: the
    # entries it pulls next cannot be recorded.
    rm "$T/cache-b/reserve"
    fallocate -l $(($(df --output=avail -B1 "$T/cache-b" | tail -n1) - 65536)) "$T/cache-b/filler"
    for i in $(seq 1 300); do echo "$i" > "$T/a/x$i"; done
    sync_wait a
    eventually 'grep -q "cannot record pulled changes" "$T/cache-b/icloudfs.log"'
    rm "$T/cache-b/filler"
    echo two > "$T/a/two"
    sync_wait a
    eventually 'test -f "$T/b/two" && test -f "$T/b/x300"'
    # What b shows, its database holds: a remount shows the same.
    local daemon
    daemon=$(daemon_of b)
    umount "$T/b"
    eventually '! kill -0 "$daemon"'
    mount_device b offline
    assert_eq "$(ls "$T/b" | wc -l)" 302
    umount "$T/b"
    eventually '! kill -0 "$(daemon_of b)"'
    umount "$T/cache-b"
}

test_cached_copy_gone_is_downloaded_again() {
    mount_device a
    head -c 500000 /dev/urandom > "$T/a/photo"
    sync_wait a
    mount_device b
    eventually 'test -f "$T/b/photo"'
    cmp "$T/b/photo" "$T/a/photo"
    local id daemon
    id=$(xattr itemIdentifier "$T/b/photo")
    daemon=$(daemon_of b)
    umount "$T/b"
    eventually '! kill -0 "$daemon"'
    # The cached copy is gone while its record stays (a crash between dropping a deleted
    # file's bytes and recording the delete, a cache cleaned by hand).
    rm "$T/cache-b/content/${id: -1}/$id"
    mount_device b
    cmp "$T/b/photo" "$T/a/photo"
}

test_reads_are_read_ahead() {
    mount_device a
    # 4 MiB of read-ahead (root raises it through sysfs).
    assert_eq "$(cat "/sys/class/bdi/$(mountpoint -d "$T/a")/read_ahead_kb")" 4096 "read-ahead"
    # Also at a mount point that mountinfo escapes (a space is \040, a backslash \134).
    mkdir -p "$T/c d\\e"
    "$BIN/icloudfs" mount "$CONTAINER" "$T/c d\\e" -o "store=$T/store,cache=$T/cache-c,device=c"
    assert_eq "$(cat "/sys/class/bdi/$(mountpoint -d "$T/c d\\e")/read_ahead_kb")" 4096 "read-ahead at an escaped path"
    fusermount3 -u "$T/c d\\e"
    head -c 40M /dev/urandom > "$T/source"
    cp "$T/source" "$T/a/big"
    sync_wait a
    # A cold read on another device: chunks copied from the directory store, checked, whole.
    mount_device b
    sync
    echo 3 > /proc/sys/vm/drop_caches
    cmp "$T/source" "$T/b/big"
    assert_eq "$(xattr isDownloaded "$T/b/big")" 1
}

# A full cache disk reached through fallocate, then filled further by attributes, comes back
# when the big file is removed: its delete is recorded and its copy freed even on a full disk;
# then every operation works again without a remount, the files and their attributes reach
# another device, and the next mount starts.
test_full_cache_disk_by_fallocate_recovers_without_remount() {
    mkdir -p "$T/cache-a"
    mount -t tmpfs -o size=48m tmpfs "$T/cache-a"
    mount_device a
    mkdir "$T/a/files"
    for i in $(seq 1 64); do touch "$T/a/files/f$i"; done
    sync_wait a
    local free
    free=$(df --output=avail -B1 "$T/a" | tail -n1)
    fallocate -l $((free - 524288)) "$T/a/big"
    local value
    value=$(head -c 45000 /dev/urandom | base64 -w0 | head -c 60000)
    local set=0
    for i in $(seq 1 64); do
        setfattr -n user.test -v "$value" "$T/a/files/f$i" 2>/dev/null && set=$((set + 1))
    done
    echo "    $set of 64 attributes set on a full disk"
    rm "$T/a/big"
    eventually "[ \$(df --output=avail -B1 '$T/cache-a' | tail -n1) -gt 30000000 ]"
    dd if=/dev/urandom of="$T/a/after" bs=1M count=8 conv=fsync status=none
    echo small > "$T/a/small"
    sync_wait a
    mount_device b
    eventually "[ -f '$T/b/after' ]"
    cmp "$T/a/after" "$T/b/after"
    for i in $(seq 1 64); do
        local here there
        here=$(getfattr --only-values -n user.test "$T/a/files/f$i" 2>/dev/null | md5sum)
        there=$(getfattr --only-values -n user.test "$T/b/files/f$i" 2>/dev/null | md5sum)
        assert_eq "$there" "$here" "attribute of f$i"
    done
    fails test -e "$T/b/big"
    umount "$T/a"
    mount_device a
    assert_eq "$(cat "$T/a/small")" small
    local daemon
    daemon=$(daemon_of a)
    umount "$T/a"
    eventually '! kill -0 "$daemon"'
    umount "$T/cache-a"
}
