"""POSIX ACLs (the mount runs with -o acl) and the other attribute namespaces: setfacl and
chmod keep ACL and mode in step, default ACLs are inherited instead of the umask, the
kernel checks access by them; trusted.* and security.* attributes are kept."""
import os
import subprocess
from harness import as_user, folder, step, write_file

folder()


def acl(path):
    """The ACL as getfacl prints it, without the header naming the file."""
    return subprocess.run(["getfacl", "-cp", path], capture_output=True, text=True, check=True).stdout.split()


def setfacl(*args):
    """None, or how setfacl failed."""
    run = subprocess.run(["setfacl", *args], capture_output=True, text=True)
    return f"exit {run.returncode}" if run.returncode else None


def mode(path):
    return oct(os.lstat(path).st_mode & 0o7777)


os.umask(0o022)
write_file("f")
os.chmod("f", 0o644)
step("a named user's entry", lambda: (setfacl("-m", "u:1000:rw", "f"), acl("f"), mode("f")))
step("chmod sets the mask", lambda: (os.chmod("f", 0o640), acl("f"), mode("f")))
step("the user reads by the ACL entry", lambda: as_user(1000, 1000, lambda: open("f", "rb").read()))
step("others may not", lambda: as_user(1001, 1001, lambda: open("f", "rb").read()))
step("an ACL the mode can say is only the mode", lambda: (setfacl("-b", "f"), setfacl("-m", "u::rwx,g::r,o::r", "f"), acl("f"), mode("f")))
os.mkdir("d")
step("a default ACL on a folder", lambda: (setfacl("-d", "-m", "u:1000:rwx,g::rx,o::-", "d"), acl("d")))


def made_inside(umask):
    os.umask(umask)
    try:
        write_file(f"d/file{umask}")
        os.mkdir(f"d/sub{umask}")
        os.mkfifo(f"d/fifo{umask}")
    finally:
        os.umask(0o022)
    return [(mode(p), acl(p)) for p in (f"d/file{umask}", f"d/sub{umask}", f"d/fifo{umask}")]


step("inherited (the umask does not apply)", lambda: made_inside(0o077))
step("inherited with another umask", lambda: made_inside(0o022))
step("the umask applies without a default ACL", lambda: (os.umask(0o027), write_file("plain"), os.mkdir("plaindir"), os.umask(0o022), mode("plain"), mode("plaindir")))
step("removing the default ACL", lambda: (setfacl("-k", "d"), acl("d")))
step("a default ACL on a file", lambda: setfacl("-d", "-m", "u:1000:rw", "f"))
step("trusted.* attributes", lambda: (os.setxattr("f", "trusted.t", b"1"), os.getxattr("f", "trusted.t")))
step("security.* attributes", lambda: (os.setxattr("f", "security.s", b"2"), os.getxattr("f", "security.s")))
step("listed", lambda: sorted(n for n in os.listxattr("f") if not n.startswith("user.icloud.")))
step("trusted.* on a symlink", lambda: (os.symlink("f", "sym"), os.setxattr("sym", "trusted.t", b"3", follow_symlinks=False), os.getxattr("sym", "trusted.t", follow_symlinks=False)))
step("removed", lambda: (os.removexattr("f", "trusted.t"), os.removexattr("f", "security.s"), sorted(n for n in os.listxattr("f") if not n.startswith("user."))))
