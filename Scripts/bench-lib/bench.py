#!/usr/bin/env python3
"""The orchestrator behind Scripts/bench (issue 7): runs each workload on three targets side
by side and writes bench.json, bench.md and bench.png into the output folder.

Targets:
  native          a plain folder on the local disk
  rclone          `rclone mount` of a local-directory remote, --vfs-cache-mode full
  icloudfs        a mount of a container in a directory store, with a fresh cache folder
  passthrough_hp  libfuse's example/passthrough_hp (3.17 and later: with FUSE passthrough)
                  mirroring a plain folder: the best a FUSE daemon over local files does here.
                  A yardstick for W1, W2, W12, W3, W7 and W13; not built here (see
                  find_passthrough_hp), and left out with a note when no binary is found
  floor           nullfs.c, a null FUSE daemon: W3, W7 and W13 at FUSE's round-trip cost

Stores (issue 24): the rows above use a directory store (rclone: a local-directory remote).
W1, W2, W3, W5 and W7 also run on S3 (rows W1@s3, W3sync@s3, ...): icloudfs with an s3://
store and rclone with an S3 remote, each under a prefix of its own in the same bucket (new
for each run, deleted afterwards), on the server of Scripts/s3-server (started here when
none answers, and then stopped here). The million-item rows (mount@1M, memory@1M, ls@1M)
use a 1,000,000-item container in a directory store, made once and kept in DIR/cache.

Cold runs drop the page cache (`sync; echo 3 > /proc/sys/vm/drop_caches`) and, for the two
mounts, start a new mount with a new cache folder (a new device for icloudfs). Each figure is
the median of the repetitions. It reports; it never fails on slowness. Every mount it makes
is unmounted on the way out, also on Ctrl-C (and Scripts/bench unmounts whatever is left).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import heavy

CONTAINER = "iCloud.com.example.bench"
BIG_CONTAINER = "iCloud.com.example.bench100k"
MILLION_CONTAINER = "iCloud.com.example.bench1m"
# W8..W11 in a container of their own: the directory store keeps what the earlier rows wrote
# (about 100,000 items), which a new device would hold in memory, and "daemon RSS during
# W8..W11" would measure that instead of the workloads (207 MiB in the run of 08:59, 67 alone).
HEAVY_CONTAINER = "iCloud.com.example.benchheavy"
MILLION_ITEMS = 1_000_000
# The folder of the million-item container that ls@1M lists (and its native twin).
MILLION_BIG_FOLDER = 10_000
# The workloads that also run on an S3 store (their rows are keyed W1@s3, W3sync@s3, ...).
S3_WORKLOADS = ("W1", "W2", "W3", "W5", "W7")
STORES = ("directory", "s3")
# The snapshot format icloudfs writes (Snapshot.formatVersion).
SNAPSHOT_FORMAT = 6
# Containers of an older generator (UUID ids before 2, where icloudfs makes 15-character
# ids) measure what icloudfs no longer makes: the cache's name says which generator made them.
GENERATOR = 2
MiB = 1 << 20
# A repetition that takes longer than this is not repeated (the output says so).
LONG_RUN_S = 300
# W7's tar x is stopped after this long (half of it with --quick); its figure is then a lower bound.
W7_LIMIT_S = 600
# W13: appends of 4 bytes, one write(2) each (a tenth with --quick).
W13_APPENDS = 3_000_000


# ---------------------------------------------------------------------------- helpers

def log(message):
    stamp = time.strftime("%H:%M:%S")
    print(f"[{stamp}] {message}", flush=True)


def run(args, check=True, capture=False, timeout=None, **kwargs):
    result = subprocess.run(
        [str(a) for a in args], check=False, timeout=timeout,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {result.returncode}: {result.stderr.strip()[:300]}")
    return result


def timed(args, **kwargs):
    start = time.perf_counter()
    run(args, **kwargs)
    return time.perf_counter() - start


def drop_caches():
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def is_mounted(path):
    path = str(path)
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == path for line in mounts)


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


def unmount(path):
    for _ in range(50):
        if not is_mounted(path):
            return
        if run(["fusermount3", "-u", path], check=False).returncode == 0:
            return
        time.sleep(0.2)  # busy: something is still closing a file
    run(["umount", "-l", path], check=False)


def stop_daemon(process, root, timeout):
    """Unmounts `root` and waits for its daemon `process` (killed after `timeout` s)."""
    if process is None:
        return
    unmount(root)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def wait_exit(pid, timeout=60):
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        # a child of ours (rclone) must be reaped; the icloudfs daemon is not our child
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def status_kib(pid, field):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def cpu_seconds(pid):
    """The user + system CPU time of process PID (all its threads) so far, or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def io_write_bytes(pid):
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


def tree_bytes(root):
    """Sum of the sizes of the files below root (what `du -sb` counts, less folders)."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                pass
    return total


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rclone_env():
    """The environment for rclone: without AWS_CA_BUNDLE, with which rclone 1.60's S3 backend
    refuses to start ("LoadCustomCABundleError: ... unsupported transport")."""
    return {name: value for name, value in os.environ.items() if name != "AWS_CA_BUNDLE"}


def random_file(path, size):
    if path.exists() and path.stat().st_size == size:
        return
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        left = size
        while left:
            n = min(left, 4 * MiB)
            f.write(os.urandom(n))
            left -= n
    tmp.rename(path)


# ---------------------------------------------------------------------------- the S3 server

class S3Server:
    """The S3 server the S3 rows use: the one at ICLOUDFS_TEST_S3_ENDPOINT (by default where
    Scripts/s3-server puts its radosgw), with its bucket and credentials from the environment
    or else from `Scripts/s3-server env`. When none answers it is started with
    `Scripts/s3-server up`, and only then stopped at the end (`Scripts/s3-server down`)."""

    RCLONE_REMOTE = "benchs3"

    def __init__(self, repo):
        self.script = Path(repo) / "Scripts" / "s3-server"
        self.started = False
        self.settings = self.script_env()
        for name in list(self.settings) + ["ICLOUDFS_TEST_S3_ENDPOINT", "ICLOUDFS_TEST_S3_BUCKET",
                                           "ICLOUDFS_TEST_S3_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]:
            if os.environ.get(name):
                self.settings[name] = os.environ[name]

    def script_env(self, output=None):
        if output is None:
            result = run([self.script, "env"], capture=True, check=False)
            output = result.stdout if result.returncode == 0 else ""
        settings = {}
        for line in output.splitlines():
            line = line.strip()
            if line.startswith("export ") and "=" in line:
                name, value = line[len("export "):].split("=", 1)
                settings[name] = value
        return settings

    @property
    def endpoint(self):
        return self.settings.get("ICLOUDFS_TEST_S3_ENDPOINT", "http://127.0.0.1:7480")

    @property
    def bucket(self):
        return self.settings.get("ICLOUDFS_TEST_S3_BUCKET", "icloudfs-test")

    @property
    def region(self):
        return self.settings.get("ICLOUDFS_TEST_S3_REGION", "us-east-1")

    def answers(self):
        import urllib.error
        import urllib.request
        try:
            urllib.request.urlopen(self.endpoint + "/", timeout=5).close()
            return True
        except urllib.error.HTTPError:
            return True  # an S3 error (403, 404) is an answer
        except OSError:
            return False

    def ensure(self):
        """None when a server answers (started here if need be), else why there is none."""
        if self.answers():
            return None
        missing = [t for t in ("ceph-mon", "ceph-osd", "radosgw") if shutil.which(t) is None]
        if missing:
            return (f"no S3 server answers at {self.endpoint} and none can be started here "
                    f"({', '.join(missing)} missing: Scripts/bootstrap --with-s3 installs them)")
        log(f"no S3 server answers at {self.endpoint}: Scripts/s3-server up")
        result = run([self.script, "up"], capture=True, check=False, timeout=900)
        if result.returncode != 0:
            return f"Scripts/s3-server up failed: {result.stderr.strip()[-300:]}"
        self.started = True
        self.settings.update(self.script_env(result.stdout))
        return None if self.answers() else f"Scripts/s3-server up ran but nothing answers at {self.endpoint}"

    def environment(self):
        """What icloudfs needs to reach the bucket (its credentials come from AWS_*)."""
        return {name: self.settings[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
                if name in self.settings}

    def store_url(self, prefix):
        return f"s3://{self.bucket}/{prefix}?endpoint={self.endpoint}&region={self.region}"

    def rclone_config(self):
        return (f"[{self.RCLONE_REMOTE}]\ntype = s3\nprovider = Ceph\nendpoint = {self.endpoint}\n"
                f"region = {self.region}\naccess_key_id = {self.settings.get('AWS_ACCESS_KEY_ID', '')}\n"
                f"secret_access_key = {self.settings.get('AWS_SECRET_ACCESS_KEY', '')}\n")

    def rclone_path(self, prefix):
        return f"{self.RCLONE_REMOTE}:{self.bucket}/{prefix}"

    def delete_prefix(self, config, prefix):
        """Deletes everything under PREFIX/ in the bucket (the server keeps objects in memory)."""
        result = run(["rclone", "purge", self.rclone_path(prefix), "--config", config], check=False, capture=True,
                     env=rclone_env())
        if result.returncode != 0 and "directory not found" not in result.stderr:
            log(f"  could not delete s3://{self.bucket}/{prefix}: {result.stderr.strip()[-200:]}")

    def stop(self):
        if self.started:
            log("stopping the S3 server started for this run (Scripts/s3-server down)")
            run([self.script, "down"], check=False)
            self.started = False


# ---------------------------------------------------------------------------- targets

class Native:
    name = "native"
    store = "directory"
    has_store = False  # no "until in the store" rows

    def __init__(self, work):
        self.root = work / "native"
        self.root.mkdir(parents=True, exist_ok=True)
        self.pid = None

    def start(self, fresh=True):
        pass

    def put(self, source, name):
        """Puts a file where a cold read will find it (here: the folder itself)."""
        shutil.copyfile(source, self.root / name)

    def drop(self, name):
        """Removes what put() put there (a store of a mount is removed with the work folder)."""
        (self.root / name).unlink()

    def stop(self):
        pass

    def remount(self):
        pass

    def settle(self):
        start = time.perf_counter()
        os.sync()
        return time.perf_counter() - start


def compile_c(source, binary, *flags):
    """Compiles Scripts/bench-lib/SOURCE into BINARY (in the work folder, new for each run)."""
    compiler = shutil.which("cc") or shutil.which("clang")
    if compiler is None:
        raise RuntimeError(f"no C compiler (cc or clang) for {source}")
    run([compiler, "-O2", "-o", binary, Path(__file__).with_name(source), *flags])
    return binary


class FuseFloor:
    """nullfs.c: a FUSE daemon that keeps names in memory and drops written bytes. What W3,
    W7 and W13 take on it is the cost of FUSE's round trips here, which no FUSE filesystem
    beats (W13: without a writeback cache, as icloudfs mounts)."""
    name = "floor"
    store = "directory"

    def __init__(self, work):
        self.root = work / "floor"
        self.root.mkdir(parents=True, exist_ok=True)
        flags = run(["pkg-config", "--cflags", "--libs", "fuse3"], capture=True).stdout.split()
        self.binary = compile_c("nullfs.c", work / "nullfs", *flags)
        self.process = None
        self.pid = None

    def command(self):
        return [self.binary, self.root]

    def start(self, fresh=True):
        self.process = subprocess.Popen(self.command(), stderr=subprocess.DEVNULL)
        self.pid = self.process.pid
        wait_for(lambda: is_mounted(self.root) or self.process.poll() is not None, 10, f"the null daemon ({self.name})")
        if not is_mounted(self.root):
            raise RuntimeError(f"the null daemon ({self.name}) did not mount")

    def stop(self):
        if self.process is not None:
            unmount(self.root)
            self.process.wait(timeout=10)
            self.process = None


class KernelLayerFloor(FuseFloor):
    """`icloudfs-bench null-mount`: the same null filesystem served by icloudfs's own kernel
    layer (FuseKernel). What W3, W7 and W13 take on it is the kernel layer's share of icloudfs's
    time; the rest is the replica's. Reported, not a goal."""
    name = "kernel_layer"

    def __init__(self, work, bin):
        self.root = work / "kernel-layer"
        self.root.mkdir(parents=True, exist_ok=True)
        self.binary = bin / "icloudfs-bench"
        self.process = None
        self.pid = None

    def command(self):
        return [self.binary, "null-mount", self.root]


