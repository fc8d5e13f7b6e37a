# Collection (issue 22): icloudfs gc deletes what nothing names and compacts the journal,
# and loses nothing while other devices work: each hazard below loses data if collection
# is unsafe. Policies in seconds stand for days.

# set_policy DEVICE ARGS...: sets the container's policy and waits until it is in the store.
set_policy() {
    local device=$1
    shift
    "$BIN/icloudfs" policy "$T/$device" "$@" > /dev/null
}

# write_fsynced_files DEVICE DIR NAME: 30 random small files in DIR on the device, each
# acknowledged by fsync, with copies at $T/expected/NAME-fI.
write_fsynced_files() {
    local device=$1 dir=$2 name=$3 i
    mkdir -p "$T/expected" "$T/$device/$dir"
    for i in $(seq 1 30); do
        head -c $((RANDOM % 6000 + 1)) /dev/urandom > "$T/expected/$name-f$i"
        dd if="$T/expected/$name-f$i" of="$T/$device/$dir/f$i" bs=64k conv=fsync status=none
    done
}

# unmount_until_gone DEVICE: unmount the device and wait until its daemon has exited.
unmount_until_gone() {
    local daemon
    daemon=$(daemon_of "$1")
    fusermount3 -u "$T/$1"
    eventually '! kill -0 "$daemon"'
}

# tree_sums DEVICE: "sha256  path" of every file on the device, sorted.
tree_sums() { (cd "$T/$1" && find . -type f -exec sha256sum {} + | sort); }

# store_bytes: the bytes of every object of the container, as device a lists the store.
store_bytes() {
    getfattr --only-values -n user.icloud.storeUsage "$T/a" \
        | python3 -c 'import json, sys; u = json.load(sys.stdin); print(u["liveBytes"] + u["historyBytes"] + u["collectableBytes"] + u["journalBytes"])'
}

# deleted_mb PREFIX: the megabytes of chunks and packs on gc's line starting with PREFIX.
deleted_mb() {
    python3 -c '
import re, sys
line = next(l for l in sys.stdin if l.startswith(sys.argv[1] + " "))
units = {"B": 1e-6, "KB": 1e-3, "MB": 1, "GB": 1e3}
print(sum(float(n) * units[u] for n, u in re.findall(r"(?:chunk|pack)\(s\) \(([0-9.]+) (B|KB|MB|GB)\)", line)))
' "$1"
}

