# The kernel layer (Sources/FuseKernel): the protocol spoken on /dev/fuse, and passthrough
# (docs/SEMANTICS.md "Passthrough"): reads of a complete local copy served by the kernel.

# kernel_count NAME KIND: requests of KIND ("read", "write") the mount at $T/NAME received.
kernel_count() {
    getfattr --only-values -n user.icloud.kernel "$T/$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2; found=1} END {if (!found) print 0}'
}
kernel_word() {
    getfattr --only-values -n user.icloud.kernel "$T/$1" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k {print $2}'
}

test_downloaded_files_are_read_by_the_kernel_without_read_requests() {
    mount_device a
    head -c 20M /dev/urandom > "$T/source"
    cp "$T/source" "$T/a/photo"
    sync_wait a
    mount_device b
    assert_eq "$(kernel_word b passthrough)" on "passthrough"
    # A placeholder still downloads on read: through READ requests.
    cmp "$T/source" "$T/b/photo"
    local after_download
    after_download=$(kernel_count b read)
    [ "$after_download" -gt 0 ] || { echo "    the download's reads never reached the daemon"; false; }
    assert_eq "$(xattr isDownloaded "$T/b/photo")" 1
    # Its copy is complete now: the next opens are the kernel's, cold and warm.
    sync
    echo 3 > /proc/sys/vm/drop_caches
    cmp "$T/source" "$T/b/photo"
    cmp "$T/source" "$T/b/photo"
    dd if="$T/b/photo" of=/dev/null bs=1M iflag=direct status=none
    assert_eq "$(kernel_count b read)" "$after_download" "READ requests after the copy was complete"
    [ "$(kernel_word b passthroughOpens)" -ge 3 ]
    # mmap reads the same bytes.
    python3 -c '
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "rb") as g:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    assert m[:] == g.read(), "mmap differs"
' "$T/b/photo" "$T/source"
}

