# POSIX behaviour ordinary programs rely on (docs/SEMANTICS.md).
test_posix_operations() {
    mount_device a
    cd "$T/a"
    echo one > f
    echo two >> f
    assert_eq "$(cat f)" "$(printf 'one\ntwo')" "append"
    truncate -s 2 f
    assert_eq "$(cat f)" "on" "truncate"
    truncate -s 4 f
    assert_eq "$(od -An -c f | tr -s ' ')" " o n \\0 \\0" "extend with zeros"
    mv f g
    test ! -e f
    echo other > h
    mv g h
    assert_eq "$(od -An -c h | tr -s ' ')" " o n \\0 \\0" "rename over a file"
    mkdir -p d/e
    echo inner > d/e/x
    mv d d2
    assert_eq "$(cat d2/e/x)" inner "rename a folder"
    fails rmdir d2 2>"$T/err"
    grep -q "not empty" "$T/err"
    ln -s h link
    assert_eq "$(readlink link)" h
    chmod 600 h
    assert_eq "$(stat -c %a h)" 600
    touch -d "2020-01-02 03:04:05 UTC" h
    assert_eq "$(stat -c %Y h)" 1577934245
    df "$T/a" >/dev/null
    setfattr -n user.color -v red h
    assert_eq "$(getfattr --only-values -n user.color h)" red
    setfattr -x user.color h
    fails getfattr -n user.color h 2>/dev/null
    python3 -c "import mmap,sys; f=open('d2/e/x','rb'); m=mmap.mmap(f.fileno(),0,access=mmap.ACCESS_READ); assert m[:5]==b'inner'"
    fails python3 -c 'import os; os.link("d2", "hardlink")' 2>"$T/err"  # link(2) of a folder
    grep -q "Operation not permitted" "$T/err"
    dd if=/dev/urandom of="$T/random" bs=1M count=8 status=none
    dd if="$T/random" of=big bs=1M conv=fsync status=none
    cmp big "$T/random"
    rm -r d2 big
    assert_eq "$(ls)" "$(printf 'h\nlink')"
    sync_wait a
    mount_device b
    assert_eq "$(ls "$T/b")" "$(printf 'h\nlink')" "second device"
    assert_eq "$(stat -c '%a %Y %s' "$T/b/h")" "600 1577934245 4"
}

# Editors and tools that rewrite files their own ways.
test_editors_and_tools() {
    mount_device a
    cd "$T/a"
    printf 'hello world\n' > notes.txt
    sed -i 's/world/there/' notes.txt
    assert_eq "$(cat notes.txt)" "hello there" "sed -i"
    vim -es -c '%s/hello/bye/' -c 'wq' notes.txt
    assert_eq "$(cat notes.txt)" "bye there" "vim"
    local source=/usr/include/linux
    cp -a "$source/netfilter" copied
    diff -r "$source/netfilter" copied
    rsync -a "$source/netfilter/" synced/
    diff -r "$source/netfilter" synced
    tar -C "$source" -cf "$T/tree.tar" netfilter netfilter_ipv4
    mkdir untarred
    tar -C untarred -xf "$T/tree.tar"
    diff -r "$source/netfilter_ipv4" untarred/netfilter_ipv4
    git init -q repo
    (cd repo && echo "# readme" > README.md && git add README.md && git -c user.email=t@e -c user.name=t commit -qm first)
    git clone -q repo clone
    assert_eq "$(cat clone/README.md)" "# readme" "git clone"
    (cd clone && echo more >> README.md && git -c user.email=t@e -c user.name=t commit -qam second && git log --oneline | wc -l) > "$T/count"
    assert_eq "$(cat "$T/count")" 2 "git commit"
    sync_wait a
    mount_device b
    diff -r "$T/a" "$T/b"
    # tar sets each file's mode and time before closing it: both reach the other device.
    local expected
    expected=$(cd "$source" && find netfilter_ipv4 -type f -exec stat -c '%n %a %Y' {} + | sort)
    for device in a b; do
        assert_eq "$(cd "$T/$device/untarred" && find netfilter_ipv4 -type f -exec stat -c '%n %a %Y' {} + | sort)" \
            "$expected" "tar x modes and times on $device"
    done
}

