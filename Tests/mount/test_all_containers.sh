# mount --all: every container of a store under one mount, one folder each (dots as
# tildes), each synced on its own; new containers from other devices appear.

# mount_all NAME [STORE]: all containers of the store at $T/NAME, cache $T/cache-NAME.
mount_all() {
    mkdir -p "$T/$1"
    "$BIN/icloudfs" mount --all "$T/$1" -o "store=${2:-$T/store},cache=$T/cache-$1,device=$1,poll=200ms"
}

NOTES=iCloud~com~example~notes
GAME=iCloud~org~example~game

# all_containers_two_devices [STORE]: each device sees the containers and files the other
# makes; the per-container commands work through a container's folder.
all_containers_two_devices() {
    mount_all a "$@"
    mount_all b "$@"
    assert_eq "$(ls -A "$T/a")" "" "an empty store shows no containers"
    mkdir "$T/a/$NOTES"
    echo hello > "$T/a/$NOTES/note.txt"
    eventually 'test "$(cat "$T/b/$NOTES/note.txt")" = hello'
    mkdir -p "$T/b/$GAME/Documents"
    echo level-3 > "$T/b/$GAME/Documents/save.txt"
    eventually 'test "$(cat "$T/a/$GAME/Documents/save.txt")" = level-3'
    assert_eq "$(ls "$T/a" | tr '\n' ' ')" "$NOTES $GAME " "both containers, by folder name"
    # Each container has its own key-value store and queries.
    "$BIN/icloudfs" kv set "$T/a/$GAME" level 3
    eventually 'test "$("$BIN/icloudfs" kv get "$T/b/$GAME" level)" = 3'
    fails "$BIN/icloudfs" kv get "$T/b/$NOTES" level
    assert_eq "$("$BIN/icloudfs" query "$T/a/$GAME" --scope documents --name '*.txt')" "Documents/save.txt"
    fails "$BIN/icloudfs" kv list "$T/a" 2>"$T/err"
    grep -q "is a mount of all containers: give a container's folder in it" "$T/err"
    # The list, with each container's items and state.
    "$BIN/icloudfs" sync --wait --timeout 30s "$T/a/$NOTES"
    "$BIN/icloudfs" containers "$T/a" | tee "$T/containers"
    assert_eq "$(sed -n 1p "$T/containers" | awk '{print $1, $2, $3, $4, $5}')" "CONTAINER ITEMS SIZE LOCAL STATE"
    grep -qE '^iCloud.com.example.notes +1 +6 B +1/1 +synced$' "$T/containers"
    "$BIN/icloudfs" containers "$T/b" --json > "$T/json"
    python3 - "$T/json" "$T/b/$GAME" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
game = next(r for r in rows if r["container"] == "iCloud.org.example.game")
assert len(rows) == 2, rows
assert game["items"] == 2 and game["files"] == 1 and game["bytes"] == 8, game
assert game["path"] == sys.argv[2], game
PY
}

test_all_containers_two_devices() {
    all_containers_two_devices
    # In the store as any container is, under its own name.
    test -f "$T/store/iCloud.com.example.notes/identity"
    test -f "$T/store/iCloud.org.example.game/identity"
    # A mount of that one container alone sees the same files.
    mkdir "$T/one"
    "$BIN/icloudfs" mount iCloud.com.example.notes "$T/one" -o "store=$T/store,cache=$T/cache-one"
    assert_eq "$(cat "$T/one/note.txt")" hello
    # A single container's cache is not a cache for all.
    fusermount3 -u "$T/one"
    fails "$BIN/icloudfs" mount --all "$T/one" -o "store=$T/store,cache=$T/cache-one" 2>"$T/err"
    grep -q "is the cache of a single container" "$T/err"
}

test_all_containers_on_s3() {
    s3_required
    all_containers_two_devices "$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
}

