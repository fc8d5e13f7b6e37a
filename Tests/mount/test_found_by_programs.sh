# What outside programs found (issue 35): listings, renames, seeks, atime, copies, options.

# readdir returns `.` and `..` as every local filesystem does, and rewinddir (a seek of the
# folder to offset 0) shows the folder as it is now, as a new opendir would.
test_listing_has_dots_and_rewinddir_refreshes() {
    mount_device a
    mkdir -p "$T/a/d/sub"
    python3 - "$T/a/d" <<'PY'
import ctypes, ctypes.util, os, sys
folder = sys.argv[1]
entries = sorted(os.listdir(folder))
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.readdir.restype = ctypes.c_void_p
libc.readdir.argtypes = libc.rewinddir.argtypes = libc.closedir.argtypes = [ctypes.c_void_p]
class Dirent(ctypes.Structure):
    _fields_ = [("ino", ctypes.c_ulong), ("off", ctypes.c_long), ("reclen", ctypes.c_ushort),
                ("type", ctypes.c_ubyte), ("name", ctypes.c_char * 256)]
def names(handle):
    found = []
    while True:
        entry = libc.readdir(handle)
        if not entry:
            return found
        found.append(ctypes.cast(entry, ctypes.POINTER(Dirent)).contents)
handle = libc.opendir(folder.encode())
first = {e.name.decode(): e.ino for e in names(handle)}
assert sorted(first) == [".", "..", "sub"], first
assert first["."] == os.stat(folder).st_ino, (first, os.stat(folder).st_ino)
assert first[".."] == os.stat(folder + "/..").st_ino, (first, os.stat(folder + "/..").st_ino)
for i in range(200):
    open(f"{folder}/new{i}", "w").close()
libc.rewinddir(handle)
after = [e.name.decode() for e in names(handle)]
libc.closedir(handle)
missing = [f"new{i}" for i in range(200) if f"new{i}" not in after]
assert not missing, f"{len(missing)} of 200 files made before rewinddir are missing"
assert after.count(".") == 1 and after.count("..") == 1, after
# A folder removed while open lists nothing after rewinddir, as on ext4 (no error).
os.mkdir(folder + "/gone")
handle = libc.opendir((folder + "/gone").encode())
assert sorted(e.name.decode() for e in names(handle)) == [".", ".."]
os.rmdir(folder + "/gone")
libc.rewinddir(handle)
ctypes.set_errno(0)
assert names(handle) == [] and ctypes.get_errno() == 0, ctypes.get_errno()
libc.closedir(handle)
PY
    assert_eq "$(ls -a "$T/a" | head -n 2 | tr '\n' ' ')" ". .. " "ls -a of the mount root"
    assert_eq "$(find "$T/a/d" | wc -l)" 202 "find does not walk . or .."
    mkdir "$T/local" && cd "$T/local" && mkdir d && python3 -c "
import ctypes, ctypes.util, os
libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
libc.opendir.restype = ctypes.c_void_p; libc.readdir.restype = ctypes.c_void_p
libc.readdir.argtypes = libc.rewinddir.argtypes = libc.closedir.argtypes = [ctypes.c_void_p]
h = libc.opendir(b'd'); libc.readdir(h); os.rmdir('d'); libc.rewinddir(h)
ctypes.set_errno(0); assert not libc.readdir(h) and ctypes.get_errno() == 0, 'ext4 lists a removed folder'
"
}

# fstat of an open folder replaced by a rename (dirA over an empty dirB) works, link count
# 0, as ext4 has it; the same holds for files.
test_fstat_of_a_folder_replaced_by_rename() {
    mount_device a
    for root in "$T/a" "$T/local"; do
        mkdir -p "$root/dirA" "$root/dirB"
        python3 - "$root" <<'PY'
import os, sys
root = sys.argv[1]
fd = os.open(f"{root}/dirB", os.O_RDONLY | os.O_DIRECTORY)
os.rename(f"{root}/dirA", f"{root}/dirB")
info = os.fstat(fd)
assert info.st_nlink == 0, (root, info.st_nlink)
os.close(fd)
PY
    done
}

