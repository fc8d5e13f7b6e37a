# Packaging (issue 23): what systemd, mount(8) and packagers rely on.

# The repository (the run sources this file from there).
PACKAGE_SOURCE=$PWD

# Type=notify: a foreground mount tells $NOTIFY_SOCKET once it is usable, and when it stops.
test_foreground_mount_notifies_systemd() {
    mkdir -p "$T/m"
    python3 - "$BIN" "$T" "$CONTAINER" <<'PY'
import os, socket, subprocess, sys
bin, t, container = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(f"{t}/notify")
s.settimeout(20)
env = dict(os.environ, NOTIFY_SOCKET=f"{t}/notify")
daemon = subprocess.Popen([f"{bin}/icloudfs", "mount", container, f"{t}/m", "-o", f"store={t}/store,cache={t}/c,foreground"],
                          env=env, stderr=subprocess.DEVNULL)
ready = s.recv(4096).decode()
assert ready.startswith("READY=1\n"), ready
assert os.path.ismount(f"{t}/m"), "READY before the mount is usable"
open(f"{t}/m/file", "w").write("x")
subprocess.run(["fusermount3", "-u", f"{t}/m"], check=True)
stopping = s.recv(4096).decode()
assert stopping.startswith("STOPPING=1\n"), stopping
assert daemon.wait(timeout=30) == 0
PY
}

test_version_names_the_package_version_and_commit() {
    "$BIN/icloudfs" --version | grep -Eq '^icloudfs [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+|unknown), FUSE kernel protocol '
    assert_eq "$("$BIN/mount.icloudfs" -V)" "$("$BIN/icloudfs" --version)"
}

