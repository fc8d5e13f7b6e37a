# Metadata queries (`icloudfs query`): answered by the daemon from its tree, first result
# then live changes.

query() { "$BIN/icloudfs" query "$@"; }

# A container with documents and app data, uploaded by a and mounted on b.
two_devices_with_documents() {
    mount_device a
    mkdir -p "$T/a/Documents/sub" "$T/a/Library"
    echo one > "$T/a/Documents/a.txt"
    echo two > "$T/a/Documents/notes.md"
    echo three > "$T/a/Documents/sub/c.txt"
    echo prefs > "$T/a/Library/prefs.plist"
    sync_wait a
    mount_device b
}

test_query_scopes_names_and_sync_state() {
    two_devices_with_documents
    assert_eq "$(query "$T/b" | tr '\n' ' ')" \
        "Documents Documents/a.txt Documents/notes.md Documents/sub Documents/sub/c.txt Library Library/prefs.plist " "all"
    assert_eq "$(query "$T/b" --scope documents --name '*.txt' | tr '\n' ' ')" "Documents/a.txt Documents/sub/c.txt " "documents, *.txt"
    assert_eq "$(query "$T/b" --scope data | tr '\n' ' ')" "Library Library/prefs.plist " "data"
    assert_eq "$(query "$T/b" --name 'no?es.*' | tr '\n' ' ')" "Documents/notes.md " "a glob"
    assert_eq "$(query "$T/b" --not-downloaded | wc -l)" 4 "placeholders on b"
    cat "$T/b/Documents/a.txt" > /dev/null
    assert_eq "$(query "$T/b" --downloaded --name '*.txt')" "Documents/a.txt" "read, so downloaded"
    # JSON: one object per item with its state.
    query "$T/b" --json --name a.txt > "$T/json"
    python3 - "$T/json" <<'EOF'
import json, sys
items = [json.loads(line) for line in open(sys.argv[1])]
assert len(items) == 1, items
item = items[0]
assert item["path"] == "Documents/a.txt" and item["kind"] == "file" and item["size"] == 4, item
assert item["downloaded"] is True and item["uploaded"] is True and item["uploading"] is False, item
assert item["percentDownloaded"] == 100 and item["conflict"] is False, item
assert item["modified"].endswith("Z") and len(item["id"]) > 0, item
EOF
    # Not yet in the store: uploading, on the device that wrote it.
    mv "$T/store" "$T/store.away"
    echo offline > "$T/a/Documents/offline.txt"
    assert_eq "$(query "$T/a" --uploading)" "Documents/offline.txt" "queued while the store is away"
    mv "$T/store.away" "$T/store"
    sync_wait a
    assert_eq "$(query "$T/a" --uploading)" "" "uploaded"
    fails query "$T/b" --downloaded --not-downloaded 2>/dev/null
    fails query "$T/nowhere" 2>/dev/null
    fails query "$T/b/Documents" 2>"$T/err"
    grep -q "is inside an icloudfs mount: give the mount point itself" "$T/err"
}

test_query_live_shows_changes_from_another_device() {
    two_devices_with_documents
    query "$T/b" --live --name '*.md' > "$T/live" &
    local follower=$!
    eventually 'grep -q "^-- 1 item(s)" "$T/live"'
    assert_eq "$(head -n 1 "$T/live")" "Documents/notes.md" "the first complete result"
    echo new > "$T/a/Documents/new.md"
    sync_wait a
    eventually 'grep -qx "+ Documents/new.md" "$T/live"'
    cat "$T/b/Documents/new.md" > /dev/null
    eventually 'grep -qx "~ Documents/new.md" "$T/live"'
    rm "$T/a/Documents/new.md"
    sync_wait a
    eventually 'grep -qx -- "- Documents/new.md" "$T/live"'
    kill $follower
    cat "$T/live"
    # And as JSON lines: the marker, then changes with the item's state.
    query "$T/b" --live --json --name 'a.txt' > "$T/live.json" &
    follower=$!
    eventually 'grep -q "{\"gathered\":1}" "$T/live.json"'
    cat "$T/b/Documents/a.txt" > /dev/null
    eventually 'grep -q "\"change\":\"changed\".*\"downloaded\":true" "$T/live.json"'
    kill $follower
}

# Conditions on kind, size, modification time and the share downloaded.
test_query_kind_size_time_and_percent() {
    mount_device a
    mkdir -p "$T/a/Documents/old"
    head -c 3000 /dev/urandom > "$T/a/Documents/small.bin"
    head -c $((6 << 20)) /dev/urandom > "$T/a/Documents/big.bin"
    ln -s small.bin "$T/a/Documents/link"
    touch -d 2020-01-02T00:00:00Z "$T/a/Documents/old"
    sync_wait a
    mount_device b
    assert_eq "$(query "$T/b" --kind folder | tr '\n' ' ')" "Documents Documents/old " "folders"
    assert_eq "$(query "$T/b" --kind symlink --kind file | tr '\n' ' ')" "Documents/big.bin Documents/link Documents/small.bin " "two kinds"
    assert_eq "$(query "$T/b" --min-size 1M)" "Documents/big.bin" "at least 1 MiB"
    assert_eq "$(query "$T/b" --max-size 3000)" "Documents/small.bin" "at most 3000 bytes (files only)"
    assert_eq "$(query "$T/b" --modified-before 2021-01-01)" "Documents/old" "before a date"
    assert_eq "$(query "$T/b" --modified-after 1h --kind folder)" "Documents" "within the last hour"
    # A read downloads the whole file (partly downloaded is a passing state).
    cat "$T/b/Documents/big.bin" > /dev/null
    eventually 'test "$(query "$T/b" --min-percent-downloaded 100)" = Documents/big.bin'
    assert_eq "$(query "$T/b" --max-percent-downloaded 0)" "Documents/small.bin" "nothing of it here"
    fails query "$T/b" --kind dir 2>"$T/err"
    grep -q "not a kind" "$T/err"
    fails query "$T/b" --modified-after yesterday 2>"$T/err"
    grep -q "not a time" "$T/err"
    fails query "$T/b" --min-percent-downloaded 101 2>/dev/null
}

test_query_live_on_s3() {
    s3_required
    MOUNT_OPTIONS="store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
    test_query_live_shows_changes_from_another_device
}
