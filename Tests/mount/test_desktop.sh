# The desktop: GNOME Files (Nautilus) with the package's extension, under Xvfb with a
# session bus, on a mount with files in every state; the extension's menu actions; a
# screenshot kept as a test artifact (.build/test-results/desktop/).

time_limit[test_nautilus_shows_states_and_acts]=900

# Installs Nautilus, nautilus-python, Xvfb and ImageMagick if they are missing (a few
# minutes on a fresh machine); skips without root or apt.
desktop_tools() {
    if [ -x /usr/bin/nautilus ] && [ -e /usr/lib/x86_64-linux-gnu/nautilus/extensions-4/libnautilus-python.so ] &&
        command -v Xvfb > /dev/null && command -v import > /dev/null; then
        return 0
    fi
    [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null || skip "Nautilus, python3-nautilus, xvfb and imagemagick are not installed"
    local packages="nautilus python3-nautilus xvfb imagemagick"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages > "$T/apt.log" 2>&1 ||
        { apt-get update -qq >> "$T/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $packages >> "$T/apt.log" 2>&1; } ||
        { tail -n 5 "$T/apt.log"; return 1; }
}

# stop_desktop RUNTIME: kills every process of the test's desktop session (found by its
# XDG_RUNTIME_DIR): services the session bus started (gvfs, tracker, portals) outlive
# dbus-run-session, and would keep watching mounts after the test.
stop_desktop() {
    local pid
    for pid in $(ps -eo pid=); do
        if { tr '\0' '\n' < "/proc/$pid/environ"; } 2>/dev/null | grep -qx "XDG_RUNTIME_DIR=$1"; then
            kill -9 "$pid" 2>/dev/null || true
        fi
    done
}

# extension_menu ACTION PATH: runs the extension's menu item for ACTION on PATH as Nautilus
# would (its `activate` signal), outside Nautilus.
extension_menu() {
    ICLOUDFS_ACTION="$REPO/packaging/desktop/icloudfs-action" /usr/bin/python3 - "$REPO/packaging/desktop/icloudfs-nautilus.py" "$1" "$2" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("icloudfs_nautilus", sys.argv[1])
extension = importlib.util.module_from_spec(spec)
spec.loader.exec_module(extension)
class Location:
    def __init__(self, path): self.path = path
    def get_path(self): return self.path
class File:
    def __init__(self, path): self.path = path
    def get_uri_scheme(self): return "file"
    def get_location(self): return Location(self.path)
menu = extension.ICloudFSExtension().get_file_items([File(sys.argv[3])])
items = menu[0].get_property("menu").get_items()
names = [item.get_property("name") for item in items]
print(" ".join(names))
chosen = [item for item in items if item.get_property("name") == "ICloudFS::" + sys.argv[2]]
if not chosen:
    sys.exit("no menu item " + sys.argv[2])
chosen[0].activate()
PY
}

test_nautilus_shows_states_and_acts() {
    desktop_tools
    mount_device a
    mkdir -p "$T/a/Docs"
    for name in cloud downloaded pinned conflict; do echo "$name" > "$T/a/$name.txt"; done
    echo inside > "$T/a/Docs/placeholder.txt"
    sync_wait a
    # broken.txt's content is uploaded on its own, then lost from the store: reading it fails.
    touch "$T/marker"
    sleep 0.1
    echo broken > "$T/a/broken.txt"
    sync_wait a
    find "$T/store" \( -path '*/chunks/*' -o -path '*/packs/*' \) -type f -newer "$T/marker" -delete
    mount_device b
    cat "$T/b/downloaded.txt" "$T/b/pinned.txt" "$T/b/conflict.txt" > /dev/null
    "$BIN/icloudfs" pin "$T/b/pinned.txt"
    fails cat "$T/b/broken.txt" 2>/dev/null
    eventually 'test -n "$(xattr downloadingError "$T/b/broken.txt")"'
    conflicting_edits conflict.txt a b
    eventually 'test "$(xattr hasUnresolvedConflicts "$T/b/conflict.txt")" = 1'
    # Not yet uploaded: written while the store is away (until the end of the test).
    mv "$T/store" "$T/store.away"
    echo new > "$T/b/uploading.txt"

    # Nautilus under Xvfb, with a private home, a session bus and the extension.
    local home="$T/home" display=":$((90 + RANDOM % 100))"
    mkdir -p "$home/.local/share/nautilus-python/extensions" "$home/.local/share/icons/hicolor/scalable/emblems" "$T/runtime"
    chmod 700 "$T/runtime"
    cp "$REPO/packaging/desktop/icloudfs-nautilus.py" "$home/.local/share/nautilus-python/extensions/icloudfs.py"
    cp "$REPO"/packaging/desktop/emblems/*.svg "$home/.local/share/icons/hicolor/scalable/emblems/"
    Xvfb "$display" -screen 0 1280x800x24 -nolisten tcp > "$T/xvfb.log" 2>&1 &
    xvfb_pid=$!
    # GTK draws with cairo: its GL renderer (llvmpipe here) starved on a busy machine.
    export HOME="$home" DISPLAY="$display" XDG_RUNTIME_DIR="$T/runtime" GSETTINGS_BACKEND=keyfile GSK_RENDERER=cairo \
        ICLOUDFS_NAUTILUS_LOG="$T/emblems.log" PATH="$BIN:$PATH" NO_AT_BRIDGE=1
    dbus-run-session -- sh -c '
        gsettings set org.gnome.nautilus.preferences default-folder-viewer list-view
        gsettings set org.gnome.nautilus.list-view default-visible-columns "[\"name\", \"size\", \"ICloudFS::state\"]"
        gsettings set org.gnome.nautilus.window-state initial-size "(1260, 760)"
        exec nautilus --new-window "$1"' sh "$T/b" > "$T/nautilus.log" 2>&1 &
    nautilus_pid=$!
    trap 'kill $nautilus_pid $xvfb_pid 2>/dev/null; stop_desktop "$T/runtime"' EXIT
    # Nautilus's first start (its caches, the session's services) may take a while on a busy
    # machine: up to a minute for the folder's first states.
    local waited=0 artifacts="$REPO/.build/test-results/desktop"
    until grep -q "/uploading.txt	" "$T/emblems.log" 2>/dev/null && grep -q "/Docs	" "$T/emblems.log"; do
        if [ $waited -ge 600 ]; then
            echo "    Nautilus showed no states in 60 s (its screen: $artifacts/nautilus-failed.png)"
            mkdir -p "$artifacts" && import -display "$display" -window root "$artifacts/nautilus-failed.png"
            return 1
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    sleep 2
    mkdir -p "$artifacts"
    import -display "$display" -window root "$artifacts/nautilus-states.png"
    cat "$T/emblems.log"
    emblem() { grep "/$1	" "$T/emblems.log" | tail -n 1 | cut -f2; }
    assert_eq "$(emblem cloud.txt)" emblem-icloudfs-cloud "cloud only"
    assert_eq "$(emblem downloaded.txt)" emblem-default-symbolic "downloaded"
    assert_eq "$(emblem pinned.txt)" emblem-default-symbolic,emblem-favorite-symbolic "pinned"
    assert_eq "$(emblem conflict.txt)" emblem-important-symbolic "conflict"
    assert_eq "$(emblem broken.txt)" emblem-unreadable "error"
    assert_eq "$(emblem uploading.txt)" emblem-icloudfs-uploading "uploading"
    assert_eq "$(emblem Docs)" emblem-icloudfs-cloud "a folder by what is below it"
    grep -q "/broken.txt	.*	Cannot download (notFound)$" "$T/emblems.log"
    # Live: once the store is back and uploading.txt is in it, its emblem changes without
    # anyone touching it (the live query tells the extension).
    mv "$T/store.away" "$T/store"
    "$BIN/icloudfs" sync --wait "$T/b"
    eventually 'test "$(emblem uploading.txt)" = emblem-default-symbolic'
    sleep 1
    import -display "$display" -window root "$artifacts/nautilus-after-upload.png"
    # Downloading is brief here: its words, from the extension's own function.
    assert_eq "$(/usr/bin/python3 -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location("x", sys.argv[1]); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
print(m.emblems_and_label({"isDownloading": "1", "percentDownloaded": "42.5", "isUploaded": "1"}))' "$REPO/packaging/desktop/icloudfs-nautilus.py")" \
        "(['emblem-icloudfs-downloading'], 'Downloading 42.5%')"
    # The menu, through the extension: Download Now on a placeholder, Free Up Space after.
    extension_menu download "$T/b/Docs/placeholder.txt" | tee "$T/menu"
    grep -q "ICloudFS::download ICloudFS::pin ICloudFS::versions" "$T/menu"
    eventually 'test "$(xattr isDownloaded "$T/b/Docs/placeholder.txt")" = 1'
    extension_menu evict "$T/b/Docs/placeholder.txt"
    eventually 'test "$(xattr isDownloaded "$T/b/Docs/placeholder.txt")" = 0'
    extension_menu pin "$T/b/cloud.txt"
    eventually 'test "$(xattr isPinned "$T/b/cloud.txt")" = 1'
    kill $nautilus_pid $xvfb_pid 2>/dev/null || true
    stop_desktop "$T/runtime"
    trap - EXIT
}