test_gc_brings_the_store_to_live_data_plus_retained_history() {
    mount_device a
    mkdir "$T/a/big"
    for i in $(seq 1 20); do head -c 10000000 /dev/urandom > "$T/a/big/f$i.bin"; done
    # Uploaded apart from kept.bin: a push packs the files' small tail chunks together, and a
    # pack mostly of live chunks keeps its dead ones (it is repacked once less than half is
    # used), which would leave a deleted tail beside kept.bin's first one uncollected.
    sync_wait a
    head -c 10000000 /dev/urandom > "$T/a/kept.bin"
    cp "$T/a/kept.bin" "$T/kept-v1.bin"
    sync_wait a
    # Deleted items are kept 1 s, versions an hour: the first version of kept.bin stays.
    set_policy a --deleted 1s --versions 1h --grace 2s
    rm -r "$T/a/big"
    head -c 10000000 /dev/urandom > "$T/a/kept.bin"
    sync_wait a
    "$BIN/icloudfs" status "$T/a" | grep '^store:' > "$T/usage"
    cat "$T/usage"
    # The deleted files and the first version (and any version committed halfway through
    # a write) are history now.
    python3 -c 'import re, sys; h = float(re.search(r"([0-9.]+) MB history", sys.stdin.read()).group(1)); sys.exit(not 210 <= h < 221)' < "$T/usage"
    sleep 3
    "$BIN/icloudfs" gc "$T/a" --dry-run > "$T/dry"
    cat "$T/dry"
    # Chunk objects and packs (the files' small tail chunks travel in packs) together; a
    # dry run leaves out packs that also hold live chunks (a real one repacks them first).
    deleted_mb "would delete" < "$T/dry" | python3 -c 'import sys; sys.exit(not 180 <= float(sys.stdin.read()) < 220)'
    test "$(store_bytes)" -gt 200000000
    "$BIN/icloudfs" gc "$T/a" > "$T/out"
    cat "$T/out"
    deleted_mb "deleted" < "$T/out" | python3 -c 'import sys; sys.exit(not 200 <= float(sys.stdin.read()) < 220)'
    # Live 10 MB plus the retained version 10 MB: the store within 10% of it.
    local bytes
    bytes=$(store_bytes)
    echo "measured: store after gc $bytes bytes (live 10 MB, kept version 10 MB)"
    test "$bytes" -le 22000000
    "$BIN/icloudfs" status "$T/a" | grep -q "^store: 10.0 MB live, .* history, 0 B collectable"
    # A new device starts from the compacted journal and reads everything, both versions.
    mount_device c
    assert_eq "$(sha256sum < "$T/c/kept.bin")" "$(sha256sum < "$T/a/kept.bin")"
    test ! -e "$T/c/big"
    seq=$("$BIN/icloudfs" versions --json "$T/c/kept.bin" | python3 -c 'import json, sys; print(json.load(sys.stdin)[1]["seq"])')
    "$BIN/icloudfs" restore "$T/c/kept.bin" --version "$seq" --as kept-v1.bin
    assert_eq "$(sha256sum < "$T/c/kept-v1.bin")" "$(sha256sum < "$T/kept-v1.bin")" "the retained version"
}

# A device uploads a file's chunks slowly; a collection that starts meanwhile sees them named
# by nothing (the commit is not written yet) and old enough to go.
test_chunks_uploaded_before_their_commit_survive_a_collection() {
    mount_device a
    set_policy a --deleted 0s --versions 0s --grace 2s
    mount_device b upload_limit=400K
    head -c 3000000 /dev/urandom > "$T/source.bin"
    cp "$T/source.bin" "$T/b/slow.bin"
    sleep 5
    "$BIN/icloudfs" gc "$T/a" > "$T/out"
    cat "$T/out"
    sync_wait b
    mount_device c
    assert_eq "$(sha256sum < "$T/c/slow.bin")" "$(sha256sum < "$T/source.bin")" "read on a new device"
}

# A file starting with a deleted file's content is written while a collection waits to
# delete that content's chunks: the device finds them in the store (no upload), then uploads
# the rest slowly, so that its commit comes after the sweep; it must bring them back.
test_content_written_again_during_a_collection_is_kept() {
    mount_device a
    mount_device b upload_limit=400K
    head -c 2000000 /dev/urandom > "$T/old.bin"
    cp "$T/old.bin" "$T/a/old.bin"
    sync_wait a
    rm "$T/a/old.bin"
    sync_wait a
    set_policy a --deleted 0s --versions 0s --grace 3s
    sleep 3.5
    "$BIN/icloudfs" gc "$T/a" > "$T/out" 2>&1 &
    local collector=$!
    eventually 'ls "$T/store/$CONTAINER/gc" | grep -q .'
    # Under 4 MiB: chunks go before the commit (not metadata first).
    { cat "$T/old.bin"; head -c 1500000 /dev/urandom; } > "$T/again.bin"
    cp "$T/again.bin" "$T/b/again.bin"
    wait "$collector"
    cat "$T/out"
    # The old file's chunks went as objects or in its pack (a first entry packs too: which,
    # depends on where the random bytes cut).
    grep -Eq "deleted [1-9]|and [1-9][0-9]* pack" "$T/out"
    sync_wait b
    mount_device c
    assert_eq "$(sha256sum < "$T/c/again.bin")" "$(sha256sum < "$T/again.bin")" "read on a new device"
}

