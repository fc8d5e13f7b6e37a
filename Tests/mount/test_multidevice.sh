# Several devices mounted at once over one store (docs/SEMANTICS.md, "Several devices").

# now_ms: wall clock in milliseconds.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# latency KIND 'ACTION ON a' 'CONDITION ON b': prints how long b took to show a's change.
latency() {
    local start end
    start=$(now_ms)
    eval "$2"
    for _ in $(seq 1 400); do
        if eval "$3" >/dev/null 2>&1; then
            end=$(now_ms)
            echo "measured: latency $1 $((end - start)) ms"
            echo "$((end - start))" >> "$T/latencies"
            return 0
        fi
        sleep 0.01
    done
    echo "    $1 never arrived"
    return 1
}

test_propagation_latency_default_poll() {
    mount_device a
    mkdir -p "$T/b"
    # The default poll (2 s): a directory store notifies, so changes arrive well before it.
    "$BIN/icloudfs" mount "$CONTAINER" "$T/b" -o "store=$T/store,cache=$T/cache-b,device=b"
    latency create 'echo one > "$T/a/f"' 'test "$(cat "$T/b/f")" = one'
    latency write 'echo two > "$T/a/f"' 'test "$(cat "$T/b/f")" = two'
    latency rename 'mv "$T/a/f" "$T/a/g"' 'test -f "$T/b/g" && test ! -e "$T/b/f"'
    latency chmod 'chmod 600 "$T/a/g"' 'test "$(stat -c %a "$T/b/g")" = 600'
    latency xattr 'setfattr -n user.tag -v x "$T/a/g"' 'test "$(getfattr --only-values -n user.tag "$T/b/g")" = x'
    latency mkdir 'mkdir "$T/a/d"' 'test -d "$T/b/d"'
    latency delete 'rm "$T/a/g"' 'test ! -e "$T/b/g"'
    local median
    median=$(sort -n "$T/latencies" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "measured: median latency $median ms"
    [ "$median" -le 2000 ]
}

test_stale_cache_never_shown() {
    mount_device a
    mount_device b
    echo "version 1" > "$T/a/doc"
    sync_wait a
    eventually 'test "$(cat "$T/b/doc")" = "version 1"'
    assert_eq "$(xattr downloadingStatus "$T/b/doc")" current
    echo "version 2, longer" > "$T/a/doc"
    sync_wait a
    eventually 'test "$(cat "$T/b/doc")" = "version 2, longer"'
    assert_eq "$(stat -c %s "$T/b/doc")" 18 "size after the change"
}

test_simultaneous_edits_one_conflict_copy() {
    mount_device a
    mount_device b
    mount_device c
    echo base > "$T/a/report.txt"
    sync_wait a
    eventually 'test -f "$T/b/report.txt" && test -f "$T/c/report.txt"'
    # b and c edit from the same base while their uploads are held back.
    conflicting_edits report.txt b c
    sync_wait a
    for d in a b c; do
        eventually "test \$(ls \"$T/$d\" | wc -l) = 2"
    done
    assert_eq "$(ls "$T/a")" "$(ls "$T/b")" "a and b agree"
    assert_eq "$(ls "$T/b")" "$(ls "$T/c")" "b and c agree"
    ls "$T/a" | grep -q '^report (conflicted copy from [bc] [0-9-]* [0-9.]*).txt$'
    assert_eq "$(xattr hasUnresolvedConflicts "$T/a/report.txt")" 1
    "$BIN/icloudfs" conflicts "$T/a" > "$T/conflicts"
    grep -q "report.txt" "$T/conflicts"
    grep -q "conflicted copy" "$T/conflicts"
    rm "$T/a/report (conflicted copy from"*
    sync_wait a
    eventually 'test "$(xattr hasUnresolvedConflicts "$T/b/report.txt")" = 0'
}

test_concurrent_creates_and_delete_versus_edit() {
    mount_device a
    mount_device b
    echo keep > "$T/a/shared"
    sync_wait a
    eventually 'test -f "$T/b/shared"'
    mv "$T/store" "$T/store.away"
    echo "from a" > "$T/a/new.txt"
    echo "from b" > "$T/b/new.txt"
    rm "$T/a/shared"
    echo "edited on b" > "$T/b/shared"
    mv "$T/store.away" "$T/store"
    sync_wait a
    sync_wait b
    sync_wait a
    eventually 'test "$(ls "$T/a")" = "$(ls "$T/b")"'
    assert_eq "$(ls "$T/a")" "$(printf 'new 2.txt\nnew.txt\nshared')"
    assert_eq "$(cat "$T/a/shared")" "edited on b" "the edit beats the delete"
}

test_rename_versus_edit() {
    mount_device a
    mount_device b
    echo original > "$T/a/draft"
    sync_wait a
    eventually 'test -f "$T/b/draft"'
    mv "$T/store" "$T/store.away"
    mv "$T/a/draft" "$T/a/final"
    echo "edited" > "$T/b/draft"
    # Long enough that both devices' pushes fail while the store is away (a push waits
    # 50 ms for more changes).
    sleep 0.3
    mv "$T/store.away" "$T/store"
    sync_wait a
    sync_wait b
    # sync --wait covers this device's uploads; the other device's changes arrive by
    # themselves a moment later (reading at once made this test fail 3 runs in 10).
    eventually 'test "$(ls "$T/b")" = final'
    eventually 'test "$(cat "$T/a/final")" = edited'
    assert_eq "$(cat "$T/b/final")" edited
}

test_identity_mismatch_refused() {
    mount_device a
    echo x > "$T/a/x"
    sync_wait a
    umount "$T/a"
    # The container is deleted and re-created in the store: a new identity.
    rm -rf "$T/store/$CONTAINER"
    mount_device other
    umount "$T/other"
    fails mount_device a 2>"$T/err"
    grep -q "belongs to container identity" "$T/err"
    fails grep -q " $T/a " /proc/mounts
}

test_monitor_streams_remote_changes() {
    mount_device a
    mount_device b
    "$BIN/icloudfs" monitor "$T/b" > "$T/monitor.txt" &
    local monitor=$!
    "$BIN/icloudfs" monitor --json "$T/b" > "$T/monitor.json" &
    local json=$!
    sleep 0.3
    mkdir "$T/a/Docs"
    echo hi > "$T/a/Docs/note.txt"
    sync_wait a
    # A new file and its first content are one change (its create carries the content).
    eventually 'grep -q "created *Docs/note.txt  (a)" "$T/monitor.txt"'
    grep -q "created *Docs  (a)" "$T/monitor.txt"
    echo more >> "$T/a/Docs/note.txt"
    sync_wait a
    eventually 'grep -q "modified *Docs/note.txt  (a)" "$T/monitor.txt"'
    eventually 'grep -q "\"kind\":\"modified\"" "$T/monitor.json"'
    python3 -c "import json,sys; [json.loads(l) for l in open(sys.argv[1])]" "$T/monitor.json"
    kill "$monitor" "$json"
}

# Metadata first: a large file shows on other devices by name and size while its chunks
# still upload (isUploaded=0 there); a read there waits for them. If the writer dies before
# finishing, a read fails after upload_wait with a downloadingError; the writer's next mount
# finishes the upload.
test_metadata_first_large_file() {
    mount_device a upload_limit=4M
    mount_device b
    mount_device c upload_wait=1s
    head -c $((16 << 20)) /dev/urandom > "$T/big.bin"
    local start shown
    start=$(now_ms)
    cp "$T/big.bin" "$T/a/big.bin"
    eventually 'test "$(stat -c %s "$T/b/big.bin")" = $((16 << 20))'
    shown=$(now_ms)
    assert_eq "$(xattr isUploaded "$T/b/big.bin")" 0 "on b while a uploads"
    assert_eq "$(xattr isUploading "$T/a/big.bin")" 1 "on a"
    cmp "$T/big.bin" "$T/b/big.bin"
    echo "measured: 16 MiB at 4 MB/s: name on b after $((shown - start)) ms, content read on b after $(($(now_ms) - start)) ms"
    eventually 'test "$(xattr isUploaded "$T/b/big.bin")" = 1'

    head -c $((16 << 20)) /dev/urandom > "$T/second.bin"
    cp "$T/second.bin" "$T/a/second.bin"
    eventually 'test "$(stat -c %s "$T/c/second.bin")" = $((16 << 20))'
    kill -9 "$(daemon_of a)"
    fusermount3 -uz "$T/a" || umount -l "$T/a"
    fails cat "$T/c/second.bin" > /dev/null
    xattr downloadingError "$T/c/second.bin" | grep -q '^contentNotUploaded'
    mount_device a
    sync_wait a
    eventually 'test "$(xattr isUploaded "$T/c/second.bin")" = 1'
    cmp "$T/second.bin" "$T/c/second.bin"
}

# Randomized soak: three devices, random creates, saves, renames and deletes for 15 s, then
# settle: identical trees and no written version lost. A failure prints its seed; rerun it
# with ICLOUDFS_SOAK_SEED=N KEEP=1 Tests/mount/run test_soak_three_devices (the trace of
# every operation is kept in the test's folder).
test_soak_three_devices() {
    mount_device a
    mount_device b
    mount_device c
    local seed=${ICLOUDFS_SOAK_SEED:-$RANDOM}
    ICLOUDFS_SOAK_TRACE="$T/trace" timeout 300 python3 "$REPO/Tests/mount/soak.py" "$seed" "${ICLOUDFS_SOAK_SECONDS:-15}" "$BIN/icloudfs" "$T/a" "$T/b" "$T/c"
}

test_conflicts_lists_over_4_kib_whole() {
    mount_device a
    mount_device b
    # Copies of a 200-byte name have 255-byte names: 18 of them list over 4 KiB.
    local name
    name="$(printf 'n%.0s' $(seq 1 196)).txt"
    echo base > "$T/a/$name"
    sync_wait a
    for round in $(seq 1 18); do
        eventually "test -f \"$T/b/$name\""
        mv "$T/store" "$T/store.away"
        echo "a $round" > "$T/a/$name"
        echo "b $round" > "$T/b/$name"
        mv "$T/store.away" "$T/store"
        sync_wait a
        sync_wait b
    done
    eventually "test \$(ls \"$T/a\" | wc -l) = 19"
    "$BIN/icloudfs" conflicts "$T/a" > "$T/conflicts"
    assert_eq "$(grep -c "conflicted copy" "$T/conflicts")" 18
    test "$(wc -c < "$T/conflicts")" -gt 4096
}

test_rename_exchange_arrives_on_another_device() {
    mount_device a
    mount_device b
    echo one > "$T/a/x"
    mkdir "$T/a/y"
    echo inside > "$T/a/y/f"
    sync_wait a
    eventually 'test -f "$T/b/y/f"'
    # renameat2(RENAME_EXCHANGE): the file and the folder swap names, atomically.
    python3 -c 'import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0: sys.exit(os.strerror(ctypes.get_errno()))' \
        "$T/a/x" "$T/a/y"
    assert_eq "$(cat "$T/a/y")" one
    assert_eq "$(cat "$T/a/x/f")" inside
    sync_wait a
    eventually 'test -d "$T/b/x" && test "$(cat "$T/b/y")" = one'
    assert_eq "$(cat "$T/b/x/f")" inside
    # Nothing else is left behind: no name used while they swapped.
    assert_eq "$(ls -A "$T/b" | tr '\n' ' ')" "x y "
}

test_owners_arrive_on_another_device() {
    mount_device a
    mount_device b
    echo x > "$T/a/f"
    mkdir "$T/a/d"
    ln -s f "$T/a/l"
    chown 1234:5678 "$T/a/f"
    chown 77:88 "$T/a/d"
    chown -h 5:6 "$T/a/l"
    # Set while the file is being written (cp -a, tar): queued with its content.
    python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"x"); os.fchown(fd, 11, 22); os.close(fd)' "$T/a/w"
    sync_wait a
    eventually 'test "$(stat -c %u:%g "$T/b/f")" = 1234:5678'
    assert_eq "$(stat -c %u:%g "$T/b/d")" 77:88
    assert_eq "$(stat -c %u:%g "$T/b/l")" 5:6
    assert_eq "$(stat -c %u:%g "$T/b/w")" 11:22
    # Kept across a restart (the device's state), and uid= shows another user instead.
    fusermount3 -u "$T/b"
    mount_device b
    assert_eq "$(stat -c %u:%g "$T/b/f")" 1234:5678
    mount_device c uid=42
    assert_eq "$(stat -c %u:%g "$T/c/f")" 42:5678
}

