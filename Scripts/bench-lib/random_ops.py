#!/usr/bin/env python3
"""Random namespace and data operations in one folder, for stress runs (bench W11, the mount
test of several processes at once): create, write at random offsets (files grow sparse),
truncate, rename, link attempts, setxattr, copy_file_range, fsync, read, unlink. Several
processes on the same folder collide on purpose (names come from a small pool), so
ENOENT, EEXIST and the like are expected; an error a local disk would not give (EIO,
ENOSPC, ETIMEDOUT, ...) stops the run with exit status 1.

Usage: random_ops.py FOLDER SEED OPERATIONS [--max-offset BYTES] [--names N]
Prints one line: operations done, expected errors, seconds.
"""
import argparse
import errno
import os
import random
import sys
import time

# What a local filesystem answers too when another process got there first, or for a
# feature the mount does not offer (hard links).
EXPECTED = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR,
            errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK}


def main():
    parser = argparse.ArgumentParser(description="random file operations (stress)")
    parser.add_argument("folder")
    parser.add_argument("seed", type=int)
    parser.add_argument("operations", type=int)
    parser.add_argument("--max-offset", type=int, default=1 << 30)
    parser.add_argument("--names", type=int, default=12)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    names = [os.path.join(args.folder, f"f{i}") for i in range(args.names)]

    def data(count):
        return rng.randbytes(count)

    def write(path, sync=False):
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.pwrite(fd, data(rng.randint(1, 64 << 10)), rng.randrange(args.max_offset))
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def copy_range(source, target):
        src = os.open(source, os.O_RDONLY)
        try:
            dst = os.open(target, os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                size = os.fstat(src).st_size
                if size:
                    try:
                        os.copy_file_range(src, dst, rng.randint(1, 1 << 20),
                                           rng.randrange(size), rng.randrange(args.max_offset))
                    except OSError as error:
                        # One file (two names of it, or one name twice), overlapping ranges:
                        # a local disk refuses that too.
                        if error.errno != errno.EINVAL or os.fstat(src).st_ino != os.fstat(dst).st_ino:
                            raise
            finally:
                os.close(dst)
        finally:
            os.close(src)

    def read(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if size:
                os.pread(fd, 64 << 10, rng.randrange(size))
        finally:
            os.close(fd)

    operations = [
        ("write", 20, lambda: write(rng.choice(names))),
        ("write+fsync", 10, lambda: write(rng.choice(names), sync=True)),
        ("truncate", 8, lambda: os.truncate(rng.choice(names), rng.randrange(args.max_offset))),
        ("rename", 10, lambda: os.rename(rng.choice(names), rng.choice(names))),
        ("link", 4, lambda: os.link(rng.choice(names), rng.choice(names))),
        ("setxattr", 8, lambda: os.setxattr(rng.choice(names), "user.stress", data(rng.randint(1, 200)))),
        ("copy_file_range", 8, lambda: copy_range(rng.choice(names), rng.choice(names))),
        ("read", 12, lambda: read(rng.choice(names))),
        ("unlink", 6, lambda: os.unlink(rng.choice(names))),
        ("listdir", 4, lambda: os.listdir(args.folder)),
    ]
    weights = [weight for _, weight, _ in operations]
    start = time.monotonic()
    expected = 0
    for n in range(args.operations):
        name, _, operation = rng.choices(operations, weights)[0]
        try:
            operation()
        except OSError as error:
            if error.errno not in EXPECTED:
                print(f"operation {n} ({name}): unexpected {errno.errorcode.get(error.errno, error.errno)}: {error}",
                      file=sys.stderr)
                return 1
            expected += 1
    print(f"{args.operations} operations, {expected} expected errors, {time.monotonic() - start:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