# A device away while the journal behind its position is compacted: it comes back with
# changes made offline, starts again from the snapshot, and both sides see everything.
test_a_device_away_during_compaction_keeps_its_changes() {
    mount_device a
    mount_device b
    echo one > "$T/a/shared.txt"
    mkdir "$T/a/folder"
    echo two > "$T/a/folder/doomed.txt"
    sync_wait a
    eventually 'test -e "$T/b/folder/doomed.txt"'
    fusermount3 -u "$T/b"
    mount_device b offline
    echo "edited offline" > "$T/b/shared.txt"
    echo "made offline" > "$T/b/offline.txt"
    echo "edited offline too" > "$T/b/folder/doomed.txt"
    fusermount3 -u "$T/b"
    # Deleted on a, and expired by the collection below: b's edit still brings it back, as
    # an edit of a deleted file does.
    rm -r "$T/a/folder"
    for i in $(seq 1 5); do
        echo "$i" > "$T/a/while-away-$i.txt"
        sync_wait a
    done
    set_policy a --deleted 1s --versions 1s --grace 1s
    sleep 2
    "$BIN/icloudfs" gc "$T/a" > "$T/out"
    cat "$T/out"
    grep -q "deleted [0-9]* chunk(s) .*, [1-9][0-9]* journal entries" "$T/out"
    mount_device b
    eventually 'test -e "$T/b/while-away-5.txt"'
    sync_wait b
    eventually 'test -e "$T/a/offline.txt"'
    eventually 'grep -q "edited offline" "$T/a/shared.txt"'
    eventually 'grep -q "edited offline too" "$T/a/folder/doomed.txt"'
    tree_sums a > "$T/on-a"
    eventually 'tree_sums b > "$T/on-b" && diff "$T/on-a" "$T/on-b"'
}

# Two collections at once (one through a mount, one straight on the store) while a device
# writes, slowly, files that start with deleted files' content: both list those chunks, and
# nothing named is lost.
test_two_collections_at_once_lose_nothing() {
    mount_device a
    mount_device b upload_limit=400K
    for i in $(seq 1 6); do head -c 2000000 /dev/urandom > "$T/a/f$i.bin"; done
    cp "$T/a/f1.bin" "$T/a/f2.bin" "$T"
    sync_wait a
    rm "$T/a/f1.bin" "$T/a/f2.bin"
    sync_wait a
    set_policy a --deleted 0s --versions 0s --grace 2s
    sleep 2.5
    "$BIN/icloudfs" gc "$T/a" > "$T/one" 2>&1 &
    local one=$!
    "$BIN/icloudfs" gc --store "$T/store" "$CONTAINER" > "$T/two" 2>&1 &
    local two=$!
    eventually 'ls "$T/store/$CONTAINER/gc" | grep -q .'
    # Under 4 MiB each: chunks go before the commit (not metadata first).
    for i in 1 2; do
        { cat "$T/f$i.bin"; head -c 1500000 /dev/urandom; } > "$T/b/again$i.bin"
    done
    wait "$one" || grep -q "another collection" "$T/one"
    wait "$two" || grep -q "another collection" "$T/two"
    cat "$T/one" "$T/two"
    # The collections weighed the deleted files' chunks: deleted them, or kept them because b
    # named them again meanwhile (which one depends on timing; both must lose nothing).
    grep -Eq "deleted [1-9]|and [1-9] pack|kept [1-9] chunk\(s\) a device named meanwhile" "$T/one" "$T/two"
    sync_wait b
    sync_wait a
    mount_device c
    eventually 'test -e "$T/c/again2.bin"'
    tree_sums b > "$T/on-b"
    tree_sums c > "$T/on-c"
    diff "$T/on-b" "$T/on-c"
}

