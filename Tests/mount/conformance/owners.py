"""Owners: chown and lchown as root, set-id bits, setgid folders, and what another user may do."""
import os
import stat
from harness import as_user, folder, step, write_file

folder()


def owner(path, follow=True):
    st = os.stat(path) if follow else os.lstat(path)
    return st.st_uid, st.st_gid


def mode(path):
    return oct(stat.S_IMODE(os.stat(path).st_mode))


write_file("f")
os.mkdir("d")
os.symlink("f", "link")
step("a new file's owner", lambda: owner("f"))
step("chown", lambda: (os.chown("f", 1234, 5678), owner("f"))[1])
step("chown the group only", lambda: (os.chown("f", -1, 99), owner("f"))[1])
step("chown the user only", lambda: (os.chown("f", 4321, -1), owner("f"))[1])
step("chown a folder", lambda: (os.chown("d", 77, 88), owner("d"))[1])
step("lchown a symlink", lambda: (os.lchown("link", 5, 6), owner("link", follow=False), owner("f"))[1:])
step("chown through a symlink", lambda: (os.chown("link", 7, 8), owner("link", follow=False), owner("f"))[1:])
step("chown clears set-id bits", lambda: (os.chmod("f", 0o6755), os.chown("f", 1, 1), mode("f"))[2])
step("chown keeps a folder's setgid", lambda: (os.chmod("d", 0o2775), os.chown("d", 1, 1), mode("d"))[2])



def chown_while_writing():
    # As cp -a and tar do: write, then fchown and fchmod before the close.
    fd = os.open("written", os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"bytes")
    os.fchown(fd, 321, 654)
    shown = os.fstat(fd).st_uid, os.fstat(fd).st_gid
    os.fchmod(fd, 0o640)
    os.close(fd)
    return shown, owner("written"), mode("written")


step("fchown while writing", chown_while_writing)
os.mkdir("shared")
os.chown("shared", 0, 4321)
os.chmod("shared", 0o2777)
step("a file in a setgid folder", lambda: (write_file("shared/f"), owner("shared/f"))[1])
step("a folder in a setgid folder", lambda: (os.mkdir("shared/sub"), owner("shared/sub"), mode("shared/sub"))[1:])

write_file("mine")
os.chown("mine", 1000, 1000)
os.chmod("mine", 0o666)
os.chmod(".", 0o777)
step("another user gives its file away", lambda: as_user(1000, 1000, lambda: os.chown("mine", 2000, -1)))
step("another user keeps its own values", lambda: as_user(1000, 1000, lambda: (os.chown("mine", 1000, 1000), owner("mine"))[1]))
step("another user sets a group it is not in", lambda: as_user(1000, 1000, lambda: os.chown("mine", -1, 3000)))
step("another user chowns root's file", lambda: as_user(1000, 1000, lambda: os.chown("f", -1, 1000)))
step("another user creates a file", lambda: as_user(1000, 1000, lambda: (write_file("theirs"), owner("theirs"))[1]))
write_file("setuid")
os.chmod("setuid", 0o4777)
step("a write by another user clears setuid", lambda: (as_user(1000, 1000, lambda: write_file("setuid", b"x")), mode("setuid")))
