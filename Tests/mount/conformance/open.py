"""open(2) flags: O_CREAT, O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_DIRECTORY."""
import os
from harness import folder, step, write_file

folder()
step("O_CREAT|O_EXCL new", lambda: os.close(os.open("a", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)))
step("O_CREAT|O_EXCL existing", lambda: os.open("a", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
os.symlink("a", "link")
os.symlink("nowhere", "dangling")
step("O_CREAT|O_EXCL on a symlink", lambda: os.open("link", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
step("O_CREAT through a dangling symlink", lambda: os.close(os.open("dangling", os.O_CREAT | os.O_WRONLY, 0o644)))
step("it made the target", lambda: os.path.exists("nowhere"))
step("O_NOFOLLOW on a symlink", lambda: os.open("link", os.O_RDONLY | os.O_NOFOLLOW))
step("O_NOFOLLOW|O_PATH", lambda: os.close(os.open("link", os.O_PATH | os.O_NOFOLLOW)))
write_file("t", b"0123456789")
step("O_TRUNC", lambda: os.close(os.open("t", os.O_WRONLY | os.O_TRUNC)))
step("size after O_TRUNC", lambda: os.stat("t").st_size)
write_file("t", b"0123456789")
step("O_TRUNC read-only", lambda: os.close(os.open("t", os.O_RDONLY | os.O_TRUNC)))
step("size after O_RDONLY|O_TRUNC", lambda: os.stat("t").st_size)


def append():
    fd = os.open("ap", os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
    os.write(fd, b"abc")
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"def")
    os.pwrite(fd, b"g", 0)  # Linux: pwrite with O_APPEND appends
    os.close(fd)
    return open("ap", "rb").read()


step("O_APPEND writes at the end", append)


def read_write():
    fd = os.open("rw", os.O_CREAT | os.O_RDWR, 0o600)
    os.write(fd, b"hello world")
    os.lseek(fd, 6, os.SEEK_SET)
    data = os.read(fd, 5)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"J")
    os.close(fd)
    return data, open("rw", "rb").read()


step("O_RDWR read and write", read_write)
step("mode of a new file", lambda: oct(os.stat("rw").st_mode & 0o7777))
step("write to O_RDONLY", lambda: os.write(os.open("t", os.O_RDONLY), b"x"))
step("read from O_WRONLY", lambda: os.read(os.open("t", os.O_WRONLY), 1))
os.mkdir("d")
step("O_DIRECTORY on a folder", lambda: os.close(os.open("d", os.O_RDONLY | os.O_DIRECTORY)))
step("O_CREAT on a folder", lambda: os.open("d", os.O_CREAT | os.O_WRONLY))
step("O_CREAT|O_DIRECTORY new", lambda: os.open("newdir", os.O_CREAT | os.O_DIRECTORY | os.O_RDONLY))
step("seek past the end and write", lambda: (os.pwrite(os.open("sparse", os.O_CREAT | os.O_WRONLY), b"x", 100000), os.stat("sparse").st_size))
step("SEEK_DATA and SEEK_HOLE", lambda: (lambda fd: (os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE)))(os.open("sparse", os.O_RDONLY)))
step("SEEK_DATA past the end", lambda: os.lseek(os.open("sparse", os.O_RDONLY), 200000, os.SEEK_DATA))
step("lseek on a folder", lambda: os.lseek(os.open("d", os.O_RDONLY), 0, os.SEEK_END) >= 0)