test_special_files_arrive_on_another_device() {
    mount_device a
    mount_device b
    mkfifo -m 640 "$T/a/pipe"
    mknod -m 620 "$T/a/tty" c 4 64
    mknod "$T/a/disk" b 8 17
    python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$T/a/sock"
    chown 0:5 "$T/a/tty"
    chmod 600 "$T/a/disk" "$T/a/sock"
    sync_wait a
    eventually 'test -p "$T/b/pipe"'
    assert_eq "$(stat -c '%F %a %t:%T %u:%g' "$T/b/pipe" "$T/b/tty" "$T/b/disk" "$T/b/sock" | tr '\n' ';')" \
        "fifo 640 0:0 0:0;character special file 620 4:40 0:5;block special file 600 8:11 0:0;socket 600 0:0 0:0;"
    # The FIFO works on the second device (the kernel serves it).
    python3 -c 'import os, sys
r = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK); w = os.open(sys.argv[1], os.O_WRONLY)
os.write(w, b"ok"); assert os.read(r, 10) == b"ok"' "$T/b/pipe"
    # Kept across a restart (the device's state).
    fusermount3 -u "$T/b"
    mount_device b
    assert_eq "$(stat -c '%F %t:%T' "$T/b/tty")" "character special file 4:40"
}

test_times_arrive_on_another_device() {
    mount_device a
    mount_device b
    mkdir "$T/a/d"
    echo x > "$T/a/d/f"
    touch -a -d '2001-01-01 00:00:00.123456789' "$T/a/d/f"
    touch -m -d '2002-02-02 00:00:00.987654321' "$T/a/d/f"
    chmod 600 "$T/a/d/f"  # moves ctime
    sync_wait a
    # Access, modification and change times, and the folder's (moved by its entry), as on a.
    eventually 'test "$(stat -c %X "$T/b/d/f")" = "$(stat -c %X "$T/a/d/f")"'
    assert_eq "$(stat -c '%x|%y|%z' "$T/b/d/f")" "$(stat -c '%x|%y|%z' "$T/a/d/f")"
    assert_eq "$(stat -c '%y|%z' "$T/b/d")" "$(stat -c '%y|%z' "$T/a/d")"
    # Kept across a restart (the device's state).
    fusermount3 -u "$T/b"
    mount_device b
    assert_eq "$(stat -c '%x|%y|%z' "$T/b/d/f")" "$(stat -c '%x|%y|%z' "$T/a/d/f")"
}


