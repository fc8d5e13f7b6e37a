"""Special files: FIFOs, sockets, character and block devices (names with metadata; the
kernel serves their I/O)."""
import os
import socket
import stat
from harness import folder, step

folder()


def kind(path):
    mode = os.lstat(path).st_mode
    return next(name for name, test in [("fifo", stat.S_ISFIFO), ("socket", stat.S_ISSOCK), ("char", stat.S_ISCHR),
                                        ("block", stat.S_ISBLK), ("file", stat.S_ISREG), ("dir", stat.S_ISDIR)]
                if test(mode))


step("mkfifo", lambda: (os.mkfifo("fifo", 0o640), kind("fifo"), oct(stat.S_IMODE(os.stat("fifo").st_mode)))[1:])
step("mkfifo over a name", lambda: os.mkfifo("fifo"))
step("mknod a character device", lambda: (os.mknod("char", 0o600 | stat.S_IFCHR, os.makedev(1, 3)), kind("char"),
                                          os.major(os.stat("char").st_rdev), os.minor(os.stat("char").st_rdev))[1:])
step("mknod a block device", lambda: (os.mknod("block", 0o660 | stat.S_IFBLK, os.makedev(8, 17)), kind("block"),
                                      os.major(os.stat("block").st_rdev), os.minor(os.stat("block").st_rdev))[1:])


def bind_socket():
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("sock")
    server.close()
    return kind("sock")


step("bind a unix socket", bind_socket)


def through_fifo():
    read = os.open("fifo", os.O_RDONLY | os.O_NONBLOCK)
    write = os.open("fifo", os.O_WRONLY)
    os.write(write, b"through the pipe")
    data = os.read(read, 100)
    os.close(write)
    os.close(read)
    return data, os.stat("fifo").st_size


step("bytes through the FIFO", through_fifo)
step("chmod a FIFO", lambda: (os.chmod("fifo", 0o600), oct(stat.S_IMODE(os.stat("fifo").st_mode)))[1])
step("chown a device", lambda: (os.chown("char", 12, 34), os.stat("char").st_uid, os.stat("char").st_gid)[1:])
step("rename a FIFO", lambda: (os.rename("fifo", "fifo2"), kind("fifo2")))
step("rename a file over a FIFO", lambda: (open("f", "w").close(), os.rename("f", "fifo2"), kind("fifo2"))[2])
step("rename a FIFO over a file", lambda: (os.mkfifo("fifo3"), open("g", "w").close(), os.rename("fifo3", "g"), kind("g"))[3])
step("unlink a device", lambda: (os.unlink("block"), os.path.lexists("block"))[1])
step("truncate a FIFO", lambda: os.truncate("g", 0))
step("the listing", lambda: sorted((name, kind(name)) for name in os.listdir(".")))
