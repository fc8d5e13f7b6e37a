# Seeing and steering what is local: download, evict, pin, greedy, the cache bound, offline.

# write_files DEVICE N SIZE: files f1..fN of SIZE bytes (random) in the device's root.
write_files() {
    for i in $(seq 1 "$2"); do head -c "$3" /dev/urandom > "$T/$1/f$i"; done
    sync_wait "$1"
}

test_download_evict_commands() {
    mount_device a
    write_files a 2 3000000
    mount_device b
    local f="$T/b/f1"
    "$BIN/icloudfs" download "$f" > "$T/out"
    grep -q "downloaded" "$T/out"
    assert_eq "$(xattr isDownloaded "$f")" 1 "after download"
    local size mtime
    size=$(stat -c %s "$f")
    mtime=$(stat -c %Y "$f")
    "$BIN/icloudfs" evict "$f"
    assert_eq "$(xattr isDownloaded "$f")" 0 "after evict"
    assert_eq "$(xattr downloadingStatus "$f")" notDownloaded
    assert_eq "$(stat -c '%s %Y' "$f")" "$size $mtime" "size and date stay"
    assert_eq "$(sha256sum < "$f")" "$(sha256sum < "$T/a/f1")" "content after re-download"
    # The attribute forms, and folders with -r.
    setfattr -n user.icloud.evict -v 1 "$f"
    assert_eq "$(xattr isDownloaded "$f")" 0
    setfattr -n user.icloud.download -v 1 "$f"
    eventually 'test "$(xattr isDownloaded "$f")" = 1'
    fails "$BIN/icloudfs" download "$T/b" 2>"$T/err"
    grep -q "is a folder (use -r)" "$T/err"
    "$BIN/icloudfs" evict -r "$T/b"
    assert_eq "$(xattr percentDownloaded "$T/b")" 0 "everything evicted"
    "$BIN/icloudfs" status "$T/b" > "$T/status"
    grep -q "notDownloaded.*$T/b/f2" "$T/status"
    "$BIN/icloudfs" download -r "$T/b" > /dev/null
    assert_eq "$(xattr isDownloaded "$T/b")" 1 "everything downloaded"
}

test_evict_refused_while_dirty_or_open() {
    mount_device a
    echo uploaded > "$T/a/clean"
    sync_wait a
    mv "$T/store" "$T/store.away"
    echo "not uploaded yet" > "$T/a/dirty"
    fails setfattr -n user.icloud.evict -v 1 "$T/a/dirty" 2>"$T/err"
    grep -q "busy" "$T/err"
    fails "$BIN/icloudfs" evict "$T/a/dirty" 2>"$T/err"
    grep -q "changes not yet uploaded" "$T/err"
    exec 3<"$T/a/clean"
    fails setfattr -n user.icloud.evict -v 1 "$T/a/clean" 2>"$T/err"
    grep -q "busy" "$T/err"
    exec 3<&-
    mv "$T/store.away" "$T/store"
    sync_wait a
    "$BIN/icloudfs" evict "$T/a/dirty" "$T/a/clean"
    assert_eq "$(cat "$T/a/dirty")" "not uploaded yet"
}

test_pin_and_cache_bound() {
    mount_device a
    write_files a 4 2000000
    mount_device b cache_size=3M
    "$BIN/icloudfs" pin "$T/b/f1"
    eventually 'test "$(xattr isDownloaded "$T/b/f1")" = 1'
    assert_eq "$(xattr isPinned "$T/b/f1")" 1
    for i in 2 3 4; do
        assert_eq "$(sha256sum < "$T/b/f$i")" "$(sha256sum < "$T/a/f$i")" "f$i"
    done
    # Beyond the bound, the least recently used unpinned files go; the pinned one stays.
    eventually 'test "$(cat "$T/b/f2" > /dev/null; xattr isDownloaded "$T/b/f3")" = 0'
    assert_eq "$(xattr isDownloaded "$T/b/f1")" 1 "pinned stays"
    "$BIN/icloudfs" unpin "$T/b/f1"
    assert_eq "$(xattr isPinned "$T/b/f1")" 0
    # A pinned folder keeps what arrives later downloaded.
    mkdir "$T/a/keep"
    sync_wait a
    eventually 'test -d "$T/b/keep"'
    "$BIN/icloudfs" pin -r "$T/b/keep"
    head -c 100000 /dev/urandom > "$T/a/keep/new"
    sync_wait a
    eventually 'test "$(xattr isDownloaded "$T/b/keep/new")" = 1'
}