# packs_in_store: the pack objects of the container, one name per line, sorted.
packs_in_store() { find "$T/store/$CONTAINER/packs" -type f -printf '%f\n' 2>/dev/null | sort; }

# Small files travel in packs (issue 37). Once most files of a pack are deleted, gc moves
# the rest into a new pack and deletes the old one; a file written with a deleted file's
# content while the collection waits its grace is packed again, not lost.
# A burst of small files from one fast writer goes up in a few entries, each with its pack.
# A push that counted off its batches by the queue's shrinkage, which changes arriving
# meanwhile cancel, went on in batches of a few files: 24 entries for these 2,000 files.
test_a_burst_of_small_files_goes_up_in_few_entries() {
    mount_device a
    python3 -c '
import os, sys
block = os.urandom(4096)
for i in range(2000):
    with open(os.path.join(sys.argv[1], "f%05d" % i), "wb") as f:
        f.write(i.to_bytes(8, "little") + block[8:])
' "$T/a"
    sync_wait a
    local entries packs
    entries=$(find "$T/store/$CONTAINER/journal" -type f | wc -l)
    packs=$(packs_in_store | wc -l)
    echo "measured: 2,000 files of 4 KiB in $entries journal entries and $packs packs"
    test "$entries" -le 14
    test "$packs" -le 14
    test "$(find "$T/store/$CONTAINER/chunks" -type f | wc -l)" = 0
}

test_packs_are_repacked_and_collected_without_loss() {
    mount_device a
    echo first > "$T/a/first.txt"  # entry 1: the files below start a batch of their own
    sync_wait a
    mkdir "$T/a/small"
    for i in $(seq 1 300); do head -c 4000 /dev/urandom > "$T/a/small/f$i"; done
    sync_wait a
    packs_in_store > "$T/packs-before"
    echo "measured: 300 files of 4,000 bytes in $(wc -l < "$T/packs-before") pack(s), $(find "$T/store/$CONTAINER/chunks" -type f | wc -l) chunk object(s)"
    # One pack per upload batch, and a burst goes up in few batches (2 here).
    test "$(wc -l < "$T/packs-before")" -ge 1
    test "$(wc -l < "$T/packs-before")" -le 6
    cp "$T/a/small/f7" "$T/f7"
    for i in $(seq 1 300); do [ $((i % 5)) = 0 ] || rm "$T/a/small/f$i"; done
    (cd "$T/a/small" && sha256sum f* | sort) > "$T/kept"
    assert_eq "$(wc -l < "$T/kept")" 60
    sync_wait a
    set_policy a --deleted 0s --versions 0s --grace 3s
    sleep 3.5
    "$BIN/icloudfs" gc "$T/a" > "$T/out" 2>&1 &
    local collector=$!
    eventually 'ls "$T/store/$CONTAINER/gc" | grep -q .'
    cp "$T/f7" "$T/a/again"
    sync_wait a
    wait "$collector"
    cat "$T/out"
    grep -q "^repacked [1-9][0-9]* pack(s)" "$T/out"
    grep -q "^deleted [0-9]* chunk(s) ([^)]*) and [1-9][0-9]* pack(s)" "$T/out"
    grep -q "in packs a collection chose; packing them again" "$T/cache-a/icloudfs.log"
    packs_in_store > "$T/packs-after"
    # A pack of the 300 files stays only if its kept files fill half of it or more (a
    # batch of a file or two): what is collectable now is within those halves.
    local stayed=0 collectable
    for pack in $(comm -12 "$T/packs-before" "$T/packs-after"); do
        stayed=$((stayed + $(find "$T/store/$CONTAINER/packs" -name "$pack" -printf '%s')))
    done
    collectable=$(getfattr --only-values -n user.icloud.storeUsage "$T/a" | python3 -c 'import json, sys; print(json.load(sys.stdin)["collectableBytes"])')
    echo "measured: $(comm -12 "$T/packs-before" "$T/packs-after" | wc -l) of $(wc -l < "$T/packs-before") packs stayed ($stayed bytes), $collectable bytes collectable after gc"
    test "$(comm -12 "$T/packs-before" "$T/packs-after" | wc -l)" -lt "$(wc -l < "$T/packs-before")"
    test "$collectable" -le $((stayed / 2))
    mount_device c
    (cd "$T/c/small" && sha256sum f* | sort) > "$T/on-c"
    diff "$T/kept" "$T/on-c"
    cmp "$T/c/again" "$T/f7"
}

