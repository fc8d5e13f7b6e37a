"""icloudfs in GNOME Files (Nautilus 43+, nautilus-python 4).

Each file and folder on an icloudfs mount gets an emblem for its sync state (folders by
what is below them) and an "iCloud" column; a context menu offers what the icloudfs command
does. States come from the mount's extended attributes (user.icloud.*); they are refreshed
live from `icloudfs query MOUNT --live --json`, one per mount seen, not by polling files.
Installed by the package in /usr/share/nautilus-python/extensions/. docs/SEMANTICS.md
"The file manager" lists the emblems.

ICLOUDFS_NAUTILUS_LOG=FILE appends a line per file shown: "PATH<TAB>EMBLEMS<TAB>LABEL".
"""

import json
import os
import subprocess
from collections import OrderedDict

import gi

try:
    gi.require_version("Nautilus", "4.0")
except ValueError:
    pass
from gi.repository import GLib, GObject, Nautilus  # noqa: E402

PREFIX = "user.icloud."
STATE = ("isDownloaded", "isDownloading", "percentDownloaded", "isUploaded", "isPinned",
         "hasUnresolvedConflicts", "downloadingError", "uploadingError")
ACTION = os.environ.get("ICLOUDFS_ACTION", "/usr/lib/icloudfs/icloudfs-action")
LOG = os.environ.get("ICLOUDFS_NAUTILUS_LOG")
SHOWN_LIMIT = 20000


def sync_state(path):
    """The item's user.icloud.* state, or None off a mount (or on the top of a mount of all)."""
    try:
        os.getxattr(path, PREFIX + "itemIdentifier")
    except OSError:
        return None
    state = {}
    for name in STATE:
        try:
            state[name] = os.getxattr(path, PREFIX + name).decode()
        except OSError:
            pass
    return state


def emblems_and_label(state):
    """The emblems (most urgent first) and the column's words for a state."""
    upload_error = state.get("uploadingError")
    # The store out of reach is a wait, not an error: the change stays queued.
    waiting = upload_error is not None and upload_error.startswith("serverUnavailable")
    if state.get("downloadingError"):
        return ["emblem-unreadable"], "Cannot download (%s)" % state["downloadingError"].split(":")[0]
    if upload_error and not waiting:
        return ["emblem-unreadable"], "Cannot upload (%s)" % upload_error.split(":")[0]
    if state.get("hasUnresolvedConflicts") == "1":
        return ["emblem-important-symbolic"], "Conflict"
    if state.get("isDownloading") == "1":
        return ["emblem-icloudfs-downloading"], "Downloading %s%%" % state.get("percentDownloaded", "0")
    if state.get("isUploaded") == "0":
        return ["emblem-icloudfs-uploading"], "Waiting for the store" if waiting else "Uploading"
    if state.get("isDownloaded") != "1":
        return ["emblem-icloudfs-cloud"], "In the cloud"
    if state.get("isPinned") == "1":
        return ["emblem-default-symbolic", "emblem-favorite-symbolic"], "Kept on this device"
    return ["emblem-default-symbolic"], "Downloaded"


def mount_root(path):
    """The folder a mount's commands take: the highest folder above `path` on the mount."""
    root = path
    while True:
        parent = os.path.dirname(root)
        if parent == root or sync_state(parent) is None:
            return root
        root = parent


def local_path(file):
    if file.get_uri_scheme() != "file":
        return None
    location = file.get_location()
    return location.get_path() if location else None