# A sparse file takes only its written blocks in the cache: a 256 MiB file with 1 MiB written
# does not push a 64 MB bound over and evict everything (it counted 256 MiB before).
test_sparse_files_count_their_written_blocks_against_the_cache_bound() {
    mount_device a cache_size=64M
    head -c 30000000 /dev/urandom > "$T/a/real"
    truncate -s 256M "$T/a/sparse"
    head -c 1048576 /dev/urandom | dd of="$T/a/sparse" bs=1M seek=128 conv=notrunc status=none
    sync_wait a
    mount_device b cache_size=64M
    assert_eq "$(sha256sum < "$T/b/real")" "$(sha256sum < "$T/a/real")"
    assert_eq "$(sha256sum < "$T/b/sparse")" "$(sha256sum < "$T/a/sparse")"
    sleep 2.5  # the bound is enforced every second
    for device in a b; do
        assert_eq "$(xattr isDownloaded "$T/$device/real")" 1 "real stays on $device"
        assert_eq "$(xattr isDownloaded "$T/$device/sparse")" 1 "sparse stays on $device"
    done
    local used
    used=$(getfattr --only-values -n user.icloud.cacheUsage "$T/b" | cut -d' ' -f1)
    [ "$used" -lt 40000000 ] || { echo "    cache usage $used counts the holes"; return 1; }
}

test_greedy_downloads_everything() {
    mount_device a
    mkdir "$T/a/sub"
    write_files a 3 1000000
    head -c 500000 /dev/urandom > "$T/a/sub/deep"
    sync_wait a
    mount_device b greedy
    eventually 'test "$(xattr isDownloaded "$T/b")" = 1'
    head -c 700000 /dev/urandom > "$T/a/later"
    sync_wait a
    eventually 'test "$(xattr isDownloaded "$T/b/later")" = 1'
    assert_eq "$(sha256sum < "$T/b/sub/deep")" "$(sha256sum < "$T/a/sub/deep")"
}

test_offline_reads_and_queued_writes() {
    mount_device a
    write_files a 2 1000000
    mount_device b offline_wait=1s
    cat "$T/b/f1" > /dev/null
    mv "$T/store" "$T/store.away"
    # Downloaded files read normally; a placeholder fails once offline_wait has passed,
    # with the reason.
    assert_eq "$(sha256sum < "$T/b/f1")" "$(sha256sum < "$T/a/f1")"
    local start end
    start=$(date +%s%N)
    fails cat "$T/b/f2" > /dev/null 2>"$T/err"
    end=$(date +%s%N)
    grep -q "Input/output error" "$T/err"
    [ $(((end - start) / 1000000)) -ge 900 ]
    echo "    measured: a placeholder read failed after $(((end - start) / 1000000)) ms"
    [ $(((end - start) / 1000000)) -lt 5000 ]
    xattr downloadingError "$T/b/f2" | grep -q "^serverUnavailable"
    # Changes are accepted and queued, with the reason nothing moves.
    echo "offline write" > "$T/b/new.txt"
    mv "$T/b/f1" "$T/b/f1-renamed"
    rm "$T/b/f2"
    assert_eq "$(xattr isUploaded "$T/b/new.txt")" 0
    eventually 'test -n "$(xattr uploadingError "$T/b/new.txt")"'
    # The store returns: the queue drains by itself and the errors clear.
    mv "$T/store.away" "$T/store"
    eventually 'test "$(xattr isUploaded "$T/b")" = 1'
    fails xattr uploadingError "$T/b/new.txt"
    eventually 'test -f "$T/a/new.txt"'
    assert_eq "$(ls "$T/a")" "$(printf 'f1-renamed\nnew.txt')"
    # A mount may start offline from its cache.
    umount "$T/b"
    mount_device b offline
    assert_eq "$(cat "$T/b/new.txt")" "offline write"
}