# A download lands in 2 MiB windows shared by the chunks around their edges, and readers join
# each other's fetches: sequential and random readers at once must each see the file's bytes.
test_concurrent_readers_of_a_placeholder_see_its_bytes() {
    mount_device a
    head -c 48M /dev/urandom > "$T/source"
    cp "$T/source" "$T/a/big"
    sync_wait a
    mount_device b
    python3 - "$T/b/big" "$T/source" <<'PY'
import os, random, sys, threading
seed = random.randrange(1 << 30)
print("    seed", seed)
path, source = sys.argv[1], open(sys.argv[2], "rb").read()
bad = []
def reader(rng, sequential):
    fd = os.open(path, os.O_RDONLY)
    offset = rng.randrange(len(source) // 2)
    for _ in range(200):
        count = rng.choice([4096, 131072, 1 << 20, 3 << 20]) if sequential else rng.randrange(1, 1 << 21)
        if not sequential:
            offset = rng.randrange(len(source))
        if os.pread(fd, count, offset) != source[offset:offset + count]:
            bad.append((offset, count))
        offset += count
        if offset >= len(source):
            break
    os.close(fd)
rng = random.Random(seed)
threads = [threading.Thread(target=reader, args=(random.Random(rng.random()), n < 2)) for n in range(6)]
for t in threads: t.start()
for t in threads: t.join()
assert not bad, f"reads that differ (offset, count): {bad[:5]}"
PY
    cmp "$T/source" "$T/b/big"
}

test_nopassthrough_serves_every_read_itself() {
    mount_device a nopassthrough
    echo "through the daemon" > "$T/a/f"
    assert_eq "$(cat "$T/a/f")" "through the daemon"
    assert_eq "$(kernel_word a passthrough)" off
    assert_eq "$(kernel_word a passthroughOpens)" 0
}

test_evict_of_an_open_passthrough_file_is_refused() {
    mount_device a
    echo "kept while open" > "$T/a/f"
    sync_wait a
    exec 3<"$T/a/f"
    [ "$(kernel_word a passthroughOpens)" -ge 1 ]
    fails "$BIN/icloudfs" evict "$T/a/f" 2>"$T/err"
    grep -q "open" "$T/err"
    assert_eq "$(cat <&3)" "kept while open"
    exec 3<&-
    "$BIN/icloudfs" evict "$T/a/f"
    assert_eq "$(xattr isDownloaded "$T/a/f")" 0
    assert_eq "$(cat "$T/a/f")" "kept while open"
}

# A new version from another device, written in place, does not change the bytes under an
# open (as a file replaced by a rename keeps being read on a local disk): the open reads the
# old version to its end, by read and by mmap; `stat` and opens meanwhile show that version
# too, whole; the first open after all close reads the new one.
remote_version_during_a_read() {
    mount_device a
    mount_device b "$1"
    head -c 3M /dev/urandom > "$T/v1"
    head -c 2M /dev/urandom > "$T/v2"
    cp "$T/v1" "$T/a/doc"
    sync_wait a
    eventually 'cmp -s "$T/v1" "$T/b/doc"'
    local reads
    reads=$(kernel_count b read)
    exec 3<"$T/b/doc"
    head -c 1M <&3 > "$T/first"
    python3 -c 'import mmap, sys; f = open(sys.argv[1], "rb"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); open(sys.argv[2], "wb").write(m[:])' "$T/b/doc" "$T/mapped-before" &
    wait $!
    cp "$T/v2" "$T/a/doc"
    sync_wait a
    sleep 1  # b pulls within its poll (200 ms)
    assert_eq "$(stat -c %s "$T/b/doc")" 3145728 "size while the old version is open"
    cmp "$T/v1" "$T/b/doc"  # an open meanwhile reads that version too
    cat <&3 > "$T/rest"
    if [ -z "$1" ]; then assert_eq "$(kernel_count b read)" "$reads" "READ requests while the old version was read"; fi
    exec 3<&-
    cat "$T/first" "$T/rest" | cmp - "$T/v1"
    cmp "$T/mapped-before" "$T/v1"
    eventually 'cmp -s "$T/v2" "$T/b/doc"'
    assert_eq "$(stat -c %s "$T/b/doc")" 2097152 "size after the close"
}

test_a_remote_version_during_a_passthrough_read_shows_at_the_next_open() {
    remote_version_during_a_read ""
}

test_a_remote_version_during_a_daemon_served_read_shows_at_the_next_open() {
    remote_version_during_a_read nopassthrough
}

# An open for writing that arrives while the kernel serves the file (a `tail -f` open
# first, then a program appending) is the kernel's too: its writes reach the other device.
test_a_writer_after_a_passthrough_reader_is_synced() {
    mount_device a
    printf 'line 1\n' > "$T/a/log"
    sync_wait a
    exec 3<"$T/a/log"
    [ "$(kernel_word a passthroughOpens)" -ge 1 ]
    for i in 2 3 4; do printf 'line %s\n' "$i" >> "$T/a/log"; done
    assert_eq "$(stat -c %s "$T/a/log")" 28 "size while written by the kernel"
    assert_eq "$(cat <&3)" "$(printf 'line 1\nline 2\nline 3\nline 4')"
    exec 3<&-
    sync_wait a
    mount_device b
    assert_eq "$(cat "$T/b/log")" "$(printf 'line 1\nline 2\nline 3\nline 4')"
    assert_eq "$(xattr isUploaded "$T/a/log")" 1
}

# File handles (name_to_handle_at, open_by_handle_at: what an NFS export and fanotify use)
# stay valid after the kernel forgot the file, and after a remount.
test_file_handles_outlive_the_kernel_cache_and_a_remount() {
    mount_device a
    mkdir -p "$T/a/dir/sub"
    echo deep > "$T/a/dir/sub/f"
    cat > "$T/handles.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
def save(path, out):
    h, mount_id = Handle(128), ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(h), ctypes.byref(mount_id), 0) != 0:
        sys.exit("name_to_handle_at: " + os.strerror(ctypes.get_errno()))
    open(out, "wb").write(bytes(h)[: 8 + h.bytes])
def opened(mount, saved):
    raw = open(saved, "rb").read()
    h = Handle.from_buffer_copy(raw + bytes(ctypes.sizeof(Handle) - len(raw)))
    root = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
    fd = libc.open_by_handle_at(root, ctypes.byref(h), os.O_RDONLY)
    if fd < 0:
        sys.exit("open_by_handle_at: " + os.strerror(ctypes.get_errno()))
    return fd
if sys.argv[1] == "save":
    save(sys.argv[2], sys.argv[3])
elif sys.argv[1] == "read":
    print(os.read(opened(sys.argv[2], sys.argv[3]), 100).decode(), end="")
else:  # the path a folder's handle reconnects to
    print(os.readlink("/proc/self/fd/%d" % opened(sys.argv[2], sys.argv[3])))
PY
    python3 "$T/handles.py" save "$T/a/dir/sub/f" "$T/file-handle"
    python3 "$T/handles.py" save "$T/a/dir/sub" "$T/folder-handle"
    sync
    echo 2 > /proc/sys/vm/drop_caches  # dentries and inodes: the kernel forgets them
    assert_eq "$(python3 "$T/handles.py" read "$T/a" "$T/file-handle")" deep "after the kernel forgot it"
    fusermount3 -u "$T/a"
    mount_device a
    assert_eq "$(python3 "$T/handles.py" read "$T/a" "$T/file-handle")" deep "after a remount"
    assert_eq "$(python3 "$T/handles.py" path "$T/a" "$T/folder-handle")" "$T/a/dir/sub" "a folder reconnects to its path"
    rm "$T/a/dir/sub/f"
    fails python3 "$T/handles.py" read "$T/a" "$T/file-handle" 2>"$T/err"
    grep -q "Stale file handle" "$T/err"
}

