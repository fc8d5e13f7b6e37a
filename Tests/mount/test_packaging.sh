# Packaging (issue 23): what systemd, mount(8) and packagers rely on.

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
    "$BIN/icloudfs" --version | grep -Eq '^icloudfs [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]+|unknown), libfuse '
    assert_eq "$("$BIN/mount.icloudfs" -V)" "$("$BIN/icloudfs" --version)"
}