test_hard_links_arrive_on_another_device() {
    mount_device a
    mount_device b
    mkdir "$T/a/d"
    echo one > "$T/a/f"
    ln "$T/a/f" "$T/a/d/g"
    ln "$T/a/f" "$T/a/h"
    sync_wait a
    eventually 'test -e "$T/b/h"'
    # One file under three names on b too: one inode, three links, one content.
    assert_eq "$(stat -c '%h' "$T/b/f" "$T/b/d/g" "$T/b/h" | tr '\n' ' ')" "3 3 3 "
    assert_eq "$(stat -c '%i' "$T/b/f" "$T/b/d/g" "$T/b/h" | sort -u | wc -l)" "1"
    # An edit through one name on b shows under every name on a.
    echo two >> "$T/b/d/g"
    sync_wait b
    eventually 'test "$(cat "$T/a/h")" = "$(printf "one\ntwo")"'
    assert_eq "$(cat "$T/a/f")" "$(printf 'one\ntwo')"
    # Removing the first name on a keeps the file under the others on b.
    rm "$T/a/f"
    sync_wait a
    eventually '! test -e "$T/b/f"'
    assert_eq "$(stat -c '%h' "$T/b/d/g" "$T/b/h" | tr '\n' ' ')" "2 2 "
    assert_eq "$(cat "$T/b/h")" "$(printf 'one\ntwo')"
    # Kept across a restart, and removing the last names removes the file.
    fusermount3 -u "$T/b"
    mount_device b
    assert_eq "$(stat -c '%h' "$T/b/h")" "2"
    rm "$T/b/h" "$T/b/d/g"
    sync_wait b
    eventually '! test -e "$T/a/h"'
    assert_eq "$(ls -A "$T/a/d")" ""
}