# RENAME_WHITEOUT (overlayfs) is refused with EINVAL rather than ignored; lseek SEEK_DATA
# and SEEK_HOLE before the start answer ENXIO, as ext4.
test_whiteout_rename_refused_and_negative_seek() {
    mount_device a
    echo data > "$T/a/src"
    python3 - "$T/a" <<'PY'
import ctypes, ctypes.util, errno, os, sys
root = sys.argv[1]
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD, RENAME_WHITEOUT = -100, 4
result = libc.renameat2(AT_FDCWD, f"{root}/src".encode(), AT_FDCWD, f"{root}/dst".encode(), RENAME_WHITEOUT)
assert result == -1 and ctypes.get_errno() == errno.EINVAL, (result, ctypes.get_errno())
assert os.path.exists(f"{root}/src") and not os.path.exists(f"{root}/dst")
fd = os.open(f"{root}/src", os.O_RDONLY)
for whence in (os.SEEK_DATA, os.SEEK_HOLE):
    try:
        os.lseek(fd, -1, whence)
        raise SystemExit(f"lseek(-1, {whence}) succeeded")
    except OSError as error:
        assert error.errno == errno.ENXIO, (whence, error)
PY
}

# Reads move atime as the kernel's relatime does: on the first read after a change, never
# again until the next change (or a day); noatime never, strictatime on every read. The
# store is not written: another device keeps the access time it had.
test_reads_move_atime_as_relatime() {
    mount_device a
    mount_device b
    echo mail > "$T/a/box"
    touch -a -d "2020-01-01 UTC" "$T/a/box"
    sync_wait a
    local old
    old=$(stat -c %X "$T/a/box")
    assert_eq "$old" 1577836800
    touch -m -d "2021-01-01 UTC" "$T/a/box"
    cat "$T/a/box" >/dev/null
    local first
    first=$(stat -c %X "$T/a/box")
    [ "$first" -ge "$(($(date +%s) - 60))" ] || { echo "    atime not moved by a read after a change: $first"; return 1; }
    sleep 1.1
    cat "$T/a/box" >/dev/null
    assert_eq "$(stat -c %X "$T/a/box")" "$first" "a second read leaves it (relatime)"
    sync_wait a
    eventually "[ \$(stat -c %Y '$T/b/box') = 1609459200 ]"
    assert_eq "$(stat -c %X "$T/b/box")" "$old" "reads stay on this device"
    ls "$T/a" >/dev/null
    umount "$T/a"
    mount_device a noatime
    touch -m "$T/a/box"
    cat "$T/a/box" >/dev/null
    assert_eq "$(stat -c %X "$T/a/box")" "$first" "noatime"
    umount "$T/a"
    mount_device a strictatime
    touch -a -d "2020-01-01 UTC" "$T/a/box"
    cat "$T/a/box" >/dev/null
    first=$(stat -c %X "$T/a/box")
    sleep 1.1
    cat "$T/a/box" >/dev/null
    [ "$(stat -c %X "$T/a/box")" -gt "$first" ] || { echo "    strictatime: a second read did not move it"; return 1; }
}

# Copies made from the mount carry no sync state: cp -a, rsync -aX and tar --xattrs copy only
# the attributes stored with a file; getfattr -d on the mount still shows the state, and a
# new empty file lists no attribute to other programs.
test_copies_do_not_carry_sync_state() {
    mount_device a
    echo content > "$T/a/f"
    setfattr -n user.color -v red "$T/a/f"
    assert_eq "$(getfattr -d "$T/a/f" 2>/dev/null | grep -c '^user.icloud.')" 11 "getfattr -d shows the state"
    mkdir "$T/copies"
    cp -a "$T/a/f" "$T/copies/cp"
    rsync -aX "$T/a/f" "$T/copies/rsync"
    tar --xattrs --xattrs-include='*' -C "$T/a" -cf "$T/f.tar" f
    mkdir "$T/copies/tar" && tar --xattrs --xattrs-include='*' -C "$T/copies/tar" -xf "$T/f.tar"
    for copy in "$T/copies/cp" "$T/copies/rsync" "$T/copies/tar/f"; do
        assert_eq "$(getfattr -d -m - "$copy" 2>/dev/null | grep -v '^#' | grep -v '^$' | tr '\n' ' ')" 'user.color="red" ' "$copy"
    done
    touch "$T/a/empty"
    assert_eq "$(python3 -c "import os,sys; print(os.listxattr(sys.argv[1]))" "$T/a/empty")" "[]"
    # Any program still reads the state by name.
    assert_eq "$(python3 -c "import os,sys; print(os.getxattr(sys.argv[1], 'user.icloud.isDownloaded').decode())" "$T/a/f")" 1
}

