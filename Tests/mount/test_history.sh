# Version history (issue 22): every content a file had is listed on every device, and any
# of them restores there, as a change that syncs.

test_a_file_edited_five_times_shows_six_versions_on_another_device() {
    mount_device a
    for i in 1 2 3 4 5 6; do
        echo "version $i" > "$T/a/notes.txt"
        sync_wait a
    done
    mount_device b
    "$BIN/icloudfs" versions "$T/b/notes.txt" > "$T/listing"
    assert_eq "$(grep -c ' a ' "$T/listing")" 6 "versions listed by b, made by device a"
    grep -q '(current)' "$T/listing"
    "$BIN/icloudfs" versions --json "$T/b/notes.txt" > "$T/versions.json"
    # Restore each version on b, newest to oldest, and read it back.
    for i in 6 5 4 3 2 1; do
        seq=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[6 - int(sys.argv[2])]["seq"])' "$T/versions.json" "$i")
        "$BIN/icloudfs" restore "$T/b/notes.txt" --version "$seq"
        assert_eq "$(cat "$T/b/notes.txt")" "version $i" "restored version $i"
    done
    # Beside the file, under a new name; the file itself stays.
    seq=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[2]["seq"])' "$T/versions.json")
    "$BIN/icloudfs" restore "$T/b/notes.txt" --version "$seq" --as "notes (v4).txt"
    assert_eq "$(cat "$T/b/notes (v4).txt")" "version 4"
    # The restores are changes: they reach a, and the history grew by them (five: restoring
    # the current version changes nothing).
    sync_wait b
    # b may upload the two restores as two commits, and a may pull between them.
    eventually 'test "$(cat "$T/a/notes.txt")" = "version 1"'
    eventually 'test "$(cat "$T/a/notes (v4).txt" 2>/dev/null)" = "version 4"'
    assert_eq "$("$BIN/icloudfs" versions --json "$T/a/notes.txt" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" 11
    # Clear errors: a version that is not kept, a name that is taken.
    fails "$BIN/icloudfs" restore "$T/a/notes.txt" --version 99999 2>"$T/err"
    grep -q "no version 99999" "$T/err"
    fails "$BIN/icloudfs" restore "$T/a/notes.txt" --version "$seq" --as "notes (v4).txt" 2>"$T/err"
    grep -q "exists" "$T/err"
}

test_a_deleted_folder_of_100_files_comes_back_whole() {
    mount_device a
    mount_device b
    mkdir -p "$T/a/project/src"
    for i in $(seq 1 100); do echo "file $i" > "$T/a/project/src/f$i.txt"; done
    echo keep > "$T/a/other.txt"
    (cd "$T/a" && find project -type f -exec sha256sum {} + | sort) > "$T/before"
    sync_wait a
    eventually 'test -e "$T/b/project/src/f100.txt"'
    # Deleted on b; listed on a with where it was, when and by whom.
    rm -r "$T/b/project"
    rm "$T/b/other.txt"
    sync_wait b
    eventually '! test -e "$T/a/project"'
    "$BIN/icloudfs" deleted "$T/a" > "$T/listing"
    assert_eq "$(grep -c ' b ' "$T/listing")" 103 "entries deleted by b"
    grep -q ' project/  \[' "$T/listing"
    assert_eq "$("$BIN/icloudfs" deleted --json "$T/a" project/src | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" 101
    # The folder comes back whole on a, and on b.
    "$BIN/icloudfs" undelete "$T/a/project" > "$T/out"
    grep -q "is back" "$T/out"
    (cd "$T/a" && find project -type f -exec sha256sum {} + | sort) > "$T/after"
    diff "$T/before" "$T/after"
    sync_wait a
    eventually 'test -e "$T/b/project/src/f100.txt"'
    (cd "$T/b" && find project -type f -exec sha256sum {} + | sort) > "$T/on-b"
    diff "$T/before" "$T/on-b"
    # One file, by its id, under a new name; what is not deleted is not listed.
    id=$("$BIN/icloudfs" deleted --json "$T/a" other.txt | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])')
    (cd "$T/a" && "$BIN/icloudfs" undelete "$id" --as "other (restored).txt")
    assert_eq "$(cat "$T/a/other (restored).txt")" keep
    assert_eq "$("$BIN/icloudfs" deleted --json "$T/a" project | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')" 0
    fails "$BIN/icloudfs" undelete "$T/a/never-there" 2>"$T/err"
    grep -q "nothing deleted is kept there" "$T/err"
}