test_four_processes_of_random_operations() {
    mount_device a
    mkdir "$T/a/w"
    local pids=() p
    # Seeded: a failure replays. Files grow sparse up to 16 MiB; the processes collide.
    for p in 1 2 3 4; do
        timeout 300 python3 "$REPO/Scripts/bench-lib/random_ops.py" "$T/a/w" "$p" 300 --max-offset 16777216 \
            > "$T/ops-$p" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { cat "$T"/ops-*; false; }; done
    sync_wait a
    mount_device b
    (cd "$T/a/w" && find . -type f -exec sha256sum {} + | sort -k2) > "$T/a.sums"
    test -s "$T/a.sums"
    eventually '(cd "$T/b/w" && find . -type f -exec sha256sum {} + | sort -k2) > "$T/b.sums" && cmp "$T/a.sums" "$T/b.sums"'
}

test_sparse_file_stays_sparse_on_another_device() {
    mount_device a
    # 1 GiB, three islands of data in zeros.
    truncate -s 1G "$T/a/sparse"
    for at in 0 300 1000; do
        head -c 100000 /dev/urandom | dd of="$T/a/sparse" bs=1M seek="$at" conv=notrunc status=none
    done
    sum=$(sha256sum < "$T/a/sparse")
    sync_wait a
    # The store holds the islands and a few zero chunks, not 1 GiB.
    test "$(du -sm "$T/store" | cut -f1)" -lt 64
    mount_device b
    # du counts the islands only (st_blocks: the bytes that are not holes), before a read.
    test "$(du -m "$T/b/sparse" | cut -f1)" -lt 64
    assert_eq "$(sha256sum < "$T/b/sparse")" "$sum"
    # Read whole on the second device, its cache copy holds the islands, the rest holes.
    test "$(du -sm "$T/cache-b" | cut -f1)" -lt 64
}

test_fallocate_behaves_as_on_a_local_disk() {
    mount_device a
    head -c 300000 /dev/urandom > "$T/base"
    # The same sequence on a local disk and on the mount: sizes and bytes must match.
    for f in "$T/f" "$T/a/f"; do
        cp "$T/base" "$f"
        fallocate -l 1000000 "$f"                  # grows with zeros
        fallocate -n -o 0 -l 2000000 "$f"          # reserves space, the size stays
        fallocate -p -o 4096 -l 8192 "$f"          # a hole in the data
        fallocate -z -o 200000 -l 50000 "$f"       # zeros inside
        fallocate -z -o 900000 -l 200000 "$f"      # zeros past the end: grows
        fallocate -x -l 1500000 "$f"               # posix_fallocate
        fallocate -d "$f"                          # zeros found and punched
    done
    assert_eq "$(stat -c %s "$T/a/f")" "$(stat -c %s "$T/f")"
    cmp "$T/a/f" "$T/f"
    # Collapsing a range is not offered.
    fails fallocate -c -o 0 -l 4096 "$T/a/f"
    sync_wait a
    mount_device b
    cmp "$T/b/f" "$T/f"
}

