"""flock(2) and POSIX fcntl locks between processes (local to one mount, as on a local disk)."""
import errno
import fcntl
import os
import struct
from harness import folder, step, write_file

folder()
write_file("f", b"0123456789")


def in_child(action):
    """Runs `action` in a forked process (locks are per process): its errno name or 'ok'."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = (action() or "ok").encode()
        except OSError as error:
            result = errno.errorcode.get(error.errno, str(error.errno)).encode()
        os.write(write, result)
        os._exit(0)
    os.close(write)
    result = os.read(read, 200).decode()
    os.waitpid(pid, 0)
    return result


def flock_in_child(kind):
    def action():
        fd = os.open("f", os.O_RDWR)
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    return lambda: in_child(action)


def lockf_in_child(kind, start, length):
    def action():
        fd = os.open("f", os.O_RDWR)
        fcntl.lockf(fd, kind | fcntl.LOCK_NB, length, start)
    return lambda: in_child(action)


held = os.open("f", os.O_RDWR)
step("flock exclusive", lambda: fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB))
step("another process, exclusive", flock_in_child(fcntl.LOCK_EX))
step("another process, shared", flock_in_child(fcntl.LOCK_SH))
step("downgrade to shared", lambda: fcntl.flock(held, fcntl.LOCK_SH | fcntl.LOCK_NB))
step("another process, shared now", flock_in_child(fcntl.LOCK_SH))
step("unlock", lambda: fcntl.flock(held, fcntl.LOCK_UN))
step("another process, exclusive now", flock_in_child(fcntl.LOCK_EX))

posix = os.open("f", os.O_RDWR)
step("fcntl lock bytes 0-4", lambda: fcntl.lockf(posix, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 0))
step("another process, bytes 2-3", lockf_in_child(fcntl.LOCK_EX, 2, 2))
step("another process, bytes 5-9", lockf_in_child(fcntl.LOCK_EX, 5, 5))


def who_holds():
    # F_GETLK from a child: the conflicting lock's type and range (not its pid).
    def action():
        fd = os.open("f", os.O_RDWR)
        query = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        kind, _, start, length, _ = struct.unpack("hhqqi", answer)
        return f"type={kind} start={start} len={length}"
    return in_child(action)


step("another process, F_GETLK", who_holds)
step("closing a descriptor drops its process's fcntl locks", lambda: (os.close(posix), lockf_in_child(fcntl.LOCK_EX, 0, 5)())[1])
