"""link(2): several names of one file, symlink or special file; link counts, unlink of one
name, rename over and between names of one item, times, and what cannot be linked."""
import os
import time
from harness import folder, step, write_file

folder()
write_file("a", b"first")
os.mkdir("d")


def same_file(*paths):
    """Whether the paths name one inode (inode numbers themselves differ between disks)."""
    stats = [os.lstat(p) for p in paths]
    return len({(s.st_dev, s.st_ino) for s in stats}) == 1


def counts(*paths):
    return [os.lstat(p).st_nlink for p in paths]


step("link a file", lambda: os.link("a", "b"))
step("both names are one file", lambda: same_file("a", "b"))
step("link counts", lambda: counts("a", "b"))
step("link into a folder", lambda: os.link("a", "d/c"))
step("three names", lambda: (same_file("a", "b", "d/c"), counts("a", "b", "d/c")))


def write_through(name, data, other):
    with open(name, "ab") as f:
        f.write(data)
    return open(other, "rb").read()


step("a write through one name shows in the others", lambda: write_through("b", b"+b", "d/c"))
step("chmod through one name", lambda: (os.chmod("d/c", 0o600), oct(os.stat("a").st_mode & 0o777)))
step("an xattr through one name", lambda: (os.setxattr("a", "user.k", b"v"), os.getxattr("b", "user.k")))
step("onto an existing name", lambda: os.link("a", "b"))
step("from a missing name", lambda: os.link("missing", "z"))
step("a folder", lambda: os.link("d", "d2"))
step("into a missing folder", lambda: os.link("a", "missing/z"))
step("onto a name with a trailing slash", lambda: os.link("a", "z/"))


def ctime_moves(path, action):
    before = os.lstat(path).st_ctime_ns
    time.sleep(0.02)
    action()
    return os.lstat(path).st_ctime_ns > before


step("link moves the file's ctime", lambda: ctime_moves("a", lambda: os.link("a", "e")))
step("unlink of one name moves the others' ctime", lambda: ctime_moves("a", lambda: os.unlink("e")))
step("unlink the first name", lambda: os.unlink("a"))
step("the others keep the bytes", lambda: (open("b", "rb").read(), counts("b", "d/c")))
step("rename a name onto another of the same file", lambda: os.rename("b", "d/c"))
step("both names are still there", lambda: (os.path.exists("b"), os.path.exists("d/c"), counts("b")))
write_file("other", b"other")
step("rename another file over one name", lambda: os.rename("other", "b"))
step("the replaced name's file lost a link", lambda: (counts("d/c"), open("d/c", "rb").read()))
step("rename a name", lambda: (os.rename("d/c", "moved"), counts("moved"), open("moved", "rb").read()))


def unlink_all_while_open():
    write_file("o1", b"open")
    os.link("o1", "o2")
    fd = os.open("o1", os.O_RDWR)
    os.unlink("o1")
    first = os.fstat(fd).st_nlink
    os.unlink("o2")
    second = os.fstat(fd).st_nlink
    os.pwrite(fd, b"O", 0)
    data = os.pread(fd, 10, 0)
    os.close(fd)
    return first, second, data


step("the last name unlinked while open", unlink_all_while_open)
os.symlink("target", "sym")
step("link a symlink (not its target)", lambda: (os.link("sym", "sym2", follow_symlinks=False), os.readlink("sym2"), counts("sym")))
os.mkfifo("fifo")
step("link a FIFO", lambda: (os.link("fifo", "fifo2"), counts("fifo", "fifo2"), same_file("fifo", "fifo2")))
step("the listing", lambda: sorted(os.listdir(".")))