class ICloudFSExtension(GObject.GObject, Nautilus.InfoProvider, Nautilus.MenuProvider, Nautilus.ColumnProvider):
    def __init__(self):
        super().__init__()
        # The files Nautilus has shown, to invalidate when their state changes: the latest
        # SHOWN_LIMIT (Python's wrappers of them die at once, so weak references would not do).
        self.shown = OrderedDict()
        # A live query per mount root: root -> process.
        self.followers = {}

    # Column

    def get_columns(self):
        return [Nautilus.Column(name="ICloudFS::state", attribute="icloudfs_state", label="iCloud",
                                description="Sync state on icloudfs mounts")]

    # Emblems

    def update_file_info(self, file):
        path = local_path(file)
        state = sync_state(path) if path else None
        if state is None:
            return Nautilus.OperationResult.COMPLETE
        emblems, label = emblems_and_label(state)
        for emblem in emblems:
            file.add_emblem(emblem)
        file.add_string_attribute("icloudfs_state", label)
        self.shown[path] = file
        self.shown.move_to_end(path)
        if len(self.shown) > SHOWN_LIMIT:
            self.shown.popitem(last=False)
        self.follow(mount_root(path))
        if LOG:
            with open(LOG, "a") as log:
                log.write("%s\t%s\t%s\n" % (path, ",".join(emblems), label))
        return Nautilus.OperationResult.COMPLETE

    def follow(self, root):
        """Runs `icloudfs query ROOT --live --json` and refreshes each item it reports."""
        if root in self.followers:
            return
        try:
            process = subprocess.Popen(["icloudfs", "query", root, "--live", "--json"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        except OSError:
            return
        self.followers[root] = process
        channel = GLib.IOChannel.unix_new(process.stdout.fileno())
        GLib.io_add_watch(channel, GLib.PRIORITY_DEFAULT, GLib.IOCondition.IN | GLib.IOCondition.HUP,
                          self.changed, root, process)

    def changed(self, channel, condition, root, process):
        line = process.stdout.readline()
        if not line:
            # The mount went away: follow again when it shows files.
            self.followers.pop(root, None)
            process.wait()
            return False
        try:
            change = json.loads(line)
        except ValueError:
            return True
        item = change.get("item") if isinstance(change, dict) else None
        if item and "path" in item:
            self.refresh(os.path.join(root, item["path"]), root)
        return True

    def refresh(self, path, root):
        """Asks Nautilus for `path`'s state again, and its folders' (they sum it up)."""
        while True:
            file = self.shown.get(path)
            if file is not None:
                file.invalidate_extension_info()
            if path == root or len(path) <= len(root):
                return
            path = os.path.dirname(path)

    # Menu

    def get_file_items(self, *arguments):
        files = arguments[-1]
        paths = [local_path(file) for file in files]
        if not paths or None in paths:
            return []
        states = [sync_state(path) for path in paths]
        if None in states:
            return []
        items = []
        if any(state.get("isDownloaded") != "1" for state in states):
            items.append(self.item("download", "Download Now", paths))
        if any(state.get("isDownloaded") == "1" and state.get("isPinned") != "1" for state in states):
            items.append(self.item("evict", "Free Up Space", paths))
        if any(state.get("isPinned") != "1" for state in states):
            items.append(self.item("pin", "Always Keep on This Device", paths))
        else:
            items.append(self.item("unpin", "Stop Keeping on This Device", paths))
        if len(paths) == 1 and os.path.isfile(paths[0]):
            items.append(self.item("versions", "Show Versions", paths))
        if len(paths) == 1 and os.path.isdir(paths[0]):
            items.append(self.deleted_item(paths[0]))
        return [self.submenu(items)]

    def get_background_items(self, *arguments):
        path = local_path(arguments[-1])
        if path is None or sync_state(path) is None:
            return []
        return [self.submenu([self.deleted_item(path)])]

    def submenu(self, items):
        top = Nautilus.MenuItem(name="ICloudFS::menu", label="iCloud", tip="icloudfs", icon="")
        menu = Nautilus.Menu()
        for item in items:
            menu.append_item(item)
        top.set_submenu(menu)
        return top

    def item(self, action, label, paths):
        item = Nautilus.MenuItem(name="ICloudFS::" + action, label=label, tip="", icon="")
        item.connect("activate", self.run, [action] + paths, paths)
        return item

    def deleted_item(self, folder):
        root = mount_root(folder)
        relative = os.path.relpath(folder, root)
        arguments = ["deleted", root] + ([] if relative == "." else [relative])
        item = Nautilus.MenuItem(name="ICloudFS::deleted", label="Recently Deleted", tip="", icon="")
        item.connect("activate", self.run, arguments, [folder])
        return item

    def run(self, menu_item, arguments, paths):
        """Runs the action without waiting for it; refreshes the files once it is done."""
        try:
            process = subprocess.Popen([ACTION] + arguments, stdin=subprocess.DEVNULL)
        except OSError:
            return
        root = mount_root(paths[0])
        GLib.child_watch_add(GLib.PRIORITY_DEFAULT, process.pid,
                             lambda pid, status: [self.refresh(path, root) for path in paths])
