# The key-value store (`icloudfs kv`): synced between devices, the latest write wins, the
# limits refused at write, offline writes sent later.

kv() { "$BIN/icloudfs" kv "$@"; }

# The value of KEY in the newest (by time, then device id) store record that sets or
# removes it, as JSON ("removed" if removed): what every device must end with.
latest_in_records() {
    python3 - "$1" "$2" <<'EOF'
import json, os, sys
folder, key = sys.argv[1], sys.argv[2]
best = None
for name in sorted(os.listdir(folder)):
    record = json.load(open(os.path.join(folder, name)))
    stamp = (record["time"]["s"], record["time"]["ns"], record["deviceID"])
    if key in record["set"] or key in record["removed"]:
        value = json.dumps(record["set"][key], separators=(",", ":")) if key in record["set"] else "removed"
        if best is None or stamp > best[0]:
            best = (stamp, value)
print(best[1] if best else "absent")
EOF
}

# kv_devices_converge [STORE_OPTION]: three devices; a watcher on b sees a's write as a
# server change with its keys; three writes of one key at once end as the latest everywhere.
kv_devices_converge() {
    for d in a b c; do mount_device $d "${1:-}"; done
    kv watch "$T/b" > "$T/watch" &
    local watcher=$!
    sleep 0.5
    kv set "$T/a" level 3 name '"Ada"' cities '["Oslo","Lima"]' temp -3
    eventually 'test "$(kv get "$T/b" name)" = "\"Ada\""'
    # c polls on its own: b having it says nothing of c.
    eventually 'test "$(kv get "$T/c" cities)" = "[\"Oslo\",\"Lima\"]"'
    assert_eq "$(kv get "$T/c" temp)" -3 "a negative number is a value, not an option"
    eventually 'grep -q "\"keys\":\[\"cities\",\"level\",\"name\",\"temp\"\],\"reason\":\"ServerChange\"" "$T/watch"'
    kill $watcher
    # The same key from three devices at once.
    kv set "$T/a" level 10 & kv set "$T/b" level 20 & kv set "$T/c" level 30 & wait
    eventually 'test "$(kv get "$T/a" level)" = "$(kv get "$T/b" level)" && test "$(kv get "$T/b" level)" = "$(kv get "$T/c" level)"'
}

test_kv_devices_converge_on_the_latest_write() {
    kv_devices_converge
    local records="$T/store/$CONTAINER/kv"
    eventually 'test "$(ls "$records" | wc -l)" = 4'
    local latest
    latest=$(latest_in_records "$records" level)
    for d in a b c; do assert_eq "$(kv get "$T/$d" level)" "$latest" "device $d ends with the latest write"; done
    # A removal is a write too.
    kv rm "$T/c" level
    eventually 'fails kv get "$T/a" level'
    fails kv rm "$T/a" level 2>"$T/err"
    grep -q 'no key "level"' "$T/err"
}

# A new device's first values come as an initial sync, also to a watcher started after the
# mount (its first sync ran at once); later writes as server changes.
test_kv_new_device_gets_an_initial_sync() {
    mount_device a
    kv set "$T/a" level 3 name '"Ada"'
    sync_wait a
    eventually 'test -n "$(ls "$T/store/$CONTAINER/kv")"'
    mount_device b
    kv watch "$T/b" > "$T/watch" &
    local watcher=$!
    eventually 'grep -q "{\"keys\":\[\"level\",\"name\"\],\"reason\":\"InitialSyncChange\"}" "$T/watch"'
    kv set "$T/a" level 4
    eventually 'grep -q "{\"keys\":\[\"level\"\],\"reason\":\"ServerChange\"}" "$T/watch"'
    kill $watcher
    assert_eq "$(grep -c InitialSyncChange "$T/watch")" 1 "once"
}

test_kv_limits_are_refused() {
    mount_device a
    local args=()
    for i in $(seq 1 1024); do args+=("k$i" "$i"); done
    kv set "$T/a" "${args[@]}"
    fails kv set "$T/a" one-too-many 1 2>"$T/err"
    cat "$T/err"
    grep -q "1025 keys; at most 1024" "$T/err"
    assert_eq "$(wc -l < "$T/err")" 1 "one line"
    assert_eq "$(kv list "$T/a" | wc -l)" 1024 "nothing recorded"
    # Replacing a value is not a new key.
    kv set "$T/a" k1 '"one"'
    args=()
    for i in $(seq 1 1024); do args+=("k$i"); done
    kv rm "$T/a" "${args[@]}"
    assert_eq "$(kv list "$T/a" | wc -l)" 0 "all removed in one write"
    # 1 MiB for keys and values together: ten values of 100,000 bytes fit, an eleventh not.
    local value
    value="\"$(head -c 99998 /dev/zero | tr '\0' x)\""
    for i in $(seq 1 10); do kv set "$T/a" "big$i" "$value"; done
    fails kv set "$T/a" big11 "$value" 2>"$T/err"
    grep -q "at most 1048576 (1 MiB) for keys and values together" "$T/err"
    fails kv set "$T/a" "$(printf 'k%.0s' $(seq 1 65))" 1 2>"$T/err"
    grep -q "is 65 bytes; at most 64 bytes of UTF-8" "$T/err"
    fails kv set "$T/a" nothing null 2>"$T/err"
    grep -q "is not JSON (or is null)" "$T/err"
    fails kv set "$T/a" odd 2>"$T/err"
    fails kv get "$T/a" big11
    assert_eq "$(kv list "$T/a" | wc -l)" 10 "the refused writes left nothing"
}

test_kv_offline_writes_are_sent_later() {
    mount_device a
    mount_device b
    kv set "$T/a" before 1
    eventually 'test "$(kv get "$T/b" before)" = 1'
    mv "$T/store" "$T/store.away"
    kv set "$T/a" city '"Quito"'
    assert_eq "$(kv get "$T/a" city)" '"Quito"' "read back while offline"
    # Kept across a remount while the store is away.
    fusermount3 -u "$T/a"
    mv "$T/store.away" "$T/store"
    fails kv get "$T/b" city
    mount_device a
    eventually 'test "$(kv get "$T/b" city)" = "\"Quito\""'
    assert_eq "$(kv get "$T/b" before)" 1
}

test_kv_on_s3() {
    s3_required
    kv_devices_converge "store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
    for d in a b c; do assert_eq "$(kv get "$T/$d" name)" '"Ada"'; done
}

# kv and query take a mounted container's name instead of its folder.
test_kv_by_container_name() {
    mount_device a
    kv set "$CONTAINER" level 5
    assert_eq "$(kv get "$T/a" level)" 5
    assert_eq "$(kv get "$CONTAINER" level)" 5
    echo x > "$T/a/f.txt"
    assert_eq "$("$BIN/icloudfs" query "$CONTAINER" --name f.txt)" f.txt
    mount_device b
    fails kv get "$CONTAINER" level 2>"$T/err"
    grep -q "is mounted at $T/a, $T/b: give one of them" "$T/err"
    fails kv get iCloud.com.example.nothere level 2>"$T/err"
    grep -q "no mount of a container of that name here" "$T/err"
}