class KernelLayerKeeping(KernelLayerFloor):
    """`icloudfs-bench null-mount --log` / `--file-per-item` / `--passthrough-file-per-item`:
    the null filesystem on icloudfs's kernel layer, keeping written bytes in one log file, in
    an ext4 file per created file, or in such a file the kernel writes (FUSE passthrough).
    What W3 takes on each bounds a design that keeps small files' bytes in that shape, with no
    other work per file. Reported, not a goal."""

    def __init__(self, work, bin, shape):
        super().__init__(work, bin)
        self.name = f"kernel_layer_{shape.replace('-', '_')}"
        self.shape = shape
        self.kept = work / f"kept-{shape}"

    def start(self, fresh=True):
        shutil.rmtree(self.kept, ignore_errors=True)
        self.kept.mkdir(parents=True)
        super().start(fresh)

    def stop(self):
        super().stop()
        shutil.rmtree(self.kept, ignore_errors=True)

    def command(self):
        kept = self.kept / "log" if self.shape == "log" else self.kept
        return [self.binary, "null-mount", self.root, f"--{self.shape}", kept]


# The shapes of keeping small files' bytes that W3 is run on beside the null filesystem.
KEEPING_SHAPES = ("log", "file-per-item", "passthrough-file-per-item")


# Where find_passthrough_hp looks in DIR/cache: a libfuse build made there by hand, once.
PASSTHROUGH_HP_IN_CACHE = "libfuse-*/build/example/passthrough_hp"


def find_passthrough_hp(cache):
    """(path, None) of a passthrough_hp binary, or (None, why there is none). The bench builds no
    third-party code itself: it uses $PASSTHROUGH_HP, else a build kept in DIR/cache (the newest
    match of PASSTHROUGH_HP_IN_CACHE, e.g. DIR/cache/libfuse-3.19/build/example/passthrough_hp),
    else passthrough_hp on the PATH."""
    given = os.environ.get("PASSTHROUGH_HP")
    if given:
        if os.access(given, os.X_OK):
            return Path(given), None
        return None, f"PASSTHROUGH_HP={given} is not an executable file"
    built = sorted(Path(cache).glob(PASSTHROUGH_HP_IN_CACHE), key=lambda p: p.stat().st_mtime)
    if built:
        return built[-1], None
    found = shutil.which("passthrough_hp")
    if found:
        return Path(found), None
    return None, ("no passthrough_hp binary (libfuse's example/passthrough_hp, 3.17 or later for FUSE "
                  f"passthrough): set PASSTHROUGH_HP, or build it into {Path(cache) / PASSTHROUGH_HP_IN_CACHE}")


class PassthroughHP:
    """libfuse's example/passthrough_hp mirroring a plain folder (self.source) at self.root: a
    yardstick for what a FUSE daemon over local files reaches here. With libfuse 3.17 or later
    and a kernel with FUSE passthrough (6.9+), its opens answer FOPEN_PASSTHROUGH, so reads and
    writes go to the source file in the kernel, as icloudfs's opens of complete local copies do.

    Options, chosen for its best figures: --foreground only (so that the bench owns the process
    and can stop it). Left at their defaults on purpose: passthrough (on unless --nopassthrough),
    attribute and entry caching for 86,400 s (--nocache would send a lookup per path, and the
    source changes only through the mount here), splice (--nosplice), libfuse's thread count.
    Not --direct-io: it turns passthrough off."""
    name = "passthrough_hp"
    store = "directory"
    has_store = False  # a mirror of a local folder: nothing to wait for but the disk
    # Where it is a yardstick for icloudfs (see wants_on): reads of local files, creation, appends.
    workloads = {"W1", "W2", "W12", "W3", "W7", "W13"}

    def __init__(self, work, binary):
        self.binary = Path(binary)
        self.base = work / "passthrough_hp"
        self.source = self.base / "source"
        self.root = self.base / "mnt"
        self.source.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = self.base / "passthrough_hp.log"
        self.process = None
        help_text = run([self.binary, "--help"], capture=True, check=False).stdout
        self.passthrough = "--nopassthrough" in help_text  # the option came with passthrough, in 3.17
        self.version = libfuse_version(self.binary)

    @property
    def pid(self):
        return self.process.pid if self.process else None

    def put(self, source, name):
        """Puts a file in the source folder, where the mount shows it."""
        shutil.copyfile(source, self.source / name)

    def drop(self, name):
        (self.source / name).unlink()

    def start(self, fresh=True):
        with open(self.log, "a") as log_file:
            self.process = subprocess.Popen([self.binary, "--foreground", self.source, self.root],
                                            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file)
        wait_for(lambda: is_mounted(self.root) or self.process.poll() is not None, 10, "passthrough_hp")
        if not is_mounted(self.root):
            raise RuntimeError(f"passthrough_hp did not mount (exit {self.process.poll()}); see {self.log}")

    def stop(self):
        stop_daemon(self.process, self.root, timeout=30)
        self.process = None

    def remount(self):
        self.stop()
        self.start()

    def settle(self):
        start = time.perf_counter()
        os.sync()
        return time.perf_counter() - start

    def passthrough_failures(self):
        """What passthrough_hp logged when the kernel refused a passthrough open (it then goes on
        without passthrough, and its figures are those of a plain FUSE daemon)."""
        if not self.log.exists():
            return []
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if "passthrough" in line and ("failed" in line or "ERROR" in line)]


def libfuse_version(binary):
    """The version of the libfuse build a passthrough_hp comes from (meson's record of the build
    folder it is in), or of the libfuse3 it loads; None when neither tells."""
    for folder in Path(binary).resolve().parents:
        info = folder / "meson-info" / "intro-projectinfo.json"
        if info.exists():
            try:
                return json.loads(info.read_text()).get("version")
            except ValueError:
                break
    result = run(["ldd", binary], capture=True, check=False)
    for line in result.stdout.splitlines():
        if "libfuse3.so" in line and "=>" in line:
            library = line.split("=>")[1].split("(")[0].strip()
            name = Path(os.path.realpath(library)).name  # libfuse3.so.3.19.0
            if name.startswith("libfuse3.so."):
                return name[len("libfuse3.so."):]
    return None


def store_objects(target):
    """How many objects (files) the target's directory store or remote holds; None for
    targets without one, or on S3."""
    folder = getattr(target, "location", None) if target.name == "icloudfs" else getattr(target, "remote", None)
    if target.store != "directory" or not isinstance(folder, Path):
        return None
    return sum(len(files) for _, _, files in os.walk(folder))