test_network_blip_does_not_fail_reads() {
    mount_device a
    write_files a 1 3000000
    sync_wait a
    mount_device b
    eventually 'test -f "$T/b/f1"'
    mv "$T/store" "$T/store.away"
    cat "$T/b/f1" > "$T/copy" 2>"$T/err" &
    local reader=$!
    # While the store is away the read waits, and says why.
    eventually 'xattr downloadingError "$T/b/f1" | grep -q "^serverUnavailable"'
    kill -0 "$reader"
    mv "$T/store.away" "$T/store"
    wait "$reader"
    cmp "$T/copy" "$T/a/f1"
    fails xattr downloadingError "$T/b/f1"
}

# Thumbnailers and indexers (by program name) cannot download by reading a placeholder;
# downloaded files read normally; status counts the refusals; the list is an option.
test_nohydrate_refuses_thumbnailers_placeholders() {
    mount_device a
    echo photo > "$T/a/photo.jpg"
    echo other > "$T/a/other.jpg"
    sync_wait a
    mount_device b
    cp /bin/cat "$T/tumblerd"
    cp /bin/cat "$T/my-indexer"
    fails "$T/tumblerd" "$T/b/photo.jpg" 2>"$T/err"
    grep -q "Operation not permitted" "$T/err"
    assert_eq "$(xattr isDownloaded "$T/b/photo.jpg")" 0 "nothing downloaded"
    assert_eq "$("$T/my-indexer" "$T/b/photo.jpg")" photo "a program not listed downloads"
    assert_eq "$("$T/tumblerd" "$T/b/photo.jpg")" photo "a downloaded file reads normally"
    "$BIN/icloudfs" status "$T/b" | grep -q "nohydrate: 1 open(s) of files not downloaded refused"
    fusermount3 -u "$T/b"
    mount_device b nohydrate=+my-indexer
    fails "$T/my-indexer" "$T/b/other.jpg"
    fusermount3 -u "$T/b"
    mount_device b nohydrate=
    assert_eq "$("$T/tumblerd" "$T/b/other.jpg")" other "an empty list refuses nothing"
}

# openvfs_data FILE: user.openvfs.data decoded (a MessagePack map of strings and unsigned
# integers, as openVFS writes it) as "key=value" words.
openvfs_data() {
    python3 - "$1" <<'PY'
import os, sys
b = os.getxattr(sys.argv[1], "user.openvfs.data")
def read(i):
    t = b[i]
    if t < 0x80: return t, i + 1
    if 0xa0 <= t < 0xc0: n = t & 0x1f; return b[i+1:i+1+n].decode(), i + 1 + n
    if t == 0xd9: n = b[i+1]; return b[i+2:i+2+n].decode(), i + 2 + n
    for code, width in ((0xcc, 1), (0xcd, 2), (0xce, 4), (0xcf, 8)):
        if t == code: return int.from_bytes(b[i+1:i+1+width], "big"), i + 1 + width
    raise ValueError(hex(t))
assert b[0] & 0xf0 == 0x80, b
i, words = 1, []
for _ in range(b[0] & 0x0f):
    key, i = read(i); value, i = read(i); words.append(f"{key}={value}")
assert i == len(b), (i, len(b))
print(" ".join(words))
PY
}

