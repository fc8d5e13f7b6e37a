"""Shared helpers of the differential conformance scripts: each script runs one area's
system-call sequences in a folder and prints one line per step (its result, or the errno's
name). Run on a folder of a local disk and on a mount, the outputs must be equal
(Tests/mount/test_conformance.sh). Nothing printed may depend on the folder, the time, or
inode numbers: steps print what a program would check (a size, an errno, "newer")."""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def step(label, action):
    """Runs `action` and prints its result, or the errno's name when it fails."""
    try:
        result = action()
        shown = "ok" if result is None else repr(result)
    except OSError as error:
        shown = errno.errorcode.get(error.errno, str(error.errno))
    print(f"{label}: {shown}")


def checked(result):
    """A libc call's result, or OSError with its errno."""
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def renameat2(source, target, flags):
    return checked(libc.renameat2(AT_FDCWD, os.fsencode(source), AT_FDCWD, os.fsencode(target), flags))


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def utimensat(path, atime, mtime, follow=True):
    """atime and mtime: (seconds, nanoseconds), UTIME_NOW or UTIME_OMIT (as nanoseconds)."""
    def spec(value):
        return Timespec(0, value) if isinstance(value, int) else Timespec(*value)
    times = (Timespec * 2)(spec(atime), spec(mtime))
    flags = 0 if follow else 0x100  # AT_SYMLINK_NOFOLLOW
    return checked(libc.utimensat(AT_FDCWD, os.fsencode(path), times, flags))


def write_file(path, data=b"data"):
    with open(path, "wb") as f:
        f.write(data)


def folder():
    """The folder to work in (argv[1]), made empty by the caller."""
    os.chdir(sys.argv[1])
    return sys.argv[1]


def as_user(uid, gid, action):
    """Runs `action` in a child with only that user and group: its result or errno name."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            result = repr(action())
        except OSError as error:
            result = errno.errorcode.get(error.errno, str(error.errno))
        os.write(write, result.encode())
        os._exit(0)
    os.close(write)
    result = os.read(read, 500).decode()
    os.waitpid(pid, 0)
    return result
