# Mounting: clear failures leave nothing mounted; mount(8) works through mount.icloudfs.
test_bad_options_fail_clearly() {
    mkdir "$T/m"
    fails "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "store=$T/store,bogus" 2>"$T/err"
    grep -q "unknown mount option 'bogus'" "$T/err"
    fails "$BIN/icloudfs" mount "$CONTAINER" "$T/missing" -o "store=$T/store" 2>"$T/err"
    grep -q "is not an existing folder" "$T/err"
    fails "$BIN/icloudfs" mount "bad/name" "$T/m" 2>"$T/err"
    grep -q "invalid container name" "$T/err"
    fails "$BIN/icloudfs" mount "$CONTAINER" "$T/m" -o "store=$T/nowhere" 2>"$T/err"
    grep -q "does not exist" "$T/err"
    fails grep -q "$T/m" /proc/mounts
}

test_mount_t_icloudfs() {
    [ "$(id -u)" = 0 ] || { echo "skipped: needs root to install /sbin/mount.icloudfs"; return 0; }
    local helper=/sbin/mount.icloudfs
    local installed=0
    [ -e "$helper" ] || { ln -s "$BIN/mount.icloudfs" "$helper"; installed=1; }
    mkdir "$T/m"
    mount -t icloudfs "$CONTAINER" "$T/m" -o "store=$T/store,cache=$T/cache-m"
    echo via-mount > "$T/m/file"
    assert_eq "$(cat "$T/m/file")" via-mount
    grep -q "$T/m fuse.icloudfs" /proc/mounts
    umount "$T/m"
    [ $installed = 0 ] || rm -f "$helper"
}

# SIGTERM (kill, systemd) unmounts at once, without waiting for a request to arrive; what
# was written stays for the next mount.
test_sigterm_unmounts() {
    mount_device a
    echo "written before SIGTERM" > "$T/a/kept.txt"
    local pid
    pid=$(daemon_of a)
    kill -TERM "$pid"
    local start=$SECONDS
    # (not `kill -0`: an orphaned daemon's zombie may stay unreaped where PID 1 does not reap)
    eventually "! grep -q ' $T/a ' /proc/mounts && grep -q 'unmounted $T/a' '$T/cache-a/icloudfs.log'"
    assert_eq "$((SECONDS - start < 3))" 1 "unmounted within 3 s"
    mount_device a
    assert_eq "$(cat "$T/a/kept.txt")" "written before SIGTERM"
}

# One daemon per cache folder: a second mount of a cache a serving mount holds fails in one
# line naming that mount (two daemons on one cache pushed each other's queue, made conflicted
# copies of their own files and crashed), and nothing of the first mount is disturbed.
test_second_mount_of_a_held_cache_fails() {
    mount_device a
    echo one > "$T/a/file"
    mkdir "$T/b"
    fails "$BIN/icloudfs" mount "$CONTAINER" "$T/b" -o "store=$T/store,cache=$T/cache-a,device=a" 2>"$T/err"
    cat "$T/err"
    assert_eq "$(wc -l < "$T/err")" 1 "one line"
    grep -q "in use by the mount at $T/a (pid $(daemon_of a))" "$T/err"
    fails grep -q " $T/b " /proc/mounts
    assert_eq "$(pgrep -fc -- "cache=$T/cache-a")" 1 "one daemon"
    echo two >> "$T/a/file"
    assert_eq "$(cat "$T/a/file")" "one
two"
    sync_wait a
    fails grep -iE "error|conflict" "$T/cache-a/icloudfs.log"
}

# `umount` returns before the daemon has finished stopping: `umount && mount` must not run two
# daemons on one cache; the new one waits for the old one to let go.
test_quick_remount_waits_for_the_stopping_daemon() {
    mount_device a
    for i in $(seq 1 6); do
        echo "round $i" > "$T/a/testfile"
        dd if=/dev/urandom of="$T/a/big$i" bs=1M count=4 status=none
        rm -f "$T/a/big$((i - 1))"
        umount "$T/a"
        mount_device a
        assert_eq "$(cat "$T/a/testfile")" "round $i"
        assert_eq "$(stat -c %s "$T/a/big$i")" 4194304
        eventually "[ \$(pgrep -fc -- \"cache=$T/cache-a\") = 1 ]"
    done
    sync_wait a
    assert_eq "$(ls "$T/a" | sort | tr '\n' ' ')" "big6 testfile "
    fails grep -iE "error|conflict|exists already" "$T/cache-a/icloudfs.log"
}

# ICLOUDFS_LOCK_STATISTICS=1 and ICLOUDFS_REQUEST_COSTS=1 (docs/ARCHITECTURE.md "Measuring the
# state lock"): at unmount the daemon logs the state lock's holds by call site and the CPU time
# of each kind of request; without them, neither.
test_measurements_are_logged_at_unmount() {
    ICLOUDFS_LOCK_STATISTICS=1 ICLOUDFS_REQUEST_COSTS=1 mount_device a
    mount_device b
    for i in $(seq 1 20); do echo "$i" > "$T/a/f$i"; done
    umount "$T/a"
    eventually "grep -q 'unmounted $T/a' '$T/cache-a/icloudfs.log'"
    grep -A40 "state lock, by call site" "$T/cache-a/icloudfs.log" > "$T/locks"
    grep -A20 "requests served, by kind" "$T/cache-a/icloudfs.log" > "$T/requests"
    head -5 "$T/locks" "$T/requests"
    # Each new file's create took the lock once at its call site, and was one create request.
    awk '/Replica\+Metadata\.swift:[0-9]+ uses=/ { split($0, f, "uses="); if (f[2] + 0 >= 20) found = 1 } END { exit !found }' "$T/locks"
    grep -qE "held_us=[0-9]+ longest_us=[0-9]+ waited_us=[0-9]+" "$T/locks"
    awk '/^create count=/ { split($2, f, "="); if (f[2] + 0 >= 20) found = 1 } END { exit !found }' "$T/requests"
    grep -qE "^release count=[0-9]+ cpu_us=[0-9]+ mean_us=[0-9]+ most_us=[0-9]+" "$T/requests"
    umount "$T/b"
    eventually "grep -q 'unmounted $T/b' '$T/cache-b/icloudfs.log'"
    fails grep -qE "state lock|requests served" "$T/cache-b/icloudfs.log"
}