test_rsync_and_cp_a_round_trip_links_fifos_owners_modes_times_xattrs() {
    mount_device a
    mkdir -p "$T/src/sub"
    echo one > "$T/src/f1"
    echo two > "$T/src/sub/f2"
    ln -s f1 "$T/src/link"
    ln "$T/src/f1" "$T/src/sub/hard1"
    ln "$T/src/f1" "$T/src/hard2"
    mkfifo -m 600 "$T/src/pipe"
    ln "$T/src/pipe" "$T/src/sub/pipe2"
    chown 1234:5678 "$T/src/f1"
    chown -h 42:43 "$T/src/link"
    chown 7:8 "$T/src/sub"
    chmod 4755 "$T/src/f1"
    chmod 2775 "$T/src/sub"
    setfattr -n user.tag -v red "$T/src/sub/f2"
    # Times in the past: rsync compares whole seconds, so a copy made in the second its
    # source was made would keep the copy's own time (on any filesystem).
    find "$T/src" -depth -exec touch -h -d '2020-05-06 07:08:09.987654321' {} +
    touch -d '2001-02-03 04:05:06.123456789' "$T/src/sub/f2"
    # Owners, modes with set-id bits, nanosecond times, symlinks, FIFOs, user xattrs and
    # link counts and sizes, as stat shows them, and which names are one file (grouped by
    # inode).
    listing() {
        (cd "$1" && find . -mindepth 1 -printf '%p %M %U %G %T@ %n %s %l\n' | sort; getfattr -n user.tag sub/f2
         find . -links +1 ! -type d -printf '%i %p\n' | sort | awk '{ names[$1] = names[$1] " " $2 } END { for (i in names) print names[i] }' | sort)
    }
    cp -a "$T/src" "$T/a/cp"
    rsync -aHX "$T/src/" "$T/a/rsync/"
    # Uploaded first: rsync reads each attribute's size, then its value, and a folder's
    # percentUploaded may change between the two while uploads run (rsync then says code 23).
    sync_wait a
    rsync -aHX "$T/src/" "$T/a/rsync/"  # again: nothing to do, no error (the sync-state attributes)
    listing "$T/src" > "$T/src.list"
    listing "$T/a/cp" > "$T/cp.list"
    listing "$T/a/rsync" > "$T/rsync.list"
    diff "$T/src.list" "$T/cp.list"
    diff "$T/src.list" "$T/rsync.list"
}

test_copy_file_range_copies_inside_the_daemon() {
    mount_device a
    head -c 3000000 /dev/urandom > "$T/source"
    cp "$T/source" "$T/a/source"
    sync_wait a
    # Into a new file, into the middle of another, from a placeholder (a second device), and
    # past the source's end (a short copy), each compared with the same copy on a local disk.
    python3 - "$T" <<'PY'
import os, sys
t = sys.argv[1]
def copy(src, dst, count, src_at, dst_at):
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        return os.copy_file_range(s, d, count, src_at, dst_at)
    finally:
        os.close(s); os.close(d)
for folder in (t, t + "/a"):
    with open(folder + "/target", "wb") as f:
        f.write(b"x" * 100000)
    assert copy(folder + "/source", folder + "/target", 1 << 20, 12345, 5000) == 1 << 20
    assert copy(folder + "/source", folder + "/copy", 3000000, 0, 0) == 3000000
    assert copy(folder + "/source", folder + "/tail", 1 << 20, 2999000, 7) == 1000
PY
    for name in target copy tail; do cmp "$T/$name" "$T/a/$name"; done
    sync_wait a
    mount_device b
    python3 - "$T/b" <<'PY'
import os, sys
b = sys.argv[1]
s = os.open(b + "/source", os.O_RDONLY)
d = os.open(b + "/fromplaceholder", os.O_CREAT | os.O_WRONLY, 0o644)
assert os.copy_file_range(s, d, 500000, 2000000, 0) == 500000
PY
    cmp <(tail -c +2000001 "$T/source" | head -c 500000) "$T/b/fromplaceholder"
    for name in target copy tail; do cmp "$T/$name" "$T/b/$name"; done
}

test_open_file_still_works_after_unlink() {
    mount_device a
    # As stress-ng and many programs do with temporary files: open, unlink, go on using the
    # descriptor (fstat, lseek SEEK_END and ftruncate answered ENOENT before).
    python3 - "$T/a/tmp" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
os.unlink(sys.argv[1])
os.write(fd, b"hello world")
assert os.fstat(fd).st_size == 11, os.fstat(fd)
assert os.lseek(fd, 0, os.SEEK_END) == 11
os.ftruncate(fd, 5)
assert os.fstat(fd).st_size == 5
assert os.pread(fd, 100, 0) == b"hello"
os.close(fd)
PY
    test ! -e "$T/a/tmp"
}
