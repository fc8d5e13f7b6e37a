"""Times: what changes mtime and ctime, utimensat with UTIME_NOW and UTIME_OMIT, nanoseconds."""
import os
import time
from harness import UTIME_NOW, UTIME_OMIT, folder, step, utimensat, write_file

folder()
write_file("f")
os.mkdir("d")


def changes(path, action):
    """Which of mtime and ctime `action` moves forward."""
    before = os.lstat(path)
    time.sleep(0.02)
    action()
    after = os.lstat(path)
    return {"mtime": after.st_mtime_ns > before.st_mtime_ns, "ctime": after.st_ctime_ns > before.st_ctime_ns}


def append(path, data=b"more"):
    with open(path, "ab") as f:
        f.write(data)


step("write", lambda: changes("f", lambda: append("f")))
step("truncate", lambda: changes("f", lambda: os.truncate("f", 1)))
step("chmod", lambda: changes("f", lambda: os.chmod("f", 0o600)))
step("chown to the same owner (-1, -1)", lambda: changes("f", lambda: os.chown("f", -1, -1)))
step("setxattr", lambda: changes("f", lambda: os.setxattr("f", "user.t", b"1")))
step("rename (the file)", lambda: changes("f", lambda: os.rename("f", "g")))
step("create in a folder (the folder)", lambda: changes("d", lambda: write_file("d/x")))
step("rename in a folder (the folder)", lambda: changes("d", lambda: os.rename("d/x", "d/y")))
step("unlink in a folder (the folder)", lambda: changes("d", lambda: os.unlink("d/y")))
step("mkdir in a folder (the folder)", lambda: changes("d", lambda: os.mkdir("d/sub")))
step("read (mtime, ctime)", lambda: changes("g", lambda: open("g", "rb").read()))


def read_moves_atime():
    write_file("fresh", b"new")
    before = os.stat("fresh").st_atime_ns
    time.sleep(0.02)
    open("fresh", "rb").read()
    return os.stat("fresh").st_atime_ns > before


step("a read after a write moves atime (relatime)", read_moves_atime)


def attributes_while_writing():
    # chmod of a file being written moves its ctime at once, not at the close.
    fd = os.open("w", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"x")
    before = os.fstat(fd).st_ctime_ns
    time.sleep(0.02)
    os.fchmod(fd, 0o600)
    after = os.fstat(fd).st_ctime_ns
    os.utime(fd, ns=(7_000_000_001, 8_000_000_002))
    shown = os.fstat(fd).st_atime_ns, os.fstat(fd).st_mtime_ns
    os.close(fd)
    return after > before, shown, (os.stat("w").st_atime_ns, os.stat("w").st_mtime_ns)


step("times set on a file being written", attributes_while_writing)
step("set both, nanoseconds", lambda: (utimensat("g", (1000000000, 123456789), (1500000000, 987654321)),
                                        os.stat("g").st_atime_ns, os.stat("g").st_mtime_ns))
step("UTIME_OMIT keeps mtime", lambda: (utimensat("g", (1100000000, 5), UTIME_OMIT),
                                        os.stat("g").st_atime_ns, os.stat("g").st_mtime_ns))
step("UTIME_NOW sets mtime to now", lambda: (utimensat("g", UTIME_OMIT, UTIME_NOW),
                                             abs(os.stat("g").st_mtime - time.time()) < 5, os.stat("g").st_atime_ns))
step("utimensat changes ctime", lambda: changes("g", lambda: utimensat("g", (1, 0), (2, 0)))["ctime"])
step("times before 1970", lambda: (utimensat("g", (-100, 0), (-200, 500)), os.stat("g").st_mtime_ns))
step("a far future", lambda: (utimensat("g", (4102444800, 0), (4102444800, 1)), os.stat("g").st_mtime_ns))
os.symlink("g", "sym")
step("utimensat on a symlink itself", lambda: (utimensat("sym", (5, 0), (6, 0), follow=False),
                                               os.lstat("sym").st_mtime_ns, os.stat("g").st_mtime_ns))
