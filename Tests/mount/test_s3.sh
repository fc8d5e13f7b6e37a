# The same container in S3 (the server Scripts/test starts with Scripts/s3-server); each
# test is skipped, with a note, when the ICLOUDFS_TEST_S3_* variables are not set.
s3_required() {
    [ -n "${ICLOUDFS_TEST_S3_ENDPOINT:-}" ] || skip "no S3 test server (ICLOUDFS_TEST_S3_ENDPOINT is not set; Scripts/test starts one)"
}
# s3_url PREFIX [BUCKET] [ENDPOINT]
s3_url() {
    echo "s3://${2:-$ICLOUDFS_TEST_S3_BUCKET}/$1?endpoint=${3:-$ICLOUDFS_TEST_S3_ENDPOINT}&region=${ICLOUDFS_TEST_S3_REGION:-us-east-1}"
}

# Two mounted devices of one container in a bucket: placeholders, downloads, edits, renames.
test_s3_two_devices() {
    s3_required
    local store
    store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")
    mount_device a "store=$store"
    mkdir "$T/a/Documents"
    head -c 3000000 /dev/urandom > "$T/source.bin"
    cp "$T/source.bin" "$T/a/Documents/data.bin"
    echo first > "$T/a/Documents/note.txt"
    sync_wait a
    assert_eq "$(xattr isUploaded "$T/a/Documents/data.bin")" 1 "uploaded on a"
    mount_device b "store=$store"
    local f="$T/b/Documents/data.bin"
    assert_eq "$(stat -c %s "$f")" 3000000 "size before download"
    assert_eq "$(xattr isDownloaded "$f")" 0 "a placeholder on b"
    assert_eq "$(sha256sum < "$f")" "$(sha256sum < "$T/source.bin")" "content read on b"
    assert_eq "$(xattr isDownloaded "$f")" 1
    echo second > "$T/a/Documents/note.txt"
    sync_wait a
    eventually 'grep -q second "$T/b/Documents/note.txt"'
    mv "$T/b/Documents/note.txt" "$T/b/Documents/renamed.txt"
    sync_wait b
    eventually 'test -f "$T/a/Documents/renamed.txt"'
    test ! -e "$T/a/Documents/note.txt"
    assert_eq "$(xattr percentUploaded "$T/a")" 100 "container progress"
}

# mount_fails_with TEXT MOUNT_ARGS...: the mount fails, printing one line that contains TEXT.
mount_fails_with() {
    local text=$1
    shift
    if "$@" 2>"$T/err"; then
        echo "    mount succeeded: $*"
        return 1
    fi
    cat "$T/err"
    grep -qF -- "$text" "$T/err" || { echo "    no '$text' in the error"; return 1; }
    assert_eq "$(wc -l < "$T/err")" 1 "one line"
}