# The Debian package, as a user gets it: built, installed with apt, used through mount -t,
# an fstab line, man and the completions, with the Swift toolchain out of the loader's
# sight, then removed without a trace. Its build is a release build from scratch (static
# Swift runtime): 10 to 25 minutes on 2 cores, so it gets 40.
time_limit[test_debian_package_installs_mounts_and_removes_cleanly]=2400
test_debian_package_installs_mounts_and_removes_cleanly() {
    [ "$(id -u)" = 0 ] || skip "installs a package: needs root"
    dpkg-query -W -f='${Status}' icloudfs 2>/dev/null | grep -q "install ok installed" && skip "icloudfs is installed on this machine already"
    (cd "$PACKAGE_SOURCE" && Scripts/package --out "$T/dist") > "$T/package.log" 2>&1 || { tail -n 20 "$T/package.log"; return 1; }
    local deb
    deb=$(tail -n 1 "$T/package.log")
    trap 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq icloudfs >/dev/null 2>&1' EXIT
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" > "$T/apt.log" 2>&1 || { cat "$T/apt.log"; return 1; }
    test -x /usr/bin/icloudfs
    assert_eq "$(readlink -f /usr/sbin/mount.icloudfs)" /usr/bin/icloudfs
    assert_eq "$(readlink -f /usr/sbin/mount.fuse.icloudfs)" /usr/bin/icloudfs
    # Nothing of the toolchain is needed: with /opt/swift empty (in a mount namespace of its
    # own), it mounts, writes, reads and unmounts.
    mkdir -p "$T/hidden"
    unshare -m sh -c 'mount -t tmpfs none /opt/swift && test -z "$(ls /opt/swift)" &&
        mount -t icloudfs "$1" "$2/hidden" -o "store=$2/store,cache=$2/cache-hidden" &&
        echo "without the toolchain" > "$2/hidden/proof" && cat "$2/hidden/proof" && umount "$2/hidden" &&
        /usr/bin/icloudfs --version > "$2/version"' sh "$CONTAINER" "$T" > "$T/hidden.out"
    assert_eq "$(cat "$T/hidden.out")" "without the toolchain"
    grep -Eq "^icloudfs [0-9.]+ \(commit [0-9a-f]{12}" "$T/version"
    ldd /usr/bin/icloudfs > "$T/ldd"
    fails grep -q /opt/swift "$T/ldd"
    # mount -t, then an fstab line (mount -T), on a second device of the same store.
    mkdir -p "$T/m" "$T/f"
    mount -t icloudfs "$CONTAINER" "$T/m" -o "store=$T/store,cache=$T/cache-m"
    grep -q "$T/m fuse.icloudfs" /proc/mounts
    echo "by mount -t" > "$T/m/file"
    /usr/bin/icloudfs sync --wait "$T/m"
    umount "$T/m"
    echo "$CONTAINER $T/f icloudfs store=$T/store,cache=$T/cache-f,nofail,_netdev,x-systemd.automount 0 0" > "$T/fstab"
    mount -T "$T/fstab" "$T/f"
    assert_eq "$(cat "$T/f/file")" "by mount -t"
    umount "$T/f"
    # A bogus option: one line, exit 2, nothing mounted.
    if mount -t icloudfs "$CONTAINER" "$T/m" -o "store=$T/store,bogus_option" 2> "$T/err"; then return 1; fi
    assert_eq "$(wc -l < "$T/err")" 1 "one line"
    grep -q "bogus_option" "$T/err"
    fails grep -q " $T/m " /proc/mounts
    # Man pages and completions.
    man -w icloudfs mount.icloudfs > /dev/null
    MANWIDTH=100 man mount.icloudfs 2> /dev/null | grep -q "x-systemd.automount"
    MANWIDTH=100 man icloudfs 2> /dev/null | grep -q "undelete"
    # Tab completion, as bash runs it: a command, then an option of it.
    local complete='source /usr/share/bash-completion/completions/icloudfs
        COMP_WORDS=($1); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
        _icloudfs icloudfs "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}"; echo "${COMPREPLY[*]}"'
    assert_eq "$(bash -c "$complete" sh "icloudfs undel")" undelete
    assert_eq "$(bash -c "$complete" sh "icloudfs gc --dr")" --dry-run
    test -s /usr/share/zsh/vendor-completions/_icloudfs
    test -s /usr/share/fish/vendor_completions.d/icloudfs.fish
    assert_eq "$(bash -c "$complete" sh "icloudfs contai")" containers
    # Dolphin's context menu: each action of the service menu runs, here on a mounted file.
    grep -q "^Exec=/usr/lib/icloudfs/icloudfs-action evict %F$" /usr/share/kio/servicemenus/icloudfs.desktop
    mount -t icloudfs "$CONTAINER" "$T/f" -o "store=$T/store,cache=$T/cache-f"
    local action
    action=$(sed -n 's/^Exec=\(.*\) %F$/\1/p' /usr/share/kio/servicemenus/icloudfs.desktop | grep ' pin$')
    $action "$T/f/file"
    assert_eq "$(getfattr --only-values -n user.icloud.isPinned "$T/f/file")" 1 "pinned through the menu's command"
    fails /usr/lib/icloudfs/icloudfs-action evict /etc/hostname 2>/dev/null
    # GNOME Files' extension and its emblems.
    /usr/bin/python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" /usr/share/nautilus-python/extensions/icloudfs.py
    test -s /usr/share/icons/hicolor/scalable/emblems/emblem-icloudfs-cloud.svg
    umount "$T/f"
    # The unit, checked by systemd (an instance of the template; its commands and man pages
    # exist now).
    cp /usr/lib/systemd/user/icloudfs@.service "$T/icloudfs@$CONTAINER.service"
    (cd "$T" && systemd-analyze verify "./icloudfs@$CONTAINER.service")
    # Removed: no file of it is left.
    dpkg -L icloudfs | grep -v '^/\.$' > "$T/files"
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq icloudfs > /dev/null 2>&1
    trap - EXIT
    while read -r path; do
        if [ -f "$path" ] || [ -L "$path" ]; then echo "    left after removal: $path"; return 1; fi
    done < "$T/files"
}