# New files, O_TRUNC saves and appends are written by the kernel itself: no WRITE request
# reaches the daemon, and what they wrote reaches another device, also what an fsync made
# durable while the file was still open.
test_appends_and_new_files_are_written_by_the_kernel() {
    mount_device a
    mount_device b
    local writes
    writes=$(kernel_count a write)
    head -c 5M /dev/urandom > "$T/source"
    cp "$T/source" "$T/a/new"
    printf 'first\n' > "$T/a/log"
    cat > "$T/appender.py" <<'PY'
import os, subprocess, sys
mount, icloudfs, other = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(mount + "/log", os.O_WRONLY | os.O_APPEND)
for n in range(5000):
    os.write(fd, b"%04d" % (n % 10000))
os.fsync(fd)
# Still open: the fsync's version reaches the store and the other device (the file still
# counts as being written: `sync --wait` would wait for the close).
subprocess.run([icloudfs, "sync", mount], check=True)
expected = 6 + 5000 * 4
def size_on_other():
    # The other device may not have pulled the file's creation yet.
    try:
        return os.path.getsize(other + "/log")
    except FileNotFoundError:
        return None
for _ in range(300):
    if size_on_other() == expected:
        break
    subprocess.run(["sleep", "0.1"])
assert size_on_other() == expected, size_on_other()
assert os.fstat(fd).st_size == expected
for n in range(5000):
    os.write(fd, b"more")
os.close(fd)
PY
    python3 "$T/appender.py" "$T/a" "$BIN/icloudfs" "$T/b"
    assert_eq "$(kernel_count a write)" "$writes" "WRITE requests"
    assert_eq "$(stat -c %s "$T/a/log")" $((6 + 10000 * 4)) "size after the appends"
    sync_wait a
    eventually 'test "$(stat -c %s "$T/b/log")" = 40006'
    cmp "$T/a/log" "$T/b/log"
    cmp "$T/source" "$T/b/new"
    assert_eq "$(xattr isUploaded "$T/a/log")" 1
}

# A shell's `echo x > f` flushes before it writes (open, dup2, close, write, close): the
# first flush's commit looked at the file while the kernel wrote it, and its older look,
# recorded after the close's, queued a few of 100 files as empty.
test_files_written_by_the_shell_arrive_whole() {
    mount_device a
    mount_device b
    mkdir "$T/a/src"
    for i in $(seq 1 300); do echo "file $i" > "$T/a/src/f$i.txt"; done
    sync_wait a
    eventually 'test -e "$T/b/src/f300.txt"'
    local empty
    empty=$(find "$T/a/src" "$T/b/src" -type f -empty)
    assert_eq "$empty" "" "files found empty"
    for i in 1 150 300; do assert_eq "$(cat "$T/b/src/f$i.txt")" "file $i"; done
}