# Each S3 failure at mount time is one clear line, and nothing is left mounted.
test_s3_errors_are_clear() {
    s3_required
    mkdir "$T/m"
    mount_fails_with "S3 bucket 'icloudfs-no-such-bucket' does not exist at $ICLOUDFS_TEST_S3_ENDPOINT" \
        "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "cache=$T/c1,store=$(s3_url p icloudfs-no-such-bucket)"
    mount_fails_with "refused the credentials (SignatureDoesNotMatch" \
        env AWS_SECRET_ACCESS_KEY=not-the-secret "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "cache=$T/c2,store=$(s3_url p)"
    grep -qF "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" "$T/err"
    if grep -q not-the-secret "$T/err"; then echo "    the secret was shown"; return 1; fi
    mount_fails_with "S3 endpoint http://127.0.0.1:1 is unreachable (connection refused)" \
        "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "cache=$T/c3,store=$(s3_url p "$ICLOUDFS_TEST_S3_BUCKET" http://127.0.0.1:1)"
    mount_fails_with "no S3 credentials: set AWS_ACCESS_KEY_ID" \
        env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE HOME="$T" \
        "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "cache=$T/c4,store=$(s3_url p)"
    if grep -q "$T/m" /proc/mounts; then echo "    left mounted"; return 1; fi
}

# Collection on S3 (no locks there): what nothing names goes, a chunk a device names during
# the grace stays, and a new device reads the compacted container.
test_s3_collection() {
    s3_required
    local store
    store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")
    mount_device a "store=$store"
    mount_device b "store=$store,upload_limit=400K"
    for i in 1 2 3; do head -c 2000000 /dev/urandom > "$T/a/gone$i.bin"; done
    head -c 2000000 /dev/urandom > "$T/old.bin"
    cp "$T/old.bin" "$T/a/old.bin"
    echo kept > "$T/a/kept.txt"
    sync_wait a
    rm "$T/a/gone"* "$T/a/old.bin"
    sync_wait a
    "$BIN/icloudfs" policy "$T/a" --deleted 0s --versions 0s --grace 3s > /dev/null
    sleep 3.5
    "$BIN/icloudfs" gc "$T/a" > "$T/out" 2>&1 &
    local collector=$!
    # Named again while the collection waits (chunks found in the store, the rest slow).
    sleep 1
    { cat "$T/old.bin"; head -c 1500000 /dev/urandom; } > "$T/again.bin"
    cp "$T/again.bin" "$T/b/again.bin"
    wait "$collector"
    cat "$T/out"
    grep -q "deleted [1-9][0-9]* chunk(s)" "$T/out"
    sync_wait b
    eventually 'test -e "$T/a/again.bin"'
    # b published again.bin metadata first (upload_limit): until a has pulled the entry that
    # says its chunks arrived, a counts them as collectable.
    eventually '"$BIN/icloudfs" status "$T/a" | grep "^store:" | tee "$T/usage" | grep -q "0 B collectable"'
    mount_device c "store=$store"
    assert_eq "$(sha256sum < "$T/c/again.bin")" "$(sha256sum < "$T/again.bin")" "read on a new device"
    assert_eq "$(cat "$T/c/kept.txt")" kept
    test ! -e "$T/c/gone1.bin"
}

# Version history and recently deleted on S3: the directory store's tests, run again.
test_s3_six_versions_on_another_device() {
    s3_required
    MOUNT_OPTIONS="store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
    test_a_file_edited_five_times_shows_six_versions_on_another_device
}

test_s3_deleted_folder_comes_back_whole() {
    s3_required
    MOUNT_OPTIONS="store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
    test_a_deleted_folder_of_100_files_comes_back_whole
}

test_s3_gc_brings_the_store_to_live_data_plus_retained_history() {
    s3_required
    MOUNT_OPTIONS="store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")"
    test_gc_brings_the_store_to_live_data_plus_retained_history
}

# A push to S3 stopped (SIGKILL) at each step of a pack, in turn: the pack stored and no
# entry naming it, then the entry appended and not recorded by the device. The files are
# written offline (`-o offline`: nothing pushed), so the push starts on the next mount,
# armed to stop. A new device then reads every file whole, and a collection leaves nothing
# collectable. (S3 PUTs are whole or absent: no half-written object to leave.)
test_s3_a_push_stopped_at_each_step_of_a_pack_loses_nothing() {
    s3_required
    local store point daemon i
    store=$(s3_url "mount-tests/$(basename "$T")-$$-$RANDOM")
    mkdir -p "$T/expected"
    mount_device a "store=$store"
    echo first > "$T/a/first.txt"  # entry 1: the files below start a batch of their own
    sync_wait a
    fusermount3 -u "$T/a"
    for point in pack-written entry-appended; do
        mount_device a "store=$store,offline"
        write_fsynced_files a "$point" "$point"
        unmount_until_gone a
        (export ICLOUDFS_CRASH_AT=$point; mount_device a "store=$store") || true  # it may stop before the mount is ready
        daemon=$(daemon_of a)
        eventually '! kill -0 "$daemon"'
        fusermount3 -u "$T/a" 2>/dev/null || umount -l "$T/a" 2>/dev/null || true
        echo "stopped at $point"
    done
    mount_device a "store=$store"
    sync_wait a
    mount_device b "store=$store"
    for point in pack-written entry-appended; do
        for i in $(seq 1 30); do cmp "$T/b/$point/f$i" "$T/expected/$point-f$i"; done
    done
    set_policy a --deleted 0s --versions 0s --grace 1s
    sleep 1.5
    "$BIN/icloudfs" gc "$T/a"
    "$BIN/icloudfs" status "$T/a" | grep -q "^store: .* 0 B collectable"
    for point in pack-written entry-appended; do
        for i in $(seq 1 30); do cmp "$T/b/$point/f$i" "$T/expected/$point-f$i"; done
    done
}
