"""Names and paths: 255-byte names, PATH_MAX, symlink loops, ENOTDIR/EISDIR/EEXIST."""
import os
import stat
from harness import folder, step, write_file

folder()
long_name = "n" * 255
step("create a 255-byte name", lambda: write_file(long_name))
step("stat it", lambda: os.stat(long_name).st_size)
step("create a 256-byte name", lambda: write_file("n" * 256))
step("mkdir a 256-byte name", lambda: os.mkdir("d" * 256))
step("a name of 255 bytes of UTF-8", lambda: write_file("é" * 127 + "x"))
step("listed as bytes", lambda: sorted(len(os.fsencode(n)) for n in os.listdir(".")))
step("a name that is not UTF-8", lambda: write_file(b"caf\xe9"))
step("read back by its bytes", lambda: open(b"caf\xe9", "rb").read())
step("listed with its bytes", lambda: b"caf\xe9" in os.listdir(b"."))

# A deep path: 40 levels of 100-byte names (4,000+ bytes, under PATH_MAX).
path = "."
for n in range(40):
    path = os.path.join(path, f"{n:02d}" + "p" * 98)
step("makedirs 40 levels", lambda: os.makedirs(path))
step("a file at the bottom", lambda: write_file(os.path.join(path, "f")))
step("a path over PATH_MAX", lambda: os.stat(os.path.join(path, "q" * 200)))

os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
step("open a symlink loop", lambda: open("loop1"))
step("stat a symlink loop", lambda: os.stat("loop1"))
step("lstat a symlink loop", lambda: oct(os.lstat("loop1").st_mode & 0o170000))

write_file("file")
os.mkdir("dir")
step("a file as a folder", lambda: os.stat("file/x"))
step("create under a file", lambda: write_file("file/x"))
step("mkdir under a file", lambda: os.mkdir("file/x"))
step("open a folder for writing", lambda: os.open("dir", os.O_WRONLY))
step("O_DIRECTORY on a file", lambda: os.open("file", os.O_RDONLY | os.O_DIRECTORY))
step("mkdir over a file", lambda: os.mkdir("file"))
step("mkdir over a folder", lambda: os.mkdir("dir"))
step("symlink over a file", lambda: os.symlink("x", "file"))
step("trailing slash on a file", lambda: os.stat("file/"))
step("trailing slash on a folder", lambda: stat.S_ISDIR(os.stat("dir/").st_mode))
os.mkdir("dir/sub")
step("a folder's link count", lambda: os.stat("dir").st_nlink)
step("an empty path", lambda: os.stat(""))
step("a missing parent", lambda: write_file("missing/x"))