# A small file the kernel writes (passthrough) and closes is queued once, at its release,
# straight from its content file: nothing is copied aside (issue 37: no flush queues a file
# still open). Every copy aside starts as a
# file in the cache's tmp/, renamed into staged/XX/ once synced: the test counts those.
test_small_files_written_by_the_kernel_are_not_copied_aside() {
    mount_device a
    mkdir "$T/a/src"
    cat > "$T/creates.py" <<'PY'
import ctypes, os, struct, subprocess, sys, threading
aside, mount, icloudfs = sys.argv[1], sys.argv[2], sys.argv[3]
libc = ctypes.CDLL(None, use_errno=True)
watch = libc.inotify_init1(os.O_NONBLOCK)
assert watch >= 0 and libc.inotify_add_watch(watch, aside.encode(), 0x100) >= 0  # IN_CREATE
def write(i):
    with open(f"{mount}/src/f{i}", "wb") as f:
        f.write(os.urandom(3000))
# Each from a thread of its own: a lone create each, written by the kernel (one thread's
# run of small files would be written through the daemon into the staging log instead).
for i in range(200):
    thread = threading.Thread(target=write, args=(i,))
    thread.start()
    thread.join()
subprocess.run([icloudfs, "sync", "--wait", "--timeout", "30s", mount], check=True)
created = 0
while True:
    try:
        events = os.read(watch, 65536)
    except BlockingIOError:
        break
    offset = 0
    while offset < len(events):
        length = struct.unpack_from("iIII", events, offset)[3]
        created += 1
        offset += 16 + length
print(created)
PY
    local created
    created=$(python3 "$T/creates.py" "$T/cache-a/tmp" "$T/a" "$BIN/icloudfs")
    echo "measured: $created chunk(s) copied aside for 200 small files"
    assert_eq "$(kernel_count a write)" 0 "WRITE requests"
    test "$created" -le 10
}

# O_TMPFILE (FUSE_TMPFILE): a file with no name, given one by linkat, as systemd and
# installers make files appear whole. Same answers as on ext4; one never linked leaves nothing.
test_o_tmpfile_then_linkat_works_as_on_ext4() {
    mount_device a
    mount_device b
    cat > "$T/tmpfile.py" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def link_fd(fd, path):  # linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH)
    if libc.linkat(fd, b"", -100, path.encode(), 0x1000) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
folder = sys.argv[1]
fd = os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, b"hello tmpfile\n")
st = os.fstat(fd)
print("nameless:", st.st_nlink, st.st_size, oct(st.st_mode), os.listdir(folder))
os.fchmod(fd, 0o600)
os.setxattr(fd, "user.note", b"kept")
link_fd(fd, folder + "/named.txt")
st = os.fstat(fd)
print("linked:", st.st_nlink, oct(st.st_mode), os.getxattr(fd, "user.note"))
os.write(fd, b"more\n")
os.close(fd)
fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b"x" * 100000)
os.close(fd)
print("after:", sorted(os.listdir(folder)), repr(open(folder + "/named.txt").read()))
PY
    mkdir "$T/ext4"
    python3 "$T/tmpfile.py" "$T/ext4" > "$T/on-ext4"
    python3 "$T/tmpfile.py" "$T/a" > "$T/on-mount"
    diff "$T/on-ext4" "$T/on-mount"
    grep -q "nameless: 0 14 0o100640 \[\]" "$T/on-mount"
    sync_wait a
    eventually 'test -e "$T/b/named.txt"'
    assert_eq "$(cat "$T/b/named.txt")" "hello tmpfile
more"
    assert_eq "$(stat -c %a "$T/b/named.txt")" 600
    assert_eq "$(getfattr --only-values -n user.note "$T/b/named.txt")" kept
    # The one never linked: nothing queued, nothing kept.
    assert_eq "$(ls "$T/b")" named.txt
    "$BIN/icloudfs" deleted "$T/a" | grep -q "nothing deleted is kept"
    eventually 'test "$(find "$T/cache-a/content" -type f -size +50k | wc -l)" = 0'
}