# A device killed while its small files go up in packs: what it acknowledged (fsync) is
# read by a new device, and a pack it left unnamed goes at the next collection.
test_kill_9_during_pack_uploads_loses_nothing_and_leaves_nothing() {
    mkdir -p "$T/expected"
    mount_device a
    echo first > "$T/a/first.txt"  # entry 1: the files below start a batch of their own
    sync_wait a
    fusermount3 -u "$T/a"
    for round in $(seq 1 8); do
        mount_device a upload_limit=200K
        mkdir -p "$T/a/r$round"
        for i in $(seq 1 40); do
            head -c $((RANDOM % 6000 + 1)) /dev/urandom > "$T/expected/r$round-f$i"
            dd if="$T/expected/r$round-f$i" of="$T/a/r$round/f$i" bs=64k conv=fsync status=none
        done
        sleep "0.$((RANDOM % 8))"
        kill -9 "$(daemon_of a)"
        fusermount3 -u "$T/a" 2>/dev/null || umount -l "$T/a"
    done
    mount_device a
    sync_wait a
    mount_device b
    for round in $(seq 1 8); do
        for i in $(seq 1 40); do cmp "$T/b/r$round/f$i" "$T/expected/r$round-f$i"; done
    done
    set_policy a --deleted 0s --versions 0s --grace 1s
    sleep 1.5
    "$BIN/icloudfs" gc "$T/a" > "$T/out"
    cat "$T/out"
    "$BIN/icloudfs" status "$T/a" | grep "^store:"
    "$BIN/icloudfs" status "$T/a" | grep -q "^store: .* 0 B collectable"
    fusermount3 -u "$T/b"
    mount_device c
    for round in $(seq 1 8); do
        for i in $(seq 1 40); do cmp "$T/c/r$round/f$i" "$T/expected/r$round-f$i"; done
    done
}

# A device stopped (SIGKILL, ICLOUDFS_CRASH_AT) at each step of a push of small files in a
# pack, in turn: with a store object half written, with the pack stored and no entry naming
# it, with the entry appended and not recorded. Files acknowledged by fsync before each stop
# are read whole by a new device; the unnamed pack and the half-written object go at the next
# collection.
test_a_push_stopped_at_each_step_of_a_pack_loses_nothing() {
    mkdir -p "$T/expected"
    mount_device a
    echo first > "$T/a/first.txt"  # entry 1: the files below start a batch of their own
    sync_wait a
    fusermount3 -u "$T/a"
    local point daemon
    for point in object-half-written pack-written entry-appended; do
        # Written while the store is away, so that the push starts after the mount below.
        mount_device a
        mv "$T/store" "$T/store.away"
        write_fsynced_files a "$point" "$point"
        unmount_until_gone a  # gone before the store is back: it pushes nothing
        mv "$T/store.away" "$T/store"
        (export ICLOUDFS_CRASH_AT=$point; mount_device a) || true  # it may stop before the mount is ready
        daemon=$(daemon_of a)
        eventually '! kill -0 "$daemon"'
        fusermount3 -u "$T/a" 2>/dev/null || umount -l "$T/a" 2>/dev/null || true
        echo "stopped at $point"
    done
    find "$T/store/$CONTAINER" -name '.*.tmp' | grep -q .  # the object left half written
    mount_device a
    sync_wait a
    mount_device b
    for point in object-half-written pack-written entry-appended; do
        for i in $(seq 1 30); do cmp "$T/b/$point/f$i" "$T/expected/$point-f$i"; done
    done
    # An hour on, the half-written object is abandoned; the unnamed pack is past the grace.
    find "$T/store/$CONTAINER" -name '.*.tmp' -exec touch -d '2 hours ago' {} +
    set_policy a --deleted 0s --versions 0s --grace 1s
    sleep 1.5
    "$BIN/icloudfs" gc "$T/a" > "$T/out"
    cat "$T/out"
    grep -q "^removed [1-9][0-9]* partial write(s) a crash left in the store" "$T/out"
    assert_eq "$(find "$T/store/$CONTAINER" -name '.*.tmp' | wc -l)" 0
    "$BIN/icloudfs" status "$T/a" | grep -q "^store: .* 0 B collectable"
    for point in object-half-written pack-written entry-appended; do
        for i in $(seq 1 30); do cmp "$T/b/$point/f$i" "$T/expected/$point-f$i"; done
    done
}

