"""unlink(2) and rmdir(2)."""
import os
from harness import folder, step, write_file

folder()
write_file("f")
os.mkdir("d")
os.mkdir("full")
write_file("full/x")
os.symlink("d", "sym")
step("unlink a folder", lambda: os.unlink("d"))
step("rmdir a file", lambda: os.rmdir("f"))
step("rmdir a full folder", lambda: os.rmdir("full"))
step("rmdir '.'", lambda: os.rmdir("d/."))
step("rmdir '..'", lambda: os.rmdir("d/.."))
step("rmdir a symlink to a folder", lambda: os.rmdir("sym"))
step("unlink a symlink to a folder", lambda: os.unlink("sym"))
step("the folder stays", lambda: os.path.isdir("d"))
step("unlink a missing name", lambda: os.unlink("missing"))
step("unlink with a trailing slash", lambda: os.unlink("f/"))
step("unlink a file", lambda: os.unlink("f"))
step("rmdir an empty folder", lambda: os.rmdir("d"))
step("rmdir a missing folder", lambda: os.rmdir("d"))


def unlink_while_open():
    write_file("open", b"still here")
    fd = os.open("open", os.O_RDWR)
    os.unlink("open")
    os.pwrite(fd, b"S", 0)
    data = os.pread(fd, 100, 0)
    size = os.fstat(fd).st_size
    os.close(fd)
    return data, size, os.path.exists("open")


step("unlinked while open", unlink_while_open)
step("the listing", lambda: sorted(os.listdir(".")))