test_concurrent_unlink_and_link_keep_the_file() {
    mount_device a
    mount_device b
    echo keep > "$T/a/f"
    sync_wait a
    eventually 'test -e "$T/b/f"'
    # Offline from each other: a removes the only name while b gives the file a second one.
    fusermount3 -u "$T/a"
    ln "$T/b/f" "$T/b/second"
    sync_wait b
    mount_device a
    rm "$T/a/f"
    sync_wait a
    # Both devices end with the file under the name b made (the link keeps it).
    eventually 'test "$(ls "$T/a")" = second'
    eventually 'test "$(ls "$T/b")" = second'
    assert_eq "$(cat "$T/a/second")" "keep"
    assert_eq "$(stat -c '%h' "$T/b/second")" "1"
}

test_acls_and_attributes_of_every_namespace_arrive_on_another_device() {
    mount_device a acl
    mount_device b acl,allow_other
    # A tree with ACLs (access and default) and trusted/security attributes, copied in by
    # rsync -aAX: the same as the source on a, then on b.
    mkdir -p "$T/src/d"
    echo x > "$T/src/f"
    setfacl -m u:1000:rw,g:1001:r,o::- "$T/src/f"
    setfacl -d -m u:1000:rwx "$T/src/d"
    setfattr -n trusted.t -v 1 "$T/src/f"
    setfattr -n security.s -v 2 "$T/src/f"
    rsync -aAX "$T/src/" "$T/a/copy/"
    acls() { (cd "$1" && getfacl -p . d f; getfattr -hd -m '^(trusted|security)\.' f); }
    acls "$T/src" > "$T/src.acls"
    acls "$T/a/copy" > "$T/a.acls"
    diff "$T/src.acls" "$T/a.acls"
    sync_wait a
    eventually 'test -e "$T/b/copy/d"'
    acls "$T/b/copy" > "$T/b.acls"
    diff "$T/src.acls" "$T/b.acls"
    # The kernel on b checks access by the ACL that arrived: user 1000 reads, 1002 may not.
    (cd "$T/b/copy" && setpriv --reuid 1000 --regid 1000 --clear-groups cat f > /dev/null)
    (cd "$T/b/copy" && fails setpriv --reuid 1002 --regid 1002 --clear-groups cat f 2>/dev/null)
    # A file made in the folder with a default ACL on b inherits it.
    touch "$T/b/copy/d/new"
    assert_eq "$(getfacl -cn "$T/b/copy/d/new" | grep -c '^user:1000:')" 1
}