# A collection stopped (SIGKILL) at each step of a repack, in turn: a new pack written and
# not named, the entry moving chunks there appended and the old packs not yet deleted, the
# sweep begun. After each, a new device reads every kept file whole, and the next collection
# finishes the work (or, after a sweep cut short, says which collection to wait for).
test_a_collection_stopped_at_each_step_of_a_repack_loses_nothing() {
    mount_device a
    echo first > "$T/a/first.txt"
    sync_wait a
    mkdir "$T/a/small"
    for i in $(seq 1 200); do head -c 4000 /dev/urandom > "$T/a/small/f$i"; done
    sync_wait a
    for i in $(seq 1 200); do [ $((i % 5)) = 0 ] || rm "$T/a/small/f$i"; done
    (cd "$T/a/small" && sha256sum f* | sort) > "$T/kept"
    sync_wait a
    set_policy a --deleted 0s --versions 0s --grace 1s
    sleep 1.5
    local point device=0
    for point in repack-written repack-appended; do
        fails env ICLOUDFS_CRASH_AT=$point "$BIN/icloudfs" gc --store "$T/store" "$CONTAINER" > "$T/out-$point" 2>&1
        device=$((device + 1))
        mount_device "c$device"
        (cd "$T/c$device/small" && sha256sum f* | sort) | diff "$T/kept" -
        fusermount3 -u "$T/c$device"
        echo "stopped at $point; $(ls "$T/store/$CONTAINER/packs"/* | wc -l) pack file(s) in the store"
    done
    sleep 1.5
    "$BIN/icloudfs" gc --store "$T/store" "$CONTAINER" > "$T/out"
    cat "$T/out"
    grep -q "^deleted [0-9]* chunk(s) ([^)]*) and [1-9][0-9]* pack(s)" "$T/out"
    "$BIN/icloudfs" status "$T/a" | grep -q "^store: .* 0 B collectable"
    mount_device d
    (cd "$T/d/small" && sha256sum f* | sort) | diff "$T/kept" -
    # The sweep cut short after its first deletion: nothing named is gone, and the next
    # collection waits for the record's deadline, saying so.
    for i in $(seq 1 200); do [ $((i % 20)) = 0 ] || rm -f "$T/a/small/f$i"; done
    (cd "$T/a/small" && sha256sum f* | sort) > "$T/kept"
    sync_wait a
    sleep 1.5
    fails env ICLOUDFS_CRASH_AT=sweep-started "$BIN/icloudfs" gc --store "$T/store" "$CONTAINER" > "$T/out-sweep" 2>&1
    mount_device e
    (cd "$T/e/small" && sha256sum f* | sort) | diff "$T/kept" -
    fails "$BIN/icloudfs" gc --store "$T/store" "$CONTAINER" > "$T/out" 2>&1
    cat "$T/out"
    grep -q "another collection .* try after it" "$T/out"
}