# Set-id bits go on a write by a user without CAP_FSETID, which only the daemon sees: a set-id
# file is never passthrough, or a reader holding it open would make the next writer the
# kernel's (a node in passthrough mode gets passthrough opens) and the bits would stay.
test_a_set_id_file_loses_its_bits_on_a_write_while_a_reader_holds_it() {
    mount_device a allow_other
    printf 'data\n' > "$T/a/tool"
    chmod 4777 "$T/a/tool"
    exec 3< "$T/a/tool"
    (cd "$T/a" && setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c 'printf "more\n" >> tool')
    exec 3<&-
    assert_eq "$(stat -c %a "$T/a/tool")" 777 "mode after an unprivileged write"
    assert_eq "$(cat "$T/a/tool")" "data
more"
}

# A user's mount: fusermount3 mounts and hands the /dev/fuse descriptor back; the kernel
# refuses that user a backing file, so every read goes through the daemon, and it says so.
test_a_user_mounts_through_fusermount3_and_reads_through_the_daemon() {
    local mode
    mode=$(stat -c %a /dev/fuse)
    # Some machines keep /dev/fuse to root (Debian makes it 0666): opened for the test only.
    chmod 666 /dev/fuse
    # A folder the user can reach (the test's own is root's alone), and work from there.
    local home
    home=$(mktemp -d /tmp/icloudfs-user.XXXXXX)
    trap "umount -l '$home/m' 2>/dev/null || true; rm -rf '$home'; chmod $mode /dev/fuse" EXIT
    mkdir -p "$home/store" "$home/m"
    cp "$BIN/icloudfs" "$home/icloudfs"
    chown -R nobody:nogroup "$home"
    chmod 755 "$home"
    cd "$home"
    as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$home" XDG_CACHE_HOME="$home/cache" "$@"; }
    as_user "$home/icloudfs" mount "$CONTAINER" "$home/m" -o "store=$home/store"
    grep " $home/m " /proc/mounts | grep -q "user_id=$(id -u nobody)"
    as_user sh -c "echo hello > '$home/m/f'"
    assert_eq "$(as_user cat "$home/m/f")" hello
    assert_eq "$(as_user cat "$home/m/f")" hello
    as_user "$home/icloudfs" status "$home/m" | grep -q "kernel: every read goes through the daemon (passthrough off: the kernel refused a backing file"
    as_user getfattr --only-values -n user.icloud.kernel "$home/m" | tr ' ' '\n' | grep -qx "passthroughOpens=0"
    as_user fusermount3 -u "$home/m"
    fails grep -q " $home/m " /proc/mounts
}

# A file the kernel writes (a writer after a passthrough reader) grown by that writer: the
# daemon's fallocate, hole punch and copy_file_range see its size as it is (they used the
# size from before the writes: a plain fallocate cut the file, found by fsx).
test_fallocate_and_copy_range_on_a_file_the_kernel_writes() {
    mount_device a
    head -c 65536 /dev/zero | tr '\0' A > "$T/a/f"
    sync_wait a
    python3 - "$T/a/f" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
path = sys.argv[1]
reader = os.open(path, os.O_RDONLY)  # the file is in passthrough mode from here
w = os.open(path, os.O_RDWR)
os.pwrite(w, b"B" * 32768, 65536)
assert libc.fallocate(w, 0, 65536, 8192) == 0
assert os.fstat(w).st_size == 98304, os.fstat(w).st_size
assert libc.fallocate(w, 0x01 | 0x02, 70000, 4096) == 0  # punch a hole, keep the size
assert os.pread(w, 4096, 70000) == bytes(4096)
assert os.copy_file_range(w, w, 4096, 90000, 0) == 4096
os.close(w)
os.close(reader)
data = open(path, "rb").read()
assert len(data) == 98304, len(data)
assert data[:4096] == b"B" * 4096 and data[70000:74096] == bytes(4096) and data[-1:] == b"B"
PY
    sync_wait a
    mount_device b
    cmp "$T/a/f" "$T/b/f"
}