# user.openvfs.data: openVFS's map for a placeholder, a downloaded file, a pinned one;
# read-only; never listed (so never copied).
test_openvfs_attribute() {
    mount_device a
    head -c 5000 /dev/urandom > "$T/a/f"
    sync_wait a
    mount_device b
    local id
    id=$(xattr itemIdentifier "$T/b/f")
    openvfs_data "$T/b/f" | tee "$T/words"
    grep -qE "^etag=[0-9.-]+ fileid=$id pinstate=0 size=5000 state=1$" "$T/words"
    cat "$T/b/f" > /dev/null
    eventually 'openvfs_data "$T/b/f" | grep -q "pinstate=0 size=5000 state=0$"'
    "$BIN/icloudfs" pin "$T/b/f"
    openvfs_data "$T/b/f" | grep -q "pinstate=2 size=5000 state=0$"
    openvfs_data "$T/b" | grep -q "size=0 state=0$"
    fails setfattr -n user.openvfs.data -v x "$T/b/f"
    assert_eq "$(getfattr -d -m - "$T/b/f" 2>/dev/null | grep -c "^user.openvfs")" 0 "never listed"
}

# Desktop notifications, through the notification service's command (here a stand-in
# notify-send that records what it was asked): a conflict copy made, uploads stopped for
# longer than notify_wait. Without a session bus, none.
test_desktop_notifications() {
    mkdir "$T/bin"
    printf '#!/bin/sh\nprintf "%%s|" "$@" >> "%s/notified"; echo >> "%s/notified"\n' "$T" "$T" > "$T/bin/notify-send"
    chmod +x "$T/bin/notify-send"
    export PATH="$T/bin:$PATH" DBUS_SESSION_BUS_ADDRESS="unix:path=$T/no-bus"
    for d in a b c; do mount_device $d notify_wait=1s; done
    echo base > "$T/a/report.txt"
    sync_wait a
    eventually 'test -f "$T/b/report.txt" && test -f "$T/c/report.txt"'
    mv "$T/store" "$T/store.away"
    echo "from b" > "$T/b/report.txt"
    echo "from c" > "$T/c/report.txt"
    "$BIN/icloudfs" sync "$T/b"
    eventually 'grep -q "^--app-name=icloudfs|Sync of iCloud.com.example.mounttests stopped|" "$T/notified"'
    mv "$T/store.away" "$T/store"
    sync_wait b
    sync_wait c
    sync_wait a
    eventually 'grep -q "Conflict in iCloud.com.example.mounttests|A file was changed on two devices at once; both versions are kept:" "$T/notified"'
    grep -q "$T/a/report (conflicted copy from" "$T/notified"
    cat "$T/notified"
    # No session bus: nothing sent.
    unset DBUS_SESSION_BUS_ADDRESS
    for d in a b c; do fusermount3 -u "$T/$d"; done
    local before
    before=$(wc -l < "$T/notified")
    XDG_RUNTIME_DIR="$T/no-runtime" mount_device a notify_wait=1s
    mv "$T/store" "$T/store.away"
    echo again > "$T/a/report.txt"
    "$BIN/icloudfs" sync "$T/a"
    sleep 2.5
    mv "$T/store.away" "$T/store"
    assert_eq "$(wc -l < "$T/notified")" "$before" "no bus, no notification"
}

test_sync_wait_answers_for_the_container() {
    mount_device a
    mkdir "$T/a/docs"
    for i in $(seq 1 50); do echo "note $i" > "$T/a/docs/n$i"; done
    # A folder in the mount waits for its whole container; the mount answers when it is.
    echo late > "$T/a/outside"
    "$BIN/icloudfs" sync --wait --timeout 30s "$T/a/docs"
    assert_eq "$(xattr isUploaded "$T/a")" 1 "all of the container is uploaded"
    # While the store is away nothing can go up: the time given runs out, and says so.
    mv "$T/store" "$T/store.away"
    echo more > "$T/a/docs/n1"
    fails "$BIN/icloudfs" sync --wait --timeout 1s "$T/a" 2>"$T/err"
    grep -q "not everything was uploaded within 1s" "$T/err"
    mv "$T/store.away" "$T/store"
    sync_wait a
    mount_device b
    assert_eq "$(cat "$T/b/docs/n1")" more
    assert_eq "$(cat "$T/b/outside")" late
}
