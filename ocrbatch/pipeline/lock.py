"""One run at a time per output folder: `OUT/.ocrbatch.lock`, held with `fcntl.flock` for the whole run.

The file holds the running process's PID. The kernel drops a flock when its process dies, however it dies,
so a lock left by a run killed with `kill -9` is simply taken over by the next run; the file still being
there tells that the earlier run did not end cleanly, and its temporary files are removed. A clean end
deletes the file while still holding the lock; a run that locked a file just deleted that way sees that
the path no longer leads to its file and tries again.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from .. import atomic, safefiles
from ..errors import OutputLockedError, OutputWriteError

log = logging.getLogger("ocrbatch")

NAME = ".ocrbatch.lock"


class OutputLock:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.path = out_dir / NAME
        self._fd: int | None = None
        self.taken_over_pid: int | None = None  # the PID a killed run left in the file

    def acquire(self) -> "OutputLock":
        for _ in range(100):
            if self._try_acquire():
                return self
        raise OutputLockedError(f"cannot lock {self.path}: other runs keep replacing it")

    def _try_acquire(self) -> bool:
        try:
            import fcntl
        except ImportError:  # not a POSIX system: no flock
            log.warning("cannot lock %s on this system; make sure no other run writes into this folder", self.path)
            return True

        try:
            fd = safefiles.open_file(self.path, os.O_RDWR | os.O_CREAT, "the lock file", atomic.file_mode())
        except OSError as exc:  # a full disk (no inode left) or a read-only folder: nothing can be written
            raise OutputWriteError(f"cannot create {self.path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"pid {holder}" if holder else "another process"
                raise OutputLockedError(f"another ocrbatch run ({who}) is writing into {self.out_dir}; "
                                        "wait for it to end or choose another -o") from exc
            # No locks on this file system (some network mounts): go on, unguarded.
            log.warning("cannot lock %s (%s); make sure no other run writes into this folder",
                        self.path, exc.strerror or exc)
            return True
        try:
            same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the run before deleted it as we opened it
            os.close(fd)
            return False
        self._fd = fd
        earlier = _read_pid(fd)
        if earlier and earlier != os.getpid():
            self.taken_over_pid = earlier
            removed = atomic.remove_temporaries(self.out_dir)
            log.info("took over the lock of an earlier run (pid %d) that did not end cleanly; removed %d "
                     "temporary file(s) it left", earlier, removed)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # disk full: the lock holds all the same, and the run will say why it stops
            pass
        return True

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)  # still holding the lock (see the module's docstring)
        except OSError:
            pass
        os.close(self._fd)  # closing the last descriptor drops the flock
        self._fd = None

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