class Rclone:
    """`rclone mount --vfs-cache-mode full` of a local-directory remote (store "directory") or
    of PREFIX in the S3 server's bucket (store "s3", with s3=S3Server and prefix)."""
    name = "rclone"
    has_store = True

    def __init__(self, work, s3=None, prefix=None):
        self.store = "s3" if s3 else "directory"
        self.s3, self.prefix = s3, prefix
        self.base = work / ("rclone" if s3 is None else "rclone-s3")
        self.root = self.base / "mnt"
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = self.base / "rclone.conf"
        if s3 is None:
            self.remote = self.base / "remote"
            self.remote.mkdir(parents=True, exist_ok=True)
            self.config.touch()
        else:
            self.remote = s3.rclone_path(prefix)
            self.config.write_text(s3.rclone_config())
        self.process = None
        self.caches = 0
        self.cache = None
        self.port = None

    @property
    def pid(self):
        return self.process.pid if self.process else None

    def put(self, source, name):
        """Puts a file in the remote directly (not through a mount, whose cache would keep it)."""
        if self.s3 is None:
            shutil.copyfile(source, self.remote / name)
        else:
            run(["rclone", "copyto", source, f"{self.remote}/{name}", "--config", self.config], env=rclone_env())

    def clear_store(self):
        if self.s3 is not None:
            self.s3.delete_prefix(self.config, self.prefix)

    def start(self, fresh=True, remote=None):
        if fresh or self.cache is None:
            self.caches += 1
            self.cache = self.base / f"cache-{self.caches}"
        self.port = free_port()
        self.process = subprocess.Popen(
            ["rclone", "mount", str(remote or self.remote), str(self.root),
             "--vfs-cache-mode", "full", "--cache-dir", str(self.cache), "--config", str(self.config),
             "--rc", "--rc-addr", f"127.0.0.1:{self.port}", "--rc-no-auth",
             "--log-file", str(self.base / "rclone.log"), "--log-level", "NOTICE"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=rclone_env())
        wait_for(lambda: is_mounted(self.root) or self.process.poll() is not None, 60, "rclone mount")
        if self.process.poll() is not None:
            raise RuntimeError(f"rclone mount exited {self.process.returncode}; see {self.base / 'rclone.log'}")

    def stop(self):
        stop_daemon(self.process, self.root, timeout=60)
        self.process = None

    def remount(self):
        self.stop()
        self.start(fresh=False)

    def vfs_stats(self):
        result = run(["rclone", "rc", "vfs/stats", "--url", f"http://127.0.0.1:{self.port}/",
                      "--config", self.config], capture=True, check=False, env=rclone_env())
        if result.returncode != 0:
            return None
        return json.loads(result.stdout).get("diskCache", {})

    def settle(self):
        """Waits until rclone has uploaded everything (its write-back delay is 5 s by default)."""
        start = time.perf_counter()
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            stats = self.vfs_stats()
            if stats is not None and stats.get("uploadsInProgress", 0) == 0 and stats.get("uploadsQueued", 0) == 0:
                break
            time.sleep(0.1)
        return time.perf_counter() - start


class ICloudFS:
    """A mount of CONTAINER in a directory store (store "directory": self.location is a folder)
    or in an S3 one (store "s3", with s3=S3Server and prefix: self.location is an s3:// URL)."""
    name = "icloudfs"
    has_store = True

    def __init__(self, work, bin_dir, s3=None, prefix=None):
        self.store = "s3" if s3 else "directory"
        self.s3, self.prefix = s3, prefix
        self.base = work / ("icloudfs" if s3 is None else "icloudfs-s3")
        self.root = self.base / "mnt"
        self.root.mkdir(parents=True, exist_ok=True)
        if s3 is None:
            self.location = self.base / "store"
            self.location.mkdir(parents=True, exist_ok=True)
        else:
            self.location = s3.store_url(prefix)
        self.env = {**os.environ, **(s3.environment() if s3 else {})}
        self.icloudfs = bin_dir / "icloudfs"
        self.devices = 0
        self.cache = None
        self.device = None
        self.pid = None
        self.container = CONTAINER
        self.store_in_use = self.location

    def find_daemon(self):
        mark = str(self.root).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if mark in argv and b"--foreground" in argv and b"mount" in argv:
                return int(entry.name)
        return None

    def mount_command(self):
        options = f"store={self.store_in_use},cache={self.cache},device={self.device}"
        return [self.icloudfs, "mount", self.container, self.root, "-o", options]

    def start(self, fresh=True, store=None, container=None):
        self.store_in_use = store or self.location
        self.container = container or CONTAINER
        if fresh or self.cache is None:
            self.devices += 1
            self.device = f"bench{self.devices}"
            self.cache = self.base / f"cache-{self.devices}"
        run(self.mount_command(), env=self.env)
        self.pid = self.find_daemon()

    def put(self, source, name):
        """Puts a file in the store through a mount of a device of its own."""
        self.start(fresh=True)
        try:
            shutil.copyfile(source, self.root / name)
            self.settle()
        finally:
            self.stop()

    def clear_store(self):
        if self.s3 is not None:
            config = self.base / "rclone.conf"  # rclone deletes the prefix: icloudfs has no such command
            config.write_text(self.s3.rclone_config())
            self.s3.delete_prefix(config, self.prefix)

    def stop(self):
        if not is_mounted(self.root):
            self.pid = None
            return
        pid = self.pid or self.find_daemon()
        unmount(self.root)
        if pid:
            wait_exit(pid)
        self.pid = None

    def remount(self):
        self.stop()
        self.start(fresh=False, store=self.store_in_use, container=self.container)

    def settle(self):
        start = time.perf_counter()
        result = run([self.icloudfs, "sync", "--wait", "--timeout", "1800s", self.root], check=False, capture=True,
                     env=self.env)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            log(f"  icloudfs sync --wait failed: {(result.stdout + result.stderr).strip()[-300:]}")
            return None
        return elapsed


# ---------------------------------------------------------------------------- profiling

class Perf:
    """`perf record` of one process while a workload runs; a flat report afterwards."""

    def __init__(self, enabled, pid, out, name):
        self.enabled = enabled and pid is not None and shutil.which("perf") is not None
        self.pid, self.out, self.name = pid, out, name
        self.process = None

    def __enter__(self):
        if self.enabled:
            self.data = self.out / f"perf-{self.name}.data"
            self.process = subprocess.Popen(
                ["perf", "record", "-e", "cpu-clock", "-F", "999", "-g", "-p", str(self.pid), "-o", str(self.data)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)  # perf needs a moment to attach; a shorter wait lost a whole W1 profile under load
        return self

    def __exit__(self, *exc):
        if not self.process:
            return False
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        demangle = shutil.which("swift-demangle") or "/opt/swift/usr/bin/swift-demangle"
        report = self.out / f"perf-{self.name}.txt"
        with open(report, "w") as f:
            for title, extra in (("self time (flat)", ["--no-children"]), ("including callees", ["--children"])):
                f.write(f"== {title}\n")
                text = subprocess.run(
                    ["perf", "report", "-i", str(self.data), "--stdio", "-g", "none", "--percent-limit", "0.7",
                     "--sort", "dso,symbol"] + extra,
                    capture_output=True, text=True).stdout
                if os.path.exists(demangle):
                    text = subprocess.run([demangle, "--simplified"], input=text, capture_output=True, text=True).stdout
                kept = []
                for line in text.splitlines():
                    if line.startswith("#") and "Samples:" not in line:
                        continue
                    line = line.rstrip()
                    if line.endswith("-      -"):
                        line = line[:-len("-      -")].rstrip()
                    if line:
                        kept.append(line[:200])
                f.write("\n".join(kept) + "\n\n")
        return False  # the .data file stays beside the report, for `perf report -i` by hand


# ---------------------------------------------------------------------------- the run

CREATOR = r"""
import os, sys, time
folder, count = sys.argv[1], int(sys.argv[2])
os.makedirs(folder)
block = os.urandom(4096)
start = time.perf_counter()
for i in range(count):
    with open(os.path.join(folder, "f%05d" % i), "wb") as f:
        f.write(i.to_bytes(8, "little") + block[8:])
print(time.perf_counter() - start)
"""



# ------------------------------------------------------------------ the work filesystem

# Where the loop filesystem of a journal-less disk keeps its image (beside DIR/work).
WORK_IMAGE = "work.img"


def has_no_journal(path):
    """True when `path` is on an ext4 filesystem without a journal (as this VM's disk is made).
    There, creating an inode shortly after many were deleted walks every inode of the block
    group deleted in the last 60 s (360 s while its inode table is not written back: ext4's
    `recently_deleted`, a no-journal rule), each create paying for all of them: a W3 right
    after the previous target's folders were removed ran at 0.8 ms of kernel time per file
    instead of 0.3. A default Debian install (mkfs.ext4) has a journal and no such cost."""
    source = subprocess.run(["findmnt", "-no", "SOURCE,FSTYPE", "--target", str(path)],
                            capture_output=True, text=True).stdout.split()
    if len(source) != 2 or source[1] != "ext4" or not source[0].startswith("/dev/"):
        return False
    # A mounted journal has a jbd2 entry named after its device (dumpe2fs may not be allowed
    # to open the disk).
    device = Path(source[0]).resolve().name
    return not any(Path("/proc/fs/jbd2").glob(f"{device}-*"))


class WorkFilesystem:
    """DIR/work on a journaled ext4 made in a file on the disk (a loop device, direct I/O so
    that its pages are not cached twice) when the disk's own ext4 has no journal
    (`has_no_journal`): every target's files then live where a default install would keep
    them, and none pays for what the previous one deleted."""

    def __init__(self, out, work):
        self.image = out / WORK_IMAGE
        self.work = work
        self.device = None

    def mount(self):
        free = shutil.disk_usage(self.image.parent).free
        size = min(60 << 30, free * 3 // 4)
        self.image.unlink(missing_ok=True)
        with open(self.image, "wb") as image:
            image.truncate(size)
        self.device = run(["losetup", "--find", "--show", "--direct-io=on", self.image], capture=True).stdout.strip()
        run(["mkfs.ext4", "-q", "-F", self.device])
        self.work.mkdir(parents=True, exist_ok=True)
        run(["mount", self.device, self.work])
        return f"{size >> 30} GiB journaled ext4 on {self.device}"

    def unmount(self, keep=False):
        """Unmounts DIR/work and deletes the image (`keep`: leaves it, to mount by hand)."""
        if self.device is None:
            return
        subprocess.run(["umount", self.work], capture_output=True)
        subprocess.run(["losetup", "-d", self.device], capture_output=True)
        if keep:
            log(f"kept DIR/work in {self.image} (mount -o loop {self.image} DIR/work)")
        else:
            self.image.unlink(missing_ok=True)
        self.device = None


class Bench:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.bin = Path(args.bin)
        self.quick = args.quick
        self.reps = 1 if self.quick else 3
        self.only = None
        if args.only:
            # A row's key selects its workload: W3sync@s3 runs W3@s3, lswarm@1M runs ls@1M.
            self.only = set()
            for key in args.only.split(","):
                base, at, tag = key.partition("@")
                for suffix in ("sync", "warm", "cpu"):
                    if base.endswith(suffix) and len(base) > len(suffix):
                        base = base[:-len(suffix)]
                self.only |= {key, base + at + tag}
        self.chosen = (set(args.targets.split(",")) if args.targets
                       else {"native", "rclone", "icloudfs", "passthrough_hp", "floor"})
        # --stores: which stores' rows run; None until run() knows whether an S3 server answers.
        self.stores = set(args.stores.split(",")) if args.stores else None
        unknown = (self.stores or set()) - set(STORES)
        if unknown:
            raise SystemExit(f"bench.py: unknown store {', '.join(sorted(unknown))} (known: {', '.join(STORES)})")
        self.s3 = None
        self.run_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        self.sizes = {
            "W1_file_MiB": 128 if self.quick else 512,
            "W3_files": 2000,
            "W5_MiB": 64 if self.quick else 256,
            "W6_file_MiB": 64 if self.quick else 256,
            "W7_tree": ("/usr/include" if self.quick else "/usr/include + /usr/share/man") + " without symlinks",
            "memory_items": 100_000,
            "million_items": MILLION_ITEMS,
            "million_big_folder": MILLION_BIG_FOLDER,
            "W8_file_MiB": 256 if self.quick else 1024,
            "W9_db_MiB": 64 if self.quick else 256,
            "W10_file_MiB": 512 if self.quick else 2048,
            "W11_operations": 300 if self.quick else 1000,
            "W13_appends": W13_APPENDS // 10 if self.quick else W13_APPENDS,
        }
        self.cache = self.out / "cache"  # inputs kept between runs
        self.work = self.out / "work"    # mounts, stores, remotes: removed at the end
        self.work_filesystem = None      # a WorkFilesystem when the disk's ext4 has no journal
        self.samples = {}   # key -> target -> [values]
        self.extras = {}    # key -> dict
        self.lower_bounds = {}  # key -> targets whose figure is only a lower bound
        self.notes = []
        self.loads = {}
        self.targets = []
        self.passthrough_hp = None  # what passthrough_hp was found (for the report), once looked for
        self.appender = None        # appender.c, compiled when W13 first runs
        self.started = datetime.datetime.now(datetime.timezone.utc)
        # The commit Scripts/bench just built: HEAD may move while a run of an hour goes on.
        try:
            self.commit = subprocess.run(["git", "-C", self.args.repo, "rev-parse", "--short", "HEAD"],
                                         capture_output=True, text=True).stdout.strip()
        except Exception:
            self.commit = ""

    def wants(self, key):
        """Whether the row `key` runs: --only names it (or nothing), and --stores names its store."""
        if self.stores is not None and store_of(key) not in self.stores:
            return False
        return self.only is None or key in self.only

    @staticmethod
    def key(base, target):
        """The row of workload `base` on `target`'s store: W3 (directory), W3@s3."""
        return base if target.store == "directory" else f"{base}@{target.store}"

    def wants_on(self, base, target):
        if target.store != "directory" and base not in S3_WORKLOADS:
            return False
        if base not in getattr(target, "workloads", {base}):  # a yardstick runs only its own rows
            return False
        return self.wants(self.key(base, target))

    def write_then_settle(self, target, base, rep, unit, action, value_of):
        """Times `action` (profiled on the first icloudfs repetition), records value_of(seconds),
        then how long the target takes to have everything in its store."""
        key = self.key(base, target)
        with Perf(self.args.perf and rep == 0 and target.name == "icloudfs", target.pid, self.out, key):
            seconds = action()
        value = value_of(seconds)
        synced = target.settle()
        self.add(key, target.name, value)
        if target.has_store:
            self.add(self.key(f"{base}sync", target), target.name, synced)
        shown = f"{value:.2f}" if unit == "s" else f"{value:.0f}"
        log(f"  {target.name} {key} {shown} {unit}, then "
            + (f"{synced:.2f} s" if synced is not None else "failed")
            + (" until in the store" if target.has_store else " for sync(2)"))

    def native_beside_w5(self, rep):
        """The same dd on the disk itself just before icloudfs's repetition: this disk's fsync
        speed drifts by a third within a run (1,260 MB/s in native's turn, ~900 an hour later),
        so W5's goal compares with native measured beside it, not in its own turn."""
        path = self.work / "native-beside-w5"
        path.mkdir(parents=True, exist_ok=True)
        seconds = timed(["dd", f"if={self.w5_source}", f"of={path / f'w5-{rep}'}", "bs=1M", "conv=fsync",
                         "status=none"])
        self.add("W5", "native_beside", self.w5_source.stat().st_size / 1e6 / seconds)
        shutil.rmtree(path, ignore_errors=True)
        run(["sync"])

    def w5_sync_calls(self, target, path):
        """One more (untimed) W5 with the target's daemon under strace: how many fsync,
        fdatasync, syncfs and sync_file_range calls `dd conv=fsync` leads to. None at all means
        the bytes were not on disk when dd returned, whatever its speed."""
        if target.pid is None or shutil.which("strace") is None:
            return
        trace = self.out / f"strace-{self.key('W5', target)}-{target.name}.txt"
        tracer = subprocess.Popen(
            ["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,syncfs,sync_file_range", "-o", str(trace),
             "-p", str(target.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # strace needs a moment to attach to every thread
        try:
            run(["dd", f"if={self.w5_source}", f"of={path}", "bs=1M", "conv=fsync", "status=none"])
        finally:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
        names = ("fsync(", "fdatasync(", "syncfs(", "sync_file_range(")
        calls = sum(1 for line in trace.read_text(errors="replace").splitlines() if any(n in line for n in names))
        key = self.key("W5", target)
        self.extra(key, f"{target.name}_sync_calls", calls)
        log(f"  {target.name} {key}: {calls} sync calls (strace) during one more dd conv=fsync")
        if calls == 0:
            self.notes.append(
                f"{key}: {target.name} made no fsync, fdatasync, syncfs or sync_file_range call while `dd conv=fsync` "
                "ran (strace): its figure is the page cache's speed, not the disk's")
        target.settle()  # before W6 counts what goes to the store

    def add(self, key, target, value):
        self.samples.setdefault(key, {}).setdefault(target, []).append(value)

    def extra(self, key, name, value):
        self.extras.setdefault(key, {})[name] = value

    # -------------------------------------------------------------- inputs

    def prepare_inputs(self):
        self.cache.mkdir(parents=True, exist_ok=True)
        self.big = self.cache / f"big-{self.sizes['W1_file_MiB']}M.bin"
        random_file(self.big, self.sizes["W1_file_MiB"] * MiB)
        self.w5_source = Path(tempfile.gettempdir() if not Path("/dev/shm").is_dir() else "/dev/shm") / f"icloudfs-bench-{os.getpid()}.bin"
        random_file(self.w5_source, self.sizes["W5_MiB"] * MiB)
        self.tarball = self.cache / ("tree-include-nolinks.tar" if self.quick else "tree-include-man-nolinks.tar")
        if not self.tarball.exists():
            log(f"making {self.tarball} from {self.sizes['W7_tree']}")
            # No symlinks: `rclone mount` cannot make them, and every target gets the same tree.
            sources = ["usr/include"] if self.quick else ["usr/include", "usr/share/man"]
            tmp = self.tarball.with_suffix(".tmp")
            subprocess.run(f"find {' '.join(sources)} ! -type l -print0 | tar --null --no-recursion -T - -cf '{tmp}'",
                           shell=True, check=True, cwd="/")
            tmp.rename(self.tarball)
        listing = run(["tar", "tf", self.tarball], capture=True).stdout.splitlines()
        self.tar_entries = len(listing)
        self.extra("W7", "entries", self.tar_entries)
        self.extra("W7", "tarball_bytes", self.tarball.stat().st_size)

    # -------------------------------------------------------------- W1, W2

    def read_file(self, path):
        seconds = timed(["dd", f"if={path}", "of=/dev/null", "bs=1M", "status=none"])
        return path.stat().st_size / 1e6 / seconds

    def w1_w2(self, target):
        """W1, W2 and W12 on the target's store, each repetition on a new mount: the file is put
        in the store (icloudfs: through a mount of a device of its own; rclone: into the remote),
        then read from a new mount with a new cache folder (icloudfs: a new device) and dropped
        page cache (W1); read again three times (W2, every repetition: the median of the three);
        then, its local copy now complete (icloudfs: every chunk in the cache, so that an open
        may pass the cache file to the kernel; rclone: the whole file in its VFS cache), read
        three more times, each after the page cache is dropped, with a new open (W12: their
        median). W12 is the local disk seen through the mount: native's W12 is cold reads of the
        same file."""
        name = "big.bin"
        w1, w2, w12 = self.key("W1", target), self.key("W2", target), self.key("W12", target)
        target.put(self.big, name)
        os.sync()
        for rep in range(self.reps):
            target.start(fresh=True)
            warm = local = None
            try:
                drop_caches()
                with Perf(self.args.perf and rep == 0 and target.name == "icloudfs", target.pid, self.out, w1):
                    cold = self.read_file(target.root / name)
                if self.wants_on("W2", target):
                    warm = median([self.read_file(target.root / name) for _ in range(3)])
                if self.wants_on("W12", target):
                    # Three cold reads, each after dropping the page cache: on this VM the first
                    # cold read after a download is slow whatever file it reads (native ones too:
                    # the virtual disk takes a third more time per request for a few seconds), and
                    # W12 asks how fast the mount reads a complete copy, not how the disk settles.
                    before = heavy.bytes_read(target.pid)
                    reads, beside = [], []
                    for _ in range(3):
                        if target.name == "icloudfs" and target.store == "directory":
                            # The disk's own speed right before (it drifts by a third within a
                            # run): what the goal compares with.
                            drop_caches()
                            beside.append(self.read_file(self.big))
                        drop_caches()
                        reads.append(self.read_file(target.root / name))
                    local = median(reads)
                    if beside:
                        self.add(w12, "native_beside", median(beside))
                    self.extras.setdefault(w12, {}).setdefault(f"{target.name}_cold_reads_MBps", []).append(
                        [round(r) for r in reads])
                    if before is not None:
                        # What the daemon itself read meanwhile: about nothing when the kernel
                        # read the local copy directly (FUSE passthrough), the file's size when
                        # every read went through the daemon.
                        read = (heavy.bytes_read(target.pid) - before) / MiB
                        self.extras.setdefault(w12, {}).setdefault(f"{target.name}_daemon_read_MiB", []).append(
                            round(read, 1))
            finally:
                target.stop()
            self.add(w1, target.name, cold)
            shown = [f"{w1} cold {cold:.0f} MB/s"]
            if warm is not None:
                self.add(w2, target.name, warm)
                shown.append(f"{w2} warm {warm:.0f} MB/s")
            if local is not None:
                self.add(w12, target.name, local)
                daemon = self.extras.get(w12, {}).get(f"{target.name}_daemon_read_MiB")
                shown.append(f"{w12} local copy, page cache dropped, {local:.0f} MB/s"
                             + (f" (daemon read {daemon[-1]:.1f} MiB)" if daemon else ""))
            log(f"  {target.name} " + ", ".join(shown))
        if hasattr(target, "drop"):
            target.drop(name)

    # -------------------------------------------------------------- W3 .. W7

    def sent_counter(self, target):
        """Bytes sent to the store so far, by the target's own measure."""
        if target.name == "icloudfs":
            return tree_bytes(target.location)
        if target.name == "rclone":
            return io_write_bytes(target.pid)
        return 0

    def creates(self, folder, target):
        """Seconds W3's creator takes in `folder`; on the directory store also the CPU time the
        target's daemon spent per file meanwhile (row W3cpu: user + system of all its threads,
        /proc/PID/stat, so background work done during the creates counts, work after them not)."""
        before = cpu_seconds(target.pid)
        seconds = float(run([sys.executable, "-c", CREATOR, folder, self.sizes["W3_files"]], capture=True).stdout)
        after = cpu_seconds(target.pid)
        if before is not None and after is not None and target.store == "directory":
            self.add("W3cpu", target.name, (after - before) * 1000 / self.sizes["W3_files"])
        return seconds

    def w3_to_w7(self, target):
        """W3..W7 on one fresh mount of the target (W4 and W6 on the directory store only)."""
        def wants(base):
            return self.wants_on(base, target)
        target.start(fresh=True)
        try:
            root = target.root
            if wants("W3") or wants("W4"):
                for rep in range(self.reps):
                    folder = root / f"w3-{rep}"
                    objects = store_objects(target)
                    self.write_then_settle(
                        target, "W3", rep, "files/s", lambda: self.creates(folder, target),
                        lambda seconds: self.sizes["W3_files"] / seconds)
                    # The last repetition: the first also makes the new container (its
                    # identity and first records), which is not per file.
                    if objects is not None and rep == self.reps - 1:
                        per_file = (store_objects(target) - objects) / self.sizes["W3_files"]
                        self.extra(self.key("W3", target), f"{target.name}_store_objects_per_file", round(per_file, 3))
                        log(f"  {target.name} W3: {per_file:.3f} new store objects per file")

            if wants("W4"):
                folder = root / "w3-0"
                for rep in range(self.reps):
                    target.remount()
                    drop_caches()
                    cold = timed(["ls", "-l", folder]) * 1000
                    warm = median([timed(["ls", "-l", folder]) * 1000 for _ in range(3)])
                    self.add("W4", target.name, cold)
                    self.add("W4warm", target.name, warm)
                    log(f"  {target.name} W4 ls -l cold {cold:.1f} ms, warm {warm:.1f} ms")

            if wants("W5") or wants("W6"):
                for rep in range(self.reps):
                    path = root / f"w5-{rep}"
                    if target.name == "icloudfs" and target.store == "directory" and wants("W5"):
                        self.native_beside_w5(rep)
                    self.write_then_settle(
                        target, "W5", rep, "MB/s",
                        lambda: timed(["dd", f"if={self.w5_source}", f"of={path}", "bs=1M", "conv=fsync", "status=none"]),
                        lambda seconds: self.w5_source.stat().st_size / 1e6 / seconds)

            if wants("W5") and target.name != "native":
                self.w5_sync_calls(target, root / "w5-syncs")

            if wants("W6"):
                path = root / "w5-0"
                size = path.stat().st_size
                for rep in range(self.reps):
                    target.settle()
                    before = self.sent_counter(target)
                    since = time.time()
                    run(["dd", "if=/dev/urandom", f"of={path}", "bs=4096", "count=1",
                         f"seek={size // 2 // 4096 + rep}", "conv=notrunc", "status=none"])
                    time.sleep(0.2)
                    target.settle()
                    os.sync()
                    sent = self.sent_counter(target) - before if target.name != "native" else 0
                    self.add("W6", target.name, sent)
                    if target.name == "rclone":
                        rewritten = sum(p.stat().st_size for p in target.remote.rglob("*")
                                        if p.is_file() and p.stat().st_ctime >= since)
                        self.extras.setdefault("W6", {}).setdefault("rclone_remote_files_rewritten_bytes", []).append(rewritten)
                    log(f"  {target.name} W6 {sent} bytes sent to the store")

            if wants("W7"):
                w7, w7sync = self.key("W7", target), self.key("W7sync", target)
                for rep in range(self.reps):
                    folder = root / f"w7-{rep}"
                    folder.mkdir()
                    limit = W7_LIMIT_S // (2 if self.quick else 1)
                    with Perf(self.args.perf and rep == 0 and target.name == "icloudfs", target.pid, self.out, w7):
                        start = time.perf_counter()
                        tar = subprocess.Popen(["tar", "xf", str(self.tarball), "-C", str(folder)],
                                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                        try:
                            _, errors = tar.communicate(timeout=limit)
                        except subprocess.TimeoutExpired:
                            tar.kill()
                            tar.communicate()
                            seconds = time.perf_counter() - start
                            done = sum(len(d) + len(f) for _, d, f in os.walk(folder))
                            self.lower_bounds.setdefault(w7, set()).add(target.name)
                            self.extra(w7, f"{target.name}_stopped", {"after_s": seconds, "entries_done": done})
                            self.add(w7, target.name, seconds)
                            self.notes.append(
                                f"{w7} on {target.name}: tar x was stopped after {limit} s with {done} of "
                                f"{self.tar_entries} entries made ({done / seconds:.0f} entries/s); its figure is a lower bound")
                            log(f"  {target.name} {w7} stopped after {seconds:.0f} s: {done} of {self.tar_entries} entries")
                            synced = target.settle()
                            if target.has_store:
                                self.add(w7sync, target.name, synced)
                            break
                        if tar.returncode != 0:
                            raise RuntimeError(f"tar x into {target.name} failed: {errors.decode()[:300]}")
                        seconds = time.perf_counter() - start
                    synced = target.settle()
                    self.add(w7, target.name, seconds)
                    if target.has_store:
                        self.add(w7sync, target.name, synced)
                    log(f"  {target.name} {w7} tar x {seconds:.2f} s, then "
                        + (f"{synced:.2f} s" if synced is not None else "failed")
                        + (" until in the store" if target.has_store else " for sync(2)"))
                    if seconds > LONG_RUN_S and rep + 1 < self.reps:
                        self.notes.append(f"{w7} on {target.name}: one repetition took {seconds:.0f} s, more than "
                                          f"{LONG_RUN_S} s, so it was not repeated")
                        break
        finally:
            target.stop()

    # -------------------------------------------------------------- W13: appends

    def appends(self, path, target):
        """Seconds appender.c takes for the W13 appends to `path` (it checks the file's size),
        and the CPU time the target's daemon spent meanwhile (extra <target>_daemon_cpu_s): next
        to nothing only when no request per write reaches it. FUSE passthrough alone is not
        enough: before each write the kernel asks the daemon for security.capability (GETXATTR,
        seen with passthrough_hp --debug-fuse) unless the daemon took FUSE_HANDLE_KILLPRIV_V2 at
        init (the kernel then sets SB_NOSEC and asks no more)."""
        if self.appender is None:
            self.appender = compile_c("appender.c", self.work / "appender")
        before = cpu_seconds(target.pid)
        seconds = float(run([self.appender, path, self.sizes["W13_appends"]], capture=True).stdout)
        after = cpu_seconds(target.pid)
        if before is not None and after is not None:
            self.extras.setdefault("W13", {}).setdefault(f"{target.name}_daemon_cpu_s", []).append(
                round(after - before, 2))
        return seconds

    def w13(self, target):
        """W13 on one fresh mount: appender.c makes a new file with that many 4-byte appends,
        one write(2) each (a logger's pattern: each write a FUSE request unless the mount
        caches writes), once per repetition, each after the last one's upload."""
        target.start(fresh=True)
        try:
            for rep in range(self.reps):
                path = target.root / f"w13-{rep}.log"
                self.write_then_settle(target, "W13", rep, "s", lambda: self.appends(path, target),
                                       lambda seconds: seconds)
                cpu = self.extras.get("W13", {}).get(f"{target.name}_daemon_cpu_s")
                if cpu:
                    log(f"  {target.name} W13: its daemon used {cpu[-1]:.2f} s of CPU meanwhile")
        finally:
            target.stop()

    # -------------------------------------------------------------- W8..W11: heavy load

    def heavy_load(self, target):
        """W8..W11 on one fresh mount (native: a folder), its daemon's RSS watched throughout.
        Each starts once the previous one's uploads are done, so it measures itself alone."""
        if target.name == "icloudfs":
            target.start(fresh=True, container=HEAVY_CONTAINER)
        else:
            target.start(fresh=True)
        root = target.root / "heavy"
        root.mkdir(exist_ok=True)
        try:
            with heavy.MemoryWatch(target.pid) as memory:
                if self.wants("W8"):
                    w8 = heavy.w8_small_writes(root, target.pid, self.sizes["W8_file_MiB"] * MiB, target.settle)
                    self.add("W8", target.name, w8["median_ms"])
                    self.add("W8p99", target.name, w8["p99_ms"])
                    if w8["daemon_read_MiB_per_fsync"] is not None:
                        self.add("W8read", target.name, w8["daemon_read_MiB_per_fsync"])
                    log(f"  {target.name} W8 write+fsync median {w8['median_ms']:.2f} ms, p99 {w8['p99_ms']:.2f} ms"
                        + (f", daemon read {w8['daemon_read_MiB_per_fsync']:.2f} MiB per fsync"
                           if w8["daemon_read_MiB_per_fsync"] is not None else ""))
                if self.wants("W9"):
                    target.settle()  # on an idle mount: the last workload's uploads are done
                    w9 = heavy.w9_sqlite(root, self.sizes["W9_db_MiB"] * MiB)
                    self.add("W9", target.name, w9["transactions_per_s"])
                    self.extra("W9", f"{target.name}_journal_mode", w9["journal_mode"])
                    log(f"  {target.name} W9 SQLite {w9['transactions_per_s']:.0f} transactions/s ({w9['journal_mode']})")
                if self.wants("W10"):
                    target.settle()  # on an idle mount: the last workload's uploads are done
                    w10 = heavy.w10_stat_while_writing(root, self.sizes["W10_file_MiB"] * MiB)
                    self.add("W10", target.name, w10["p99_ms"])
                    self.extra("W10", f"{target.name}_max_ms", w10["max_ms"])
                    log(f"  {target.name} W10 stat p99 {w10['p99_ms']:.2f} ms (max {w10['max_ms']:.1f}, {w10['stats']} stats)")
                if self.wants("W11"):
                    target.settle()  # on an idle mount: the last workload's uploads are done
                    w11 = heavy.w11_random_operations(root, operations=self.sizes["W11_operations"], limit=W7_LIMIT_S)
                    self.add("W11", target.name, w11["seconds"])
                    self.extra("W11", f"{target.name}_finished", f"{w11['finished']} of {w11['processes']}")
                    if w11["finished"] < w11["processes"]:
                        self.lower_bounds.setdefault("W11", set()).add(target.name)
                        self.notes.append(f"W11 on {target.name}: {w11['finished']} of {w11['processes']} processes "
                                          f"finished within {W7_LIMIT_S} s; failures: {w11['failures']}")
                    log(f"  {target.name} W11 {w11['seconds']:.1f} s, {w11['finished']} of {w11['processes']} finished")
            if target.pid is not None:
                self.add("heavymemory", target.name, memory.peak)
                log(f"  {target.name} daemon RSS at most {memory.peak:.0f} MiB during W8..W11")
        finally:
            target.stop()
            shutil.rmtree(root, ignore_errors=True)

    # -------------------------------------------------------------- memory, mount time

    def cached_store(self, items, big_folder=0):
        # Named by snapshot format: a container kept from before a format change would time
        # the old format's decode.
        big = f"-big{big_folder}" if big_folder else ""
        return self.cache / f"store-{items}{big}-snapshot-v{SNAPSHOT_FORMAT}-gen{GENERATOR}"

    def cached_container(self, container, items, big_folder=0):
        """A directory store holding `container` of `items` items made by `icloudfs-bench
        make-container` (with a folder of `big_folder` files), kept in DIR/cache for later runs."""
        store = self.cached_store(items, big_folder)
        done = store / ".complete"
        if not done.exists():
            log(f"making a {items}-item container in {store} (kept for later runs)")
            shutil.rmtree(store, ignore_errors=True)
            store.mkdir(parents=True)
            extra = ["--big-folder", big_folder] if big_folder else []
            start = time.perf_counter()
            info = run([self.bin / "icloudfs-bench", "make-container", store, container, items, *extra],
                       capture=True).stdout
            log(f"  made in {time.perf_counter() - start:.0f} s")
            (store / ".info.json").write_text(info)
            done.touch()
        return store, json.loads((store / ".info.json").read_text())

    def big_containers(self):
        items = self.sizes["memory_items"]
        store, info = self.cached_container(BIG_CONTAINER, items)
        # The same shape as plain files for rclone: folders of 1,000 files of 4 KiB.
        remote = self.cache / f"rclone-remote-{items}"
        rdone = self.cache / f"rclone-remote-{items}.complete"
        if not rdone.exists():
            log(f"making a {items}-item folder tree in {remote} for rclone (kept for later runs)")
            shutil.rmtree(remote, ignore_errors=True)
            block = os.urandom(4096)
            made, folder_index, file_index = 0, 0, 0
            while made < items:
                folder = remote / f"dir-{folder_index}"
                folder.mkdir(parents=True)
                made += 1
                for _ in range(1000):
                    if made >= items:
                        break
                    (folder / f"file-{file_index}.txt").write_bytes(file_index.to_bytes(8, "little") + block[8:])
                    file_index += 1
                    made += 1
                folder_index += 1
            rdone.touch()
        return store, info, remote

    def walk(self, root):
        start = time.perf_counter()
        count = 0
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                os.lstat(os.path.join(folder, name))
                count += 1
        return count, time.perf_counter() - start

    def memory_and_mount(self, icloudfs, rclone):
        store, info, remote = self.big_containers()
        probe = info["probe"]
        for target in (t for t in (icloudfs, rclone) if t.name in self.chosen):
            for rep in range(self.reps):
                drop_caches()
                start = time.perf_counter()
                if target.name == "icloudfs":
                    target.start(fresh=True, store=store, container=BIG_CONTAINER)
                else:
                    target.start(fresh=True, remote=remote)
                returned = time.perf_counter() - start
                try:
                    wait_for(lambda: os.path.exists(target.root / probe), 300, f"{probe} on the {target.name} mount")
                    usable = time.perf_counter() - start
                    rss_mounted = status_kib(target.pid, "VmRSS")
                    self.add("mount", target.name, usable)
                    self.extras.setdefault("mount", {}).setdefault(f"{target.name}_command_returned_s", []).append(returned)
                    if rep == 0:
                        count, seconds = self.walk(target.root)
                        rss_walked = status_kib(target.pid, "VmRSS")
                        peak = status_kib(target.pid, "VmHWM")
                        self.add("memory", target.name, rss_walked / 1024)
                        self.extra("memory", f"{target.name}_rss_after_mount_MiB", rss_mounted / 1024)
                        self.extra("memory", f"{target.name}_rss_after_walk_MiB", rss_walked / 1024)
                        self.extra("memory", f"{target.name}_peak_rss_MiB", peak / 1024)
                        self.extra("memory", f"{target.name}_walk", {"items": count, "seconds": seconds})
                        log(f"  {target.name} memory: RSS {rss_mounted / 1024:.0f} MiB mounted, "
                            f"{rss_walked / 1024:.0f} MiB after stat of {count} items in {seconds:.1f} s (peak {peak / 1024:.0f})")
                    log(f"  {target.name} mount usable after {usable:.2f} s (command returned after {returned:.2f} s)")
                finally:
                    target.stop()

    def compacted_container(self, icloudfs):
        """A container whose journal holds one entry per item (100,000), collected by
        icloudfs gc (the journal compacted behind a snapshot): how long the collection
        takes, and how soon a new device's mount is usable after it."""
        entries = self.sizes["memory_items"]
        store = self.work / f"store-{entries}-entries"
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True)
        log(f"making a container of {entries} journal entries")
        info = json.loads(run([self.bin / "icloudfs-bench", "make-container", store, BIG_CONTAINER, entries,
                               "--per-entry", 1], capture=True).stdout)
        # A grace of 1 s: the entries just written may be compacted at once.
        icloudfs.start(fresh=True, store=store, container=BIG_CONTAINER)
        run([icloudfs.icloudfs, "policy", icloudfs.root, "--grace", "1s"], capture=True)
        icloudfs.stop()
        time.sleep(1.5)
        seconds = timed([icloudfs.icloudfs, "gc", "--store", store, BIG_CONTAINER])
        self.add("gc", icloudfs.name, seconds)
        left = len(list((store / BIG_CONTAINER / "journal").iterdir()))
        self.extra("gc", "journal_entries_before", info["journal_entries"] + 1)
        self.extra("gc", "journal_entries_after", left)
        log(f"  icloudfs gc of {info['journal_entries'] + 1} entries: {seconds:.1f} s, {left} left")
        for _ in range(self.reps):
            drop_caches()
            start = time.perf_counter()
            icloudfs.start(fresh=True, store=store, container=BIG_CONTAINER)
            try:
                wait_for(lambda: os.path.exists(icloudfs.root / info["probe"]), 300, "the probe on the new device")
                usable = time.perf_counter() - start
                self.add("gcmount", icloudfs.name, usable)
                log(f"  a new device of the collected container usable after {usable:.2f} s")
            finally:
                icloudfs.stop()
        shutil.rmtree(store, ignore_errors=True)

    def native_big_folder(self):
        """The native twin of the million-item container's big folder: as many files of 4 KiB
        in a folder of the local disk (kept in DIR/cache)."""
        folder = self.cache / f"native-folder-{MILLION_BIG_FOLDER}"
        done = self.cache / f"native-folder-{MILLION_BIG_FOLDER}.complete"
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            block = os.urandom(4096)
            for index in range(MILLION_BIG_FOLDER):
                (folder / f"big-{index}.txt").write_bytes(index.to_bytes(8, "little") + block[8:])
            done.touch()
        return folder

    def ls_cold_warm(self, folder, target_name, before_cold):
        """ls@1M and lswarm@1M of `folder`: `before_cold()` (a remount), dropped page cache,
        one ls -l; then the median of three more."""
        before_cold()
        drop_caches()
        cold = timed(["ls", "-l", folder]) * 1000
        warm = median([timed(["ls", "-l", folder]) * 1000 for _ in range(3)])
        self.add("ls@1M", target_name, cold)
        self.add("lswarm@1M", target_name, warm)
        log(f"  {target_name} ls -l of {MILLION_BIG_FOLDER} entries: cold {cold:.1f} ms, warm {warm:.1f} ms")

    def million(self, icloudfs, native):
        """mount@1M, memory@1M and ls@1M: a new device of a 1,000,000-item container (from its
        snapshot, fresh cache) until usable; the daemon's RSS after `find` of the whole tree;
        ls -l of its 10,000-entry folder after a remount (cold) and again (warm), beside the
        same folder of files on the local disk. rclone is left out (it would need a million
        files on the local disk, or in the bucket, for its remote)."""
        store, info = self.cached_container(MILLION_CONTAINER, MILLION_ITEMS, MILLION_BIG_FOLDER)
        self.extra("mount@1M", "container", {k: info.get(k) for k in
                                             ("items", "journal_entries", "snapshot_seq", "seconds", "max_rss_MiB")})
        big = info["big_folder"]["path"]
        if "icloudfs" in self.chosen:
            for rep in range(self.reps):
                drop_caches()
                start = time.perf_counter()
                icloudfs.start(fresh=True, store=store, container=MILLION_CONTAINER)
                returned = time.perf_counter() - start
                try:
                    wait_for(lambda: os.path.exists(icloudfs.root / info["probe"]), 600, "the probe on the 1M mount")
                    usable = time.perf_counter() - start
                    rss_mounted = status_kib(icloudfs.pid, "VmRSS")
                    self.add("mount@1M", icloudfs.name, usable)
                    self.extras.setdefault("mount@1M", {}).setdefault("icloudfs_command_returned_s", []).append(returned)
                    log(f"  icloudfs 1M mount usable after {usable:.2f} s (command returned after {returned:.2f} s), "
                        f"RSS {rss_mounted / 1024:.0f} MiB")
                    if rep == 0 and self.wants("memory@1M"):
                        start = time.perf_counter()
                        # -printf %s: a stat of every item, whatever readdir tells the kernel
                        found = run(["find", icloudfs.root, "-printf", "%s\n"], capture=True, timeout=3600).stdout
                        seconds = time.perf_counter() - start
                        count = found.count("\n") - 1  # less the root
                        rss = status_kib(icloudfs.pid, "VmRSS")
                        peak = status_kib(icloudfs.pid, "VmHWM")
                        self.add("memory@1M", icloudfs.name, rss / 1024)
                        self.extra("memory@1M", "icloudfs_rss_after_mount_MiB", rss_mounted / 1024)
                        self.extra("memory@1M", "icloudfs_peak_rss_MiB", peak / 1024)
                        self.extra("memory@1M", "icloudfs_find", {"items": count, "seconds": seconds})
                        log(f"  icloudfs 1M memory: RSS {rss / 1024:.0f} MiB after find of {count} items "
                            f"in {seconds:.1f} s (peak {peak / 1024:.0f})")
                    if self.wants("ls@1M"):
                        self.ls_cold_warm(icloudfs.root / big, icloudfs.name, icloudfs.remount)
                finally:
                    icloudfs.stop()
        if "native" in self.chosen and self.wants("ls@1M"):
            folder = self.native_big_folder()
            for _ in range(self.reps):
                self.ls_cold_warm(folder, native.name, lambda: None)

    def fuse_floor(self):
        """W3, W7 and W13 on the null FUSE daemon (a fresh one each time: it never frees
        memory), and on the same null filesystem served by icloudfs's kernel layer."""
        for floor in (FuseFloor(self.work), KernelLayerFloor(self.work, self.bin)):
            self.targets.append(floor)
            for rep in range(self.reps):
                if self.wants("W3"):
                    floor.start()
                    seconds = self.creates(floor.root / "w3", floor)
                    floor.stop()
                    self.add("W3", floor.name, self.sizes["W3_files"] / seconds)
                if self.wants("W7"):
                    floor.start()
                    self.add("W7", floor.name, timed(["tar", "xf", self.tarball, "-C", floor.root]))
                    floor.stop()
                if self.wants("W13"):
                    floor.start()
                    self.add("W13", floor.name, self.appends(floor.root / "w13.log", floor))
                    floor.stop()
            log(f"  {floor.name}: " + ", ".join(f"{key} {median(self.samples[key][floor.name]):.1f}"
                                              for key in ("W3", "W7", "W13") if floor.name in self.samples.get(key, {})))
        if self.wants("W3"):
            for shape in KEEPING_SHAPES:
                floor = KernelLayerKeeping(self.work, self.bin, shape)
                self.targets.append(floor)
                for rep in range(self.reps):
                    floor.start()
                    seconds = self.creates(floor.root / "w3", floor)
                    floor.stop()
                    self.add("W3", floor.name, self.sizes["W3_files"] / seconds)
                log(f"  {floor.name}: W3 {median(self.samples['W3'][floor.name]):.1f}")

    # -------------------------------------------------------------- driver

    def load(self, label):
        self.loads[label] = Path("/proc/loadavg").read_text().split()[:3]

    def choose_stores(self):
        """--stores as given, else both when an S3 server answers or can be started. The S3
        server is only looked at when an S3 row is to run."""
        asked = self.stores
        self.stores = set(asked or STORES)
        if "s3" not in self.stores:
            return
        if not any(self.wants(f"{base}@s3") for base in S3_WORKLOADS) or not {"rclone", "icloudfs"} & self.chosen:
            self.stores.discard("s3")
            return
        self.s3 = S3Server(self.args.repo)
        why = self.s3.ensure()
        if why is not None:
            self.stores.discard("s3")
            self.notes.append(f"no S3 rows: {why}")
            log(f"no S3 rows: {why}")
            self.s3 = None
            return
        log(f"S3 rows on {self.s3.endpoint}, bucket {self.s3.bucket}, prefixes {self.run_id}-*"
            + (" (a server started for this run)" if self.s3.started else ""))

    def tolerate_yardstick(self, target, workloads):
        """Runs `workloads` on `target`. A yardstick's own failure (passthrough_hp) leaves its
        rows out with a note instead of stopping the run; any other target's stops it."""
        if not isinstance(target, PassthroughHP):
            return workloads()
        try:
            workloads()
        except Exception as error:
            self.notes.append(f"passthrough_hp failed, its rows are left out: {str(error)[:200]}")
            log(f"  passthrough_hp failed, its rows are left out: {error}")
            target.stop()
            target.start()

    def run(self):
        if has_no_journal(self.out):
            self.work_filesystem = WorkFilesystem(self.out, self.work)
            made = self.work_filesystem.mount()
            self.notes.append(f"DIR/work is a {made} (a file on the disk): the disk's own ext4 has no journal, "
                              "where creating files soon after others were deleted costs 2-3 times more")
            log(f"work folder: {made}")
        self.work.mkdir(parents=True, exist_ok=True)
        if self.quick:
            self.notes.append("--quick: 1 repetition and smaller sizes (see \"sizes\"); not comparable with a full run")
        self.choose_stores()
        self.load("start")
        log("preparing inputs")
        self.prepare_inputs()
        if self.wants("micro"):
            log("micro-benchmarks")
            micro = run([self.bin / "icloudfs-bench", "micro"] + (["--quick"] if self.quick else []), capture=True).stdout
            self.micro = json.loads(micro)
            log(f"  chunker {self.micro['chunker_GBps']:.2f} GB/s, SHA-256 {self.micro['sha256_GBps']:.2f} GB/s, "
                f"fold {self.micro['fold_items_per_s']:.0f} items/s, snapshot decode {self.micro['snapshot_decode_items_per_s']:.0f} items/s")
        native, rclone, icloudfs = Native(self.work), Rclone(self.work), ICloudFS(self.work, self.bin)
        self.targets = [t for t in (native, rclone, icloudfs) if t.name in self.chosen]
        if "passthrough_hp" in self.chosen and any(self.wants(k) for k in PassthroughHP.workloads):
            self.add_passthrough_hp()
        if self.s3 is not None:
            # A prefix of its own for each target, new for each run.
            self.targets += [t for t in (Rclone(self.work, self.s3, f"{self.run_id}-rclone"),
                                         ICloudFS(self.work, self.bin, self.s3, f"{self.run_id}-icloudfs"))
                             if t.name in self.chosen]
        for target in self.targets:
            where = f"{target.name}" + ("" if target.store == "directory" else f" ({target.store} store)")
            if any(self.wants_on(k, target) for k in ("W1", "W2", "W12")):
                log(f"W1/W2/W12 on {where}")
                self.tolerate_yardstick(target, lambda: self.w1_w2(target))
                self.load(f"after W1/W2/W12 {where}")
                self.clear_store(target)
            if any(self.wants_on(k, target) for k in ("W3", "W4", "W5", "W6", "W7")):
                log(f"W3..W7 on {where}")
                self.tolerate_yardstick(target, lambda: self.w3_to_w7(target))
                self.load(f"after W3..W7 {where}")
                self.clear_store(target)
            if self.wants_on("W13", target):
                log(f"W13 on {where}")
                self.tolerate_yardstick(target, lambda: self.w13(target))
                self.load(f"after W13 {where}")
                self.clear_store(target)
            if isinstance(target, PassthroughHP) and target.passthrough_failures():
                self.notes.append(f"passthrough_hp logged failed passthrough opens (so some of its figures are "
                                  f"without passthrough): {target.passthrough_failures()[0][:200]}")
            write_outputs(self, interrupted=True, partial=True)
        for target in (t for t in self.targets if t.name in ("native", "icloudfs") and t.store == "directory"):
            if any(self.wants(k) for k in ("W8", "W9", "W10", "W11")):
                log(f"W8..W11 on {target.name}")
                self.heavy_load(target)
                self.load(f"after W8..W11 {target.name}")
                write_outputs(self, interrupted=True, partial=True)
        if "floor" in self.chosen and any(self.wants(k) for k in ("W3", "W7", "W13")):
            log("W3, W7 and W13 on a null FUSE daemon (the FUSE floor)")
            self.fuse_floor()
            self.load("after the FUSE floor")
        if self.wants("memory") or self.wants("mount"):
            log("memory and mount time with a 100,000-item container")
            self.memory_and_mount(icloudfs, rclone)
            self.load("after memory/mount")
        if "icloudfs" in self.chosen and (self.wants("gc") or self.wants("gcmount")):
            log("icloudfs gc of a 100,000-entry journal, and a new device after it")
            self.compacted_container(icloudfs)
            self.load("after gc")
        if any(self.wants(k) for k in ("mount@1M", "memory@1M", "ls@1M")) and {"icloudfs", "native"} & self.chosen:
            log("mount, memory and ls -l with a 1,000,000-item container")
            self.million(icloudfs, native)
            self.load("after the million-item rows")

    def add_passthrough_hp(self):
        """passthrough_hp beside native (after it in the order of the runs), or a note saying why
        it is left out: a missing binary is a skipped yardstick, never a failure."""
        binary, why = find_passthrough_hp(self.cache)
        if binary is not None:
            target = PassthroughHP(self.work, binary)
            self.passthrough_hp = {"binary": str(binary), "libfuse": target.version, "passthrough": target.passthrough,
                                   "options": ["--foreground"]}
            if not target.passthrough:
                self.notes.append(f"passthrough_hp at {binary} predates FUSE passthrough (libfuse < 3.17): "
                                  "every read and write of it goes through the daemon")
            self.targets.insert(1 if self.targets and self.targets[0].name == "native" else 0, target)
            log(f"passthrough_hp: {binary} (libfuse {target.version or '?'}"
                + (", FUSE passthrough)" if target.passthrough else ", no FUSE passthrough)"))
        else:
            self.notes.append(f"no passthrough_hp figures: {why}")
            log(f"no passthrough_hp figures: {why}")

    @staticmethod
    def clear_store(target):
        """Deletes what the target put in an S3 store (the test server keeps it in memory)."""
        if target.store != "directory":
            target.clear_store()

    def cleanup(self):
        for target in self.targets:
            try:
                target.stop()
                self.clear_store(target)
            except Exception as error:  # keep going: the rest must be unmounted too
                log(f"could not stop {target.name}: {error}")
        if self.s3 is not None:
            self.s3.stop()
        if getattr(self, "w5_source", None):
            self.w5_source.unlink(missing_ok=True)
        if self.work_filesystem is not None:
            self.work_filesystem.unmount(keep=self.args.keep)
        elif not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


# ---------------------------------------------------------------------------- reporting

def store_of(key):
    """The store a row's figures come from: W3@s3 on S3, every other row on a directory store."""
    return "s3" if key.endswith("@s3") else "directory"


def ahead_of_rclone(higher):
    return (lambda i, r: i > r) if higher else (lambda i, r: i < r)


# key: (row label, unit, higher is better, goal text, goal check(icloudfs, *versus)[, versus])
# `versus` names what the check compares icloudfs's figure with, in order: "native", "rclone" or
# "floor" (their figures in the same row), "native_beside" (native measured right before each of
# icloudfs's repetitions) or another row's key (icloudfs's figure there); ("native",)
# when left out. Rows in ABSOLUTE_GOALS are checked without them.
ROWS = [
    ("W1", "W1 cold sequential read, file only in the store", "MB/s", True, "≥ 50% of native",
     lambda i, n: i >= 0.5 * n),
    ("W2", "W2 warm re-read of the same file", "MB/s", True, "≥ 95% of native", lambda i, n: i >= 0.95 * n),
    # With FUSE passthrough the kernel reads icloudfs's complete local copy itself: the disk's speed.
    ("W12", "W12 re-read of the file once its local copy is complete, page cache dropped", "MB/s", True,
     "≥ 90% of native (beside)", lambda i, n: i >= 0.9 * n, ("native_beside",)),
    ("W3", "W3 one process creates 2,000 × 4 KiB files", "files/s", True, "≥ 80% of the FUSE floor",
     lambda i, f: i >= 0.8 * f, ("floor",)),
    ("W3sync", "W3 then until all are in the store (sync --wait)", "s", False, "≤ 1 s", lambda i, n: i <= 1),
    # The daemon's share of W3's CPU: the null daemon and passthrough_hp show what FUSE's round
    # trips and a local create cost here.
    ("W3cpu", "W3 daemon CPU per file during the creates (/proc/PID/stat)", "ms", False, "≤ 0.15 ms",
     lambda i, n: i <= 0.15),
    ("W4", "W4 ls -l of the 2,000 after remount (cold)", "ms", False, "≤ 2× native", lambda i, n: i <= 2 * n),
    ("W4warm", "W4 ls -l of the 2,000, warm", "ms", False, "≤ 2× native", lambda i, n: i <= 2 * n),
    ("W5", "W5 dd bs=1M conv=fsync (random data)", "MB/s", True, "≥ 70% of native (beside)",
     lambda i, n: i >= 0.7 * n, ("native_beside",)),
    ("W5sync", "W5 then until it is in the store", "s", False, "(reported)", None),
    ("W6", "W6 overwrite 4 KiB mid-file of an uploaded file: bytes sent to the store", "bytes", False,
     "≤ 2 MB", lambda i, n: i <= 2_000_000),
    ("W7", "W7 tar x of a ~30k-file tree", "s", False, "≤ 1.25× the FUSE floor", lambda i, f: i <= 1.25 * f,
     ("floor",)),
    ("W7sync", "W7 then until it is in the store", "s", False, "(reported)", None),
    # A logger's pattern: each write(2) a FUSE request unless the mount caches writes.
    ("W13", "W13 appends of 4 bytes to one file, one write(2) each (3,000,000; --quick: 300,000)", "s", False,
     "≤ 2× native", lambda i, n: i <= 2 * n),
    ("W13sync", "W13 then until it is in the store", "s", False, "(reported)", None),
    ("W8", "W8 4 KiB write at a random offset + fsync, 1 GiB file: median", "ms", False, "≤ 5× native",
     lambda i, n: i <= 5 * n),
    ("W8p99", "W8 the same, p99", "ms", False, "(reported)", None),
    ("W8read", "W8 bytes the daemon read per fsync", "MiB", False, "≤ 16 MiB", lambda i, n: i <= 16),
    ("W9", "W9 SQLite (WAL) small transactions into a 256 MiB database", "tx/s", True, "≥ 30% of native",
     lambda i, n: i >= 0.3 * n),
    ("W10", "W10 stat p99 of an unrelated file while a 2 GiB file is written", "ms", False, "≤ 50 ms",
     lambda i, n: i <= 50),
    ("W11", "W11 4 processes × 1,000 random operations", "s", False, "≤ 10× native", lambda i, n: i <= 10 * n),
    ("heavymemory", "daemon RSS at most, during W8..W11", "MiB", False, "≤ 150 MiB", lambda i, n: i <= 150),
    ("memory", "memory: daemon RSS with a 100,000-item container (after stat of every item)", "MiB", False,
     "≤ 100 MiB", lambda i, n: i <= 100),
    ("mount", "mount time with a 100,000-item container (from a snapshot, fresh cache)", "s", False,
     "≤ 1 s", lambda i, n: i <= 1),
    ("gc", "icloudfs gc of a 100,000-entry journal (compacted behind a snapshot)", "s", False, "(reported)", None),
    ("gcmount", "a new device of that container after gc: mount usable", "s", False, "≤ 2 s", lambda i, n: i <= 2),
    # S3 (issue 24): the same workloads, icloudfs with an s3:// store against rclone with an S3 remote.
    ("W1@s3", "W1 cold sequential read, file only in the store", "MB/s", True, "> rclone",
     ahead_of_rclone(True), ("rclone",)),
    ("W2@s3", "W2 warm re-read of the same file", "MB/s", True, "> rclone", ahead_of_rclone(True), ("rclone",)),
    ("W3@s3", "W3 one process creates 2,000 × 4 KiB files", "files/s", True, "> rclone",
     ahead_of_rclone(True), ("rclone",)),
    ("W3sync@s3", "W3 then until all are in the store", "s", False, "< rclone", ahead_of_rclone(False), ("rclone",)),
    ("W5@s3", "W5 dd bs=1M conv=fsync (random data)", "MB/s", True, "> rclone", ahead_of_rclone(True), ("rclone",)),
    ("W5sync@s3", "W5 then until it is in the store", "s", False, "< rclone", ahead_of_rclone(False), ("rclone",)),
    ("W7@s3", "W7 tar x of a ~30k-file tree", "s", False, "< rclone", ahead_of_rclone(False), ("rclone",)),
    ("W7sync@s3", "W7 then until it is in the store", "s", False, "< rclone and ≤ 3× W7sync (directory)",
     lambda i, r, d: i < r and i <= 3 * d, ("rclone", "W7sync")),
    # A million items (issue 24), in a directory store.
    ("mount@1M", "mount time with a 1,000,000-item container (from a snapshot, fresh cache)", "s", False, "≤ 3 s",
     lambda i, n: i <= 3),
    ("memory@1M", "daemon RSS with a 1,000,000-item container, after find of the whole tree", "MiB", False,
     "≤ 300 MiB", lambda i, n: i <= 300),
    ("ls@1M", "ls -l of its 10,000-entry folder after remount (cold)", "ms", False, "≤ 2× native",
     lambda i, n: i <= 2 * n),
    ("lswarm@1M", "ls -l of its 10,000-entry folder, warm", "ms", False, "≤ 2× native", lambda i, n: i <= 2 * n),
]
ABSOLUTE_GOALS = ("W3sync", "W3cpu", "W6", "W8read", "W10", "heavymemory", "memory", "mount", "gcmount",
                  "mount@1M", "memory@1M")
TARGETS = ("native", "rclone", "icloudfs", "passthrough_hp")
# The table's figure columns: the yardstick beside native, then the two filesystems compared.
COLUMNS = ("native", "passthrough_hp", "rclone", "icloudfs")


def machine_description(work):
    def first(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
        except Exception:
            return ""
    cpu = first("lscpu | sed -n 's/^Model name: *//p' | head -n1") or platform.processor()
    mem = first("free -b | awk '/^Mem:/ {print $2}'")
    fs = first(f"df -T '{work}' | awk 'NR==2 {{print $1\" \"$2}}'")
    disk = " ".join(first(f"lsblk -ndo NAME,SIZE,ROTA $(df --output=source '{work}' | tail -n1) 2>/dev/null").split())
    if disk.endswith(" 1") or disk.endswith(" 0"):
        disk = disk[:-2] + (" (rotational, as the kernel reports it)" if disk.endswith("1") else " (non-rotational)")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_GiB": round(int(mem) / (1 << 30), 1) if mem.isdigit() else None,
        "filesystem": fs,
        "disk": disk,
        "kernel": platform.release(),
        "os": first(". /etc/os-release && echo \"$PRETTY_NAME\""),
        "swift": first("swift --version 2>&1 | head -n1"),
        "rclone": first("rclone version 2>/dev/null | head -n1"),
        "fuse": first("fusermount3 -V"),
    }


def write_outputs(bench, interrupted=False, partial=False):
    out = bench.out
    workloads = {}
    for key, label, unit, higher, goal, check, *rest in ROWS:
        figures = {t: median(bench.samples.get(key, {}).get(t, [])) for t in TARGETS}
        if key == "W6" and figures["native"] is None and "W6" in bench.samples:
            figures["native"] = 0
        holds = None
        i = figures["icloudfs"]
        versus = [figures[v] if v in TARGETS
                  else median(bench.samples.get(key, {}).get(v, [])) if v in ("floor", "native_beside")
                  else median(bench.samples.get(v, {}).get("icloudfs", []))
                  for v in (rest[0] if rest else ("native",))]
        if check is not None and i is not None and (None not in versus or key in ABSOLUTE_GOALS):
            holds = bool(check(i, *versus))
        entry = {"unit": unit, "label": label, "store": store_of(key), **figures, "goal": goal, "holds": holds,
                 "samples": bench.samples.get(key, {})}
        if key in bench.lower_bounds:
            entry["lower_bound"] = sorted(bench.lower_bounds[key])
        floor = median(bench.samples.get(key, {}).get("floor", []))
        if floor is not None:
            entry["fuse_floor"] = floor
        kernel_layer = median(bench.samples.get(key, {}).get("kernel_layer", []))
        if kernel_layer is not None:
            entry["kernel_layer"] = kernel_layer
        for shape in KEEPING_SHAPES:
            name = f"kernel_layer_{shape.replace('-', '_')}"
            kept = median(bench.samples.get(key, {}).get(name, []))
            if kept is not None:
                entry[name] = kept
        beside = median(bench.samples.get(key, {}).get("native_beside", []))
        if beside is not None:
            entry["native_beside"] = beside
        if key in bench.extras:
            entry["extra"] = bench.extras[key]
        workloads[key] = entry
    result = {
        "date": bench.started.strftime("%Y-%m-%d %H:%M UTC"),
        "icloudfs_commit": bench.commit,
        "quick": bench.quick,
        "interrupted": interrupted,
        "repetitions": bench.reps,
        "sizes": bench.sizes,
        "machine": machine_description(bench.out),
        "load_average": bench.loads,
        "stores": sorted(bench.stores or ()),
        "s3": ({"endpoint": bench.s3.endpoint, "bucket": bench.s3.bucket,
                "prefixes": [f"{bench.run_id}-rclone", f"{bench.run_id}-icloudfs"],
                "server_started_by_the_bench": bench.s3.started or None} if bench.s3 else None),
        "notes": bench.notes,
        "passthrough_hp": bench.passthrough_hp,
        "workloads": workloads,
        "micro": getattr(bench, "micro", None),
    }
    (out / "bench.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    (out / "bench.md").write_text(markdown(result))
    try:
        chart(result, out / "bench.png")
    except Exception as error:
        log(f"no chart: {error}")
    if not partial:
        log(f"wrote {out / 'bench.json'}, {out / 'bench.md'}, {out / 'bench.png'}")


def fmt(value, unit):
    if value is None:
        return "–"
    if unit == "bytes":
        return f"{value / 1e6:,.2f} MB" if value >= 10_000 else f"{value:,.0f} B"
    if unit in ("ms", "s") and value < 10:
        return f"{value:.2f}"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}"


def markdown(result):
    m = result["machine"]
    lines = [
        f"# icloudfs benchmark, {result['date']}" + (" (quick)" if result["quick"] else ""),
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_GiB']} GiB RAM; disk {m['disk'] or '?'} "
        f"({m['filesystem']}); kernel {m['kernel']}; {m['os']}; {m['swift']}; {m['rclone']}; {m['fuse']}.",
        f"icloudfs commit {result['icloudfs_commit']}; median of {result['repetitions']} "
        f"repetition{'s' if result['repetitions'] != 1 else ''}; load average "
        + ", ".join(f"{k}: {' '.join(v)}" for k, v in result["load_average"].items()) + ".",
        "",
    ]
    for note in result["notes"]:
        lines.append(f"**Note:** {note}")
        lines.append("")
    if result["interrupted"]:
        lines += ["**Not finished (still running, interrupted or stopped): the figures below are partial.**", ""]
    # passthrough_hp's column only when it ran (it is skipped where no binary is found).
    columns = [t for t in COLUMNS
               if t != "passthrough_hp" or any(w.get(t) is not None for w in result["workloads"].values())]
    lines += [
        "| workload | store | unit | " + " | ".join(columns) + " | icloudfs goal | holds |",
        "|---|---|---|" + "---|" * len(columns) + "---|---|",
    ]
    for key, w in result["workloads"].items():
        if not any(w.get(t) is not None for t in TARGETS):
            continue
        holds = {True: "yes", False: "**no**", None: "–"}[w["holds"]]
        cells = [("> " if t in w.get("lower_bound", []) else "") + fmt(w.get(t), w["unit"]) for t in columns]
        label = w["label"] if "@" not in key else f"{w['label']} ({key})"
        lines.append(f"| {label} | {w['store']} | {w['unit']} | {' | '.join(cells)} | {w['goal']} | {holds} |")
    lines.append("")
    floors = [(w["label"].split(" ")[0], fmt(w["fuse_floor"], w["unit"]), w["unit"])
              for w in result["workloads"].values() if "fuse_floor" in w]
    if floors:
        lines += [
            "FUSE floor (a null FUSE daemon, `Scripts/bench-lib/nullfs.c`: names in memory, written "
            "bytes dropped; no FUSE filesystem is faster here): "
            + ", ".join(f"{key} {value} {unit}" for key, value, unit in floors) + ".",
            "",
        ]
    layers = [(w["label"].split(" ")[0], fmt(w["kernel_layer"], w["unit"]), w["unit"])
              for w in result["workloads"].values() if "kernel_layer" in w]
    if layers:
        lines += [
            "The same null filesystem on icloudfs's own kernel layer (`icloudfs-bench null-mount`): "
            + ", ".join(f"{key} {value} {unit}" for key, value, unit in layers)
            + ". The rest of icloudfs's time is the replica's.",
            "",
        ]
    w3 = result["workloads"].get("W3", {})
    if all(f"kernel_layer_{shape.replace('-', '_')}" in w3 for shape in KEEPING_SHAPES):
        def kept(shape):
            return f"{fmt(w3[f'kernel_layer_{shape}'], w3['unit'])} {w3['unit']}"
        lines += [
            f"Keeping the bytes, on the same null filesystem: W3 {kept('log')} with every write appended to "
            f"one log file, {kept('file_per_item')} with an ext4 file made per created file, "
            f"{kept('passthrough_file_per_item')} with that file written by the kernel (FUSE passthrough): what "
            "a design keeping new files' bytes in that shape pays at least, with no other work per file.",
            "",
        ]
    besides = [(key, fmt(w["native_beside"], w["unit"]), w["unit"])
               for key, w in result["workloads"].items() if "native_beside" in w]
    if besides:
        lines += [
            "Native beside icloudfs (the same command on the disk itself right before each of "
            "icloudfs's repetitions, what the goal compares with, since this disk's speed drifts within a run): "
            + ", ".join(f"{key} {value} {unit}" for key, value, unit in besides) + ".",
            "",
        ]
    w3_extra = result["workloads"].get("W3", {}).get("extra", {})
    objects = [(t, w3_extra[f"{t}_store_objects_per_file"]) for t in TARGETS if f"{t}_store_objects_per_file" in w3_extra]
    if objects:
        lines += [
            "New store objects per file in W3 (the directory store or remote, files counted before and after "
            "the last repetition and its upload): " + ", ".join(f"{t} {n:.3f}" for t, n in objects) + ".",
            "",
        ]
    hp = result.get("passthrough_hp")
    if hp:
        lines += [
            f"passthrough_hp: libfuse {hp['libfuse'] or '?'}'s example/passthrough_hp (`{' '.join(hp['options'])}`: "
            "defaults otherwise, so " + ("FUSE passthrough on" if hp["passthrough"] else "no FUSE passthrough, "
                                        "which this build predates")
            + ", attributes and names cached, splice on) mirroring a folder of the local disk; a yardstick for "
            "a FUSE daemon over local files (W1, W2, W12, W3, W7, W13 only).",
            "",
        ]
    micro = result.get("micro")
    if micro:
        lines += [
            "Micro-benchmarks (`icloudfs-bench micro`, one core): "
            f"chunker {micro['chunker_GBps']:.2f} GB/s, SHA-256 {micro['sha256_GBps']:.2f} GB/s, "
            f"journal fold {micro['fold_items_per_s']:,.0f} items/s, "
            f"snapshot decode {micro['snapshot_decode_items_per_s']:,.0f} items/s.",
            "",
        ]
    s = result["sizes"]
    lines += [
        f"Sizes: W1/W2 file {s['W1_file_MiB']} MiB, W3 {s['W3_files']} files, W5 {s['W5_MiB']} MiB, "
        f"W6 file {s['W6_file_MiB']} MiB, W7 tree {s['W7_tree']} "
        f"({result['workloads']['W7'].get('extra', {}).get('entries', '?')} entries), "
        f"memory/mount {s['memory_items']:,} items; W8 file {s['W8_file_MiB']} MiB, W9 database {s['W9_db_MiB']} MiB, "
        f"W10 file {s['W10_file_MiB']} MiB, W11 {s['W11_operations']} operations per process (W8..W11: native and "
        f"icloudfs only); W13 {s.get('W13_appends', W13_APPENDS):,} appends; @1M rows: a container of "
        f"{s['million_items']:,} items with a folder of {s['million_big_folder']:,} files "
        "(icloudfs only, and native for ls -l).",
        "",
        "How each is measured: cold runs drop the page cache and use a new mount with a new cache "
        "folder (icloudfs: a new device); W12 reads the W1 file again on the same mount once it was read "
        "whole, the median of three reads each after dropping the page cache (extra "
        "<target>_cold_reads_MBps: the three; the first after a download is slow on this VM whatever "
        "file it reads; <target>_daemon_read_MiB: what the daemon read "
        "meanwhile, about 0 with FUSE passthrough); W13 is `Scripts/bench-lib/appender.c`, timed from its "
        "open to its close (extra <target>_daemon_cpu_s: the daemon's CPU time meanwhile); "
        "W6 counts icloudfs's store growth and rclone's write_bytes "
        "(/proc/PID/io) after its upload; sync rows time `icloudfs sync --wait` (rclone: until its "
        "vfs/stats show no queued or running upload, after its 5 s write-back delay). "
        "The machine's 2 cores may be shared with other work (see the load averages).",
        "",
    ]
    if result.get("s3"):
        s3 = result["s3"]
        lines += [
            f"S3 rows (store s3): the same workloads with icloudfs on an s3:// store and `rclone mount "
            f"--vfs-cache-mode full` of an S3 remote (provider Ceph), each under a prefix of its own in bucket "
            f"{s3['bucket']} at {s3['endpoint']} (a Ceph radosgw on this machine, objects in memory): "
            + ", ".join(s3["prefixes"]) + ", deleted afterwards. W1@s3 reads a file put in the store beforehand "
            "(icloudfs: through a mount of another device; rclone: rclone copyto) from a new mount with a new cache.",
            "",
        ]
    return "\n".join(lines)


def chart(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys, icloudfs, rclone, goals, floors, yardsticks = [], [], [], [], [], []
    goal_ratio = {"W1": 0.5, "W2": 0.95, "W4": 0.5, "W4warm": 0.5, "W5": 0.7, "W7": 0.2, "W8": 0.2, "W9": 0.3,
                  "W11": 0.1, "W12": 0.9, "W13": 0.5, "ls@1M": 0.5, "lswarm@1M": 0.5}
    for key, label, unit, higher, goal, check, *_ in ROWS:
        w = result["workloads"][key]
        n = w.get("native_beside") or w["native"]
        if not n or key in ("W3sync", "W5sync", "W7sync", "W13sync", "W6", "W8p99", "W8read", "W10", "heavymemory",
                            "memory", "mount"):
            continue

        def ratio(x):
            if x is None:
                return 0
            return x / n if higher else n / x
        keys.append(key)
        icloudfs.append(ratio(w["icloudfs"]))
        rclone.append(ratio(w["rclone"]))
        goals.append(goal_ratio.get(key, 10000 / n if key == "W3" else None))
        floors.append(ratio(w["fuse_floor"]) if w.get("fuse_floor") else None)
        yardsticks.append(ratio(w["passthrough_hp"]) if w.get("passthrough_hp") else None)
    # The S3 rows: icloudfs relative to rclone on the same S3 server (the goal: ahead of it).
    s3_keys, s3_ratios, s3_goals = [], [], []
    for key, label, unit, higher, *_ in ROWS:
        w = result["workloads"][key]
        if w["store"] != "s3" or not w["icloudfs"] or not w["rclone"]:
            continue
        s3_keys.append(key.replace("@s3", ""))
        s3_ratios.append(w["icloudfs"] / w["rclone"] if higher else w["rclone"] / w["icloudfs"])
        goal = 1.0
        directory = result["workloads"]["W7sync"]["icloudfs"]
        if key == "W7sync@s3" and directory:  # also ≤ 3× the directory store's W7sync
            goal = max(goal, w["rclone"] / (3 * directory))
        s3_goals.append(goal)
    if not keys and not s3_keys:
        return
    if s3_keys:
        fig, (ax, ax3) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [max(len(keys), 1), len(s3_keys)]})
        ax3.bar(range(len(s3_keys)), s3_ratios, 0.5, color="#3b7dd8")
        for x, g in enumerate(s3_goals):
            ax3.hlines(g, x - 0.3, x + 0.3, colors="black", linestyles="dashed", linewidth=1)
        ax3.axhline(1.0, color="#d8893b", linewidth=1)
        ax3.set_yscale("log")
        ax3.set_xticks(list(range(len(s3_keys))))
        ax3.set_xticklabels(s3_keys, rotation=30, fontsize=8)
        ax3.set_ylabel("icloudfs speed relative to rclone (higher is better, log)")
        ax3.set_title("S3 store: icloudfs / rclone (orange line: rclone; dashes: goal)", fontsize=10)
        if not keys:
            ax.axis("off")
    else:
        fig, ax = plt.subplots(figsize=(9, 5))
    xs = range(len(keys))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], icloudfs, width, label="icloudfs / native", color="#3b7dd8")
    ax.bar([x + width / 2 for x in xs], rclone, width, label="rclone / native", color="#d8893b")
    for x, g, f, y in zip(xs, goals, floors, yardsticks):
        if g:
            ax.hlines(g, x - width, x, colors="black", linestyles="dashed", linewidth=1)
        if f:
            ax.hlines(f, x - width, x, colors="#c0392b", linestyles="dotted", linewidth=1.5)
        if y:
            ax.hlines(y, x - width, x + width, colors="#27ae60", linestyles="dashdot", linewidth=1.5)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(keys)
    ax.set_ylabel("speed relative to native (higher is better, log)")
    when = result["date"] + (" (quick)" if result["quick"] else "")
    if s3_keys:  # two panels: the date once above both, short titles (a long one is clipped)
        fig.suptitle(f"icloudfs benchmark, {when}", fontsize=10)
        ax.set_title("directory store: icloudfs and rclone / native", fontsize=10)
    else:
        ax.set_title(f"icloudfs and rclone relative to native, {when}", fontsize=10)
    from matplotlib.lines import Line2D
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="black", linestyle="dashed", linewidth=1))
    labels.append("icloudfs goal")
    if any(floors):
        handles.append(Line2D([], [], color="#c0392b", linestyle="dotted", linewidth=1.5))
        labels.append("FUSE floor (null daemon) / native")
    if any(yardsticks):
        handles.append(Line2D([], [], color="#27ae60", linestyle="dashdot", linewidth=1.5))
        labels.append("passthrough_hp / native")
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=4, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------- main

def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repo", default=".")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--perf", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (stores, remotes)")
    parser.add_argument("--only", default=None)
    parser.add_argument("--targets", default=None, help="a subset of native,rclone,icloudfs,passthrough_hp,floor")
    parser.add_argument("--stores", default=None, help="a subset of directory,s3 (default: both when an S3 "
                        "server answers or can be started)")
    args = parser.parse_args()

    def terminate(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, terminate)

    bench = Bench(args)
    interrupted = False
    status = 0
    try:
        bench.run()
    except KeyboardInterrupt:
        interrupted, status = True, 130
        log("interrupted: unmounting")
    except Exception as error:  # a broken mount is a failure; slowness never is
        interrupted, status = True, 1
        bench.notes.append(f"stopped early: {error}")
        log(f"stopped early: {error}")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not skip the unmounts
        bench.cleanup()
        signal.signal(signal.SIGINT, signal.default_int_handler)
    write_outputs(bench, interrupted)
    print((bench.out / "bench.md").read_text())
    return status


if __name__ == "__main__":
    sys.exit(main())
