"""truncate(2) and ftruncate(2)."""
import os
from harness import folder, step, write_file

folder()
write_file("f", b"0123456789")
os.mkdir("d")
step("shorten", lambda: (os.truncate("f", 4), open("f", "rb").read()))
step("lengthen with zeros", lambda: (os.truncate("f", 8), open("f", "rb").read()))
step("to zero", lambda: (os.truncate("f", 0), os.stat("f").st_size))
step("negative", lambda: os.truncate("f", -1))
step("a folder", lambda: os.truncate("d", 0))
step("a missing file", lambda: os.truncate("missing", 0))
step("past 2 GiB", lambda: (os.truncate("f", 3 << 30), os.stat("f").st_size))
step("back to 3", lambda: (os.truncate("f", 3), os.stat("f").st_size))


def ftruncate_read_only():
    fd = os.open("f", os.O_RDONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)


step("ftruncate read-only", ftruncate_read_only)


def ftruncate_then_write():
    fd = os.open("f", os.O_RDWR)
    os.ftruncate(fd, 2)
    os.pwrite(fd, b"xy", 5)
    os.close(fd)
    return open("f", "rb").read()


step("ftruncate then write past the end", ftruncate_then_write)
step("ftruncate through a symlink", lambda: (os.symlink("f", "sym"), os.truncate("sym", 1), os.stat("f").st_size))