# Every option the man page lists mounts (nodiratime was refused by libfuse), and
# `mount -o remount,ro` then `,rw` works on a mounted container.
test_every_listed_option_mounts_and_remount() {
    local options
    options=$(sed -n '/^# OPTIONS/,/^# FSTAB/p' "$REPO/docs/man/mount.icloudfs.8.md" | grep -oE '\*\*(\\_)?[a-z_]+' | sed 's/[*\\]//g' | sort -u)
    local tried=0
    for option in $options; do
        case $option in
        store | cache | device | poll | cache_size | upload_limit | upload_wait | offline_wait | notify_wait | all | uid | gid | umask | foreground | debug | remount | offline | x | comment | icloudfs) continue ;;
        esac
        mkdir -p "$T/m"
        "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "store=$T/store,cache=$T/cache-m,$option" 2>"$T/err" || {
            echo "    -o $option: $(cat "$T/err")"
            return 1
        }
        grep -q " $T/m " /proc/mounts
        umount "$T/m"
        tried=$((tried + 1))
    done
    [ "$tried" -ge 10 ] || { echo "    only $tried options found in the man page"; return 1; }
    "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "store=$T/store,cache=$T/cache-m,noatime,nodiratime"
    umount "$T/m"
    mount_device a
    echo before > "$T/a/f"
    "$BIN/icloudfs" mount "$CONTAINER" "$T/a" -o remount,ro
    grep " $T/a " /proc/mounts | grep -q " ro,"
    fails sh -c "echo x > '$T/a/g'" 2>"$T/err"
    grep -q "Read-only file system" "$T/err"
    assert_eq "$(cat "$T/a/f")" before
    if [ "$(id -u)" = 0 ] && [ ! -e /sbin/mount.fuse.icloudfs ]; then
        # mount(8) runs mount.fuse.icloudfs for a mount listed as fuse.icloudfs (the package
        # installs it).
        ln -s "$BIN/mount.icloudfs" /sbin/mount.fuse.icloudfs
        mount -o remount,rw "$T/a" || { rm -f /sbin/mount.fuse.icloudfs; return 1; }
        rm -f /sbin/mount.fuse.icloudfs
    else
        "$BIN/mount.icloudfs" "$CONTAINER" "$T/a" -o remount,rw
    fi
    grep " $T/a " /proc/mounts | grep -q " rw,"
    echo after > "$T/a/g"
    assert_eq "$(cat "$T/a/g")" after
}

# One line per failure: no `ExitCode(rawValue: 1)` after the reason, one wording for a path
# that is not on a mount.
test_commands_fail_in_one_line() {
    for command in "status /tmp" "download /tmp/nowhere-$$" "evict /tmp" "pin /tmp" "sync /tmp" "conflicts /tmp"; do
        # shellcheck disable=SC2086
        fails "$BIN/icloudfs" $command 2>"$T/err"
        assert_eq "$(wc -l < "$T/err")" 1 "icloudfs $command: $(cat "$T/err")"
        grep -q "not on an icloudfs mount" "$T/err"
    done
}

# pjdfstest's truncate/12.t sets a size of 999,999,999,999,999 bytes: on a cache disk that
# allows it (tmpfs), the daemon built a chunk reference per 4 MiB of holes and ran out of
# memory. Past 1 TiB a size is refused with EFBIG, as on a disk with smaller files.
test_a_size_past_the_largest_file_is_refused_with_efbig() {
    mount_device a
    : > "$T/a/f"
    fails truncate -s 2T "$T/a/f" 2> "$T/err"
    grep -q "File too large" "$T/err"
    python3 - "$T/a/f" <<'PY'
import errno, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
for attempt in (lambda: os.ftruncate(fd, 999999999999999), lambda: os.posix_fallocate(fd, 1 << 41, 4096)):
    try:
        attempt()
        sys.exit("a size past 1 TiB was accepted")
    except OSError as error:
        assert error.errno == errno.EFBIG, error
os.ftruncate(fd, 1 << 30)
assert os.fstat(fd).st_size == 1 << 30
os.close(fd)
PY
    sync_wait a
    local rss
    rss=$(awk '/VmRSS/{print $2}' "/proc/$(daemon_of a)/status")
    echo "measured: daemon RSS ${rss} kB after the refused sizes and a 1 GiB sparse file"
    test "$rss" -lt 400000
}