# The top folder holds only containers; nothing moves between containers in place.
test_all_containers_folder_rules() {
    mount_all a
    mkdir "$T/a/$NOTES" "$T/a/$GAME"
    fails mkdir "$T/a/bad.name" 2>"$T/err"
    grep -q "Invalid argument" "$T/err"
    grep -q "mkdir bad.name: not a container name" "$T/cache-a/icloudfs.log"
    fails mkdir "$T/a/$NOTES" 2>"$T/err"
    grep -q "File exists" "$T/err"
    fails touch "$T/a/loose-file"
    fails rmdir "$T/a/$GAME"
    fails mv "$T/a/$GAME" "$T/a/iCloud~org~renamed"
    # Across containers mv copies (the kernel says EXDEV), ln cannot.
    echo moved > "$T/a/$NOTES/m.txt"
    mv "$T/a/$NOTES/m.txt" "$T/a/$GAME/m.txt"
    assert_eq "$(cat "$T/a/$GAME/m.txt")" moved
    test ! -e "$T/a/$NOTES/m.txt"
    fails ln "$T/a/$GAME/m.txt" "$T/a/$NOTES/link" 2>"$T/err"
    grep -q "Invalid cross-device link" "$T/err"
    # Within one container everything works as in a mount of it alone.
    mv "$T/a/$GAME/m.txt" "$T/a/$GAME/n.txt"
    ln "$T/a/$GAME/n.txt" "$T/a/$GAME/hard"
    # `..` of a container is the top folder.
    assert_eq "$(cd "$T/a/$GAME" && ls .. | tr '\n' ' ')" "$NOTES $GAME "
    assert_eq "$(stat -c %i "$T/a/$GAME/..")" "$(stat -c %i "$T/a")"
    # Node numbers stay from mount to mount (file handles name files by them).
    local before
    before=$(stat -c %i "$T/a/$GAME/n.txt")
    fusermount3 -u "$T/a"
    mount_all a
    assert_eq "$(stat -c %i "$T/a/$GAME/n.txt")" "$before" "same inode number after a remount"
    # Offline, the containers this device has are there.
    fusermount3 -u "$T/a"
    mount_all a
    "$BIN/icloudfs" sync --wait --timeout 30s "$T/a/$GAME"
    fusermount3 -u "$T/a"
    "$BIN/icloudfs" mount --all "$T/a" -o "store=$T/store,cache=$T/cache-a,offline"
    assert_eq "$(cat "$T/a/$GAME/n.txt")" moved
    # Offline no container can be made (EAGAIN), and nothing of it is left to retry.
    fails mkdir "$T/a/iCloud~made~offline" 2>"$T/err"
    grep -q "Resource temporarily unavailable" "$T/err"
    test ! -e "$T/cache-a/containers/iCloud~made~offline"
    test -d "$T/cache-a/containers/$GAME"
    fails grep -q iCloud.made.offline "$T/cache-a/containers.json"
    # Commands given the top ask for a container's folder.
    fails "$BIN/icloudfs" sync "$T/a" 2>"$T/err"
    grep -q "$T/a: is a mount of all containers: give a container's folder in it" "$T/err"
    fails "$BIN/icloudfs" status "$T/a" 2>"$T/err"
    grep -q "is a mount of all containers" "$T/err"
}

# The fstab form: mount.icloudfs with -o all (any first field; mount shows it).
test_all_containers_through_mount_helper() {
    mkdir "$T/m"
    "$BIN/mount.icloudfs" icloud "$T/m" -o "all,store=$T/store,cache=$T/cache-m"
    grep -q "^icloud $T/m fuse.icloudfs" /proc/mounts
    mkdir "$T/m/$NOTES"
    echo x > "$T/m/$NOTES/f"
    getfattr --only-values -n user.icloud.containers "$T/m" | grep -qx iCloud.com.example.notes
}

# One daemon per cache: a second mount of all on the same cache fails at once, naming the
# first; right after an unmount, a new mount waits for the old daemon to finish.
test_all_containers_one_daemon_per_cache() {
    mount_all a
    mkdir "$T/a/$NOTES"
    echo kept > "$T/a/$NOTES/f"
    mkdir "$T/second"
    fails "$BIN/icloudfs" mount --all "$T/second" -o "store=$T/store,cache=$T/cache-a" 2>"$T/err"
    grep -q "is in use by the mount of all containers at $T/a" "$T/err"
    fails grep -q "$T/second" /proc/mounts
    umount "$T/a" && mount_all a
    assert_eq "$(cat "$T/a/$NOTES/f")" kept
}

# The top folder as tools meet it, and what the store holds beside containers.
test_all_containers_top_folder_and_store_strays() {
    mount_all a
    mkdir "$T/a/lock" "$T/a/$NOTES"
    echo x > "$T/a/lock/f"
    assert_eq "$(cat "$T/a/lock/f")" x "a container named lock (the cache root has a file of that name)"
    assert_eq "$(python3 -c 'import os, sys; print(os.listxattr(sys.argv[1]))' "$T/a")" "[]" "listxattr of the top"
    touch "$T/a"
    mkdir "$T/src" && echo t > "$T/src/t" && tar -C "$T/src" -cf "$T/t.tar" .
    fails tar -C "$T/a" -xf "$T/t.tar" 2>"$T/err"
    fails grep -q "Cannot utime\|Cannot change ownership" "$T/err"
    "$BIN/icloudfs" mount --all "$T/a" -o remount,ro
    grep " $T/a " /proc/mounts | grep -q " ro,"
    "$BIN/icloudfs" mount --all "$T/a" -o remount,rw
    # A folder of the store that is not a container is not shown, and costs nothing.
    mkdir -p "$T/store/backups/2026"
    echo old > "$T/store/backups/2026/dump"
    sleep 1
    assert_eq "$(ls "$T/a" | tr '\n' ' ')" "$NOTES lock " "no folder for it"
    fails grep -q backups "$T/cache-a/containers.json"
    test ! -e "$T/cache-a/containers/backups"
    # The store out of reach: said once, and once when it is back.
    mv "$T/store" "$T/store.away"
    sleep 1.5
    mv "$T/store.away" "$T/store"
    eventually 'grep -q "are listed again" "$T/cache-a/icloudfs.log"'
    assert_eq "$(grep -c "cannot list the containers" "$T/cache-a/icloudfs.log")" 1 "one warning for the outage"
}