# `close` costs no FLUSH round trip (docs/ARCHITECTURE.md "The path of a small file"): the
# first is answered ENOSYS and the kernel sends no more; a file is queued at its last close
# (docs/SEMANTICS.md "Writes"), so one still open through a copy of its descriptor stays
# unqueued until that copy closes too, then arrives whole on another device.
test_a_file_is_queued_at_its_last_close_with_no_flushes() {
    mount_device a
    for i in $(seq 1 50); do echo "small $i" > "$T/a/f$i"; done
    mkfifo "$T/go"
    python3 - "$T/a/held" "$T/go" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"held open through a copy\n")
copy = os.dup(fd)
os.close(fd)
print("closed one", flush=True)
open(sys.argv[2]).read()  # until the test says go
os.write(copy, b"and written after\n")
os.close(copy)
PY
    local holder=$!
    eventually 'test -s "$T/a/held"'
    local flushes
    flushes=$(kernel_count a flush)
    echo "measured: $flushes FLUSH request(s) for 51 closes"
    test "$flushes" -le 1
    if "$BIN/icloudfs" sync --wait --timeout 2s "$T/a" >/dev/null 2>&1; then
        echo "    sync --wait said everything was uploaded while a copy of a descriptor was open"
        false
    fi
    assert_eq "$(xattr isUploaded "$T/a/held")" 0 "isUploaded while open"
    echo go > "$T/go"
    wait "$holder"
    sync_wait a
    assert_eq "$(xattr isUploaded "$T/a/held")" 1 "isUploaded after the last close"
    mount_device b
    sync_wait b
    assert_eq "$(cat "$T/b/held")" "held open through a copy
and written after"
    assert_eq "$(cat "$T/b/f50")" "small 50"
}

# The replica's background work runs at background priority (docs/ARCHITECTURE.md "Threads
# and locks"): libdispatch runs background QoS at nice 10, the request threads stay at 0.
test_background_work_runs_below_the_request_threads() {
    mount_device a
    for i in $(seq 1 200); do echo "file $i" > "$T/a/f$i"; done
    sync_wait a
    local pid
    pid=$(daemon_of a)
    python3 - "$pid" <<'PY'
import glob, sys
nice = {}
for stat in glob.glob(f"/proc/{sys.argv[1]}/task/*/stat"):
    text = open(stat).read()
    comm = open(stat.replace("/stat", "/comm")).read().strip()
    fields = text[text.rindex(")") + 2:].split()
    nice.setdefault(comm, set()).add(int(fields[16]))  # field 19: nice
print("measured: threads by name and nice:", {k: sorted(v) for k, v in sorted(nice.items())})
assert nice.get("icloudfs-fuse") == {0}, "request threads not at nice 0"
assert any(10 in v for v in nice.values()), "no thread at nice 10"
PY
}

# The kernel asks for security.capability before the first write to every file; while no
# item holds a file capability it is answered without the replica's lock
# (`FileCapabilities`). One set here, or arriving from another device, still reads back.
test_file_capabilities_read_back_on_either_device() {
    mount_device a
    mount_device b
    local raw=0x0100000200200000000000000000000000000000
    echo plain > "$T/a/plain"
    getfattr -n security.capability "$T/a/plain" 2>&1 | grep -q "No such attribute" || { echo "    a file without one"; false; }
    echo tool > "$T/a/tool"
    setfattr -n security.capability -v "$raw" "$T/a/tool"
    assert_eq "$(getfattr -e hex -n security.capability "$T/a/tool" | grep =)" "security.capability=$raw" "set here"
    echo again > "$T/a/after"
    getfattr -n security.capability "$T/a/after" 2>&1 | grep -q "No such attribute" || { echo "    a file made after"; false; }
    sync_wait a
    sync_wait b
    assert_eq "$(cat "$T/b/plain")" plain
    assert_eq "$(getfattr -e hex -n security.capability "$T/b/tool" | grep =)" "security.capability=$raw" "on device b"
}
