"""Heavy-load workloads of Scripts/bench (issue 20): large files changed in small places,
a database, an unrelated stat while a big file is written, several processes at once.
Each function works in a folder and returns its figures; the orchestrator (bench.py) runs
it on each target and reports. The daemon's pid (None for native) is used to read how many
bytes it read (/proc/PID/io rchar: every read call, page cache or not, /dev/fuse included)
and its memory."""

import os
import random
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

MiB = 1 << 20
RANDOM_OPS = Path(__file__).with_name("random_ops.py")


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def bytes_read(pid):
    if pid is None:
        return None
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return None


def fill(path, size):
    """`size` bytes of random data, written in 4 MiB blocks and fsynced."""
    block = os.urandom(4 * MiB)
    with open(path, "wb") as f:
        written = 0
        while written < size:
            f.write(block[: min(len(block), size - written)])
            written += len(block)
        f.flush()
        os.fsync(f.fileno())


def w8_small_writes(folder, pid, size, settle, count=200, seed=8):
    """`count` × (4 KiB write at a random offset + fsync) into a `size`-byte file of random
    data: per-fsync latency (ms, median and p99) and the daemon's reads per fsync."""
    path = Path(folder) / "w8.img"
    fill(path, size)
    settle()
    rng = random.Random(seed)
    latencies = []
    before = bytes_read(pid)
    fd = os.open(path, os.O_WRONLY)
    try:
        for _ in range(count):
            offset = rng.randrange(size // 4096) * 4096
            start = time.perf_counter()
            os.pwrite(fd, rng.randbytes(4096), offset)
            os.fsync(fd)
            latencies.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
    settle()  # the queued versions are chunked (and read) in the background: count that too
    after = bytes_read(pid)
    per_fsync = None if before is None else (after - before) / count / MiB
    return {"median_ms": statistics.median(latencies), "p99_ms": percentile(latencies, 99),
            "daemon_read_MiB_per_fsync": per_fsync}


def w9_sqlite(folder, size, transactions=2000):
    """SQLite in WAL mode: a database grown to `size` bytes, then `transactions` small
    transactions (one row each, default synchronous=FULL): transactions per second."""
    path = Path(folder) / "w9.db"
    db = sqlite3.connect(path, isolation_level=None)
    try:
        mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
        blob = os.urandom(64 << 10)
        rows = size // len(blob)
        for first in range(0, rows, 512):
            db.execute("BEGIN")
            db.executemany("INSERT INTO t (v) VALUES (?)", [(blob,)] * min(512, rows - first))
            db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        start = time.perf_counter()
        for n in range(transactions):
            db.execute("BEGIN")
            db.execute("INSERT INTO t (v) VALUES (?)", (f"row {n}".encode() * 10,))
            db.execute("COMMIT")
        seconds = time.perf_counter() - start
    finally:
        db.close()
    return {"transactions_per_s": transactions / seconds, "journal_mode": mode}


def w10_stat_while_writing(folder, size, files=2000):
    """p99 latency (ms) of stat of unrelated files (each stat a name not looked up for a
    while, so it reaches the filesystem) while another process writes and fsyncs a
    `size`-byte file."""
    folder = Path(folder)
    others = folder / "w10-others"
    others.mkdir(exist_ok=True)
    for n in range(files):
        (others / f"f{n}").write_bytes(b"x")
    time.sleep(2)  # past the kernel's attribute and name caches
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(folder / "w10.big"), str(size)])
    latencies = []
    n = 0
    while writer.poll() is None:
        start = time.perf_counter()
        os.stat(others / f"f{n % files}")
        latencies.append((time.perf_counter() - start) * 1000)
        n += 1
        time.sleep(0.002)
    if writer.returncode != 0:
        raise RuntimeError("the W10 writer failed")
    return {"p99_ms": percentile(latencies, 99), "max_ms": max(latencies), "stats": len(latencies)}


WRITER = r"""
import os, sys
path, size = sys.argv[1], int(sys.argv[2])
block = os.urandom(1 << 20)
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
for n in range(size >> 20):
    os.write(fd, block)
    if n % 256 == 255:
        os.fsync(fd)
os.fsync(fd)
os.close(fd)
"""


def w11_random_operations(folder, processes=4, operations=1000, limit=600):
    """`processes` × `operations` random operations (random_ops.py, seeded) in one folder:
    seconds until all finish (None for those not finished within `limit`)."""
    folder = Path(folder) / "w11"
    folder.mkdir(exist_ok=True)
    start = time.perf_counter()
    children = [subprocess.Popen([sys.executable, RANDOM_OPS, folder, str(seed), str(operations)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                for seed in range(1, processes + 1)]
    finished, failures = 0, []
    for child in children:
        try:
            _, errors = child.communicate(timeout=max(1, limit - (time.perf_counter() - start)))
            if child.returncode == 0:
                finished += 1
            else:
                failures.append(errors.decode()[-300:])
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
    return {"seconds": time.perf_counter() - start, "finished": finished, "processes": processes,
            "failures": failures}


class MemoryWatch:
    """The daemon's largest RSS (MiB) while a workload runs, sampled every 0.2 s."""

    def __init__(self, pid):
        self.pid = pid
        self.peak = 0.0
        self.running = pid is not None
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self):
        while self.running:
            try:
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak = max(self.peak, int(line.split()[1]) / 1024)
            except OSError:
                return
            time.sleep(0.2)

    def __enter__(self):
        if self.running:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        if self.thread.is_alive():
            self.thread.join()
