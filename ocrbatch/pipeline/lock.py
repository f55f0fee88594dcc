"""One run at a time per output folder: `OUT/.ocrbatch.lock`, held with `fcntl.flock` for the whole run.

The file holds the running process's PID. The kernel drops a flock when its process dies, however it dies,
so a lock left by a run killed with `kill -9` is simply taken over by the next run; the file still being
there tells that the earlier run did not end cleanly, and its temporary files are removed. A clean end
deletes the file while still holding the lock; a run that locked a file just deleted that way sees that
the path no longer leads to its file and tries again.

With --shard I/N each part has its own lock, `OUT/.ocrbatch.shard-I-of-N.lock` (the same rules), and holds
`OUT/.ocrbatch.lock` shared meanwhile: the parts run side by side, a run without --shard (which holds it
exclusively) waits for none of them and none of them for it: whichever comes second is refused. A shard's lock
file also holds its run's token (atomic.RUN_TOKEN): taking over a killed part's lock removes only that run's
temporary files, not those the other parts are writing.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from .. import atomic, safefiles
from ..config import Shard
from ..errors import OutputLockedError, OutputWriteError

log = logging.getLogger("ocrbatch")

NAME = ".ocrbatch.lock"
ATTEMPTS = 100  # tries at a lock file that other runs keep deleting as we open it


def shard_lock_name(shard: Shard) -> str:
    """The lock file of part `shard`: .ocrbatch.shard-I-of-N.lock."""
    return f".ocrbatch.{shard.name}.lock"


class OutputLock:
    def __init__(self, out_dir: Path, shard: Shard | None = None) -> None:
        self.out_dir = out_dir
        self.shard = shard  # --shard I/N, or None: the whole folder
        self.path = out_dir / (NAME if shard is None else shard_lock_name(shard))
        self._fd: int | None = None
        self._folder_fd: int | None = None  # a shard's shared hold on OUT/.ocrbatch.lock
        self.taken_over_pid: int | None = None  # the PID a killed run left in the file

    def acquire(self) -> "OutputLock":
        if self.shard is not None:
            self._folder_fd = _hold_shared(self.out_dir / NAME, self.out_dir)
        try:
            for _ in range(ATTEMPTS):
                if self._try_acquire():
                    self._check_splits()
                    return self
        except BaseException:
            self.release()
            self._drop_folder()
            raise
        self._drop_folder()
        raise OutputLockedError(f"cannot lock {self.path}: other runs keep replacing it")

    def _check_splits(self) -> None:
        """A part refuses to run beside a part of another split (another N): their sets would overlap."""
        if self.shard is None:
            return
        for path in self.out_dir.glob(".ocrbatch.shard-*-of-*.lock"):
            if path.name.endswith(f"-of-{self.shard.count}.lock"):
                continue
            holder = _held_by(path)
            if holder is not None:
                raise OutputLockedError(f"a part of another split ({path.name[len('.ocrbatch.'):-len('.lock')]}, "
                                        f"{holder}) is writing into {self.out_dir}: every machine must give the "
                                        f"same N as --shard {self.shard.index}/{self.shard.count}")

    def _drop_folder(self) -> None:
        if self._folder_fd is not None:
            os.close(self._folder_fd)
            self._folder_fd = None

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
                what = f"is writing into {self.out_dir}" if self.shard is None else \
                    f"is converting part {self.shard.index} of {self.shard.count} into {self.out_dir}"
                raise OutputLockedError(f"another ocrbatch run ({who}) {what}; "
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
        earlier, token = _read_owner(fd)
        if earlier and earlier != os.getpid():
            self.taken_over_pid = earlier
            # Beside a shard, the other parts may be writing: only the dead run's own temporaries go.
            removed = atomic.remove_temporaries(self.out_dir, token) if self.shard is None or token else 0
            log.info("took over the lock of an earlier run (pid %d) that did not end cleanly; removed %d "
                     "temporary file(s) it left", earlier, removed)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {atomic.RUN_TOKEN}\n".encode(), 0)
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
        self._drop_folder()

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    return _read_owner(fd)[0]


def _read_owner(fd: int) -> tuple[int | None, str | None]:
    """The PID and the run token (atomic.RUN_TOKEN) a lock file holds; an older run's file holds a PID only."""
    try:
        parts = os.pread(fd, 64, 0).decode("ascii", "replace").split()
        return (int(parts[0]) if parts else None), (parts[1] if len(parts) > 1 and parts[1].isalnum() else None)
    except (OSError, ValueError):
        return None, None


def _held_by(path: Path) -> str | None:
    """Who holds the flock on `path` ("pid N", or "another process"), or None when nobody does."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        pid = _read_pid(fd)
        return f"pid {pid}" if pid else "another process"
    finally:
        os.close(fd)


def _hold_shared(path: Path, out_dir: Path) -> int | None:
    """A shared hold on the folder's lock file `path` (a part of a --shard run): refused while a run without
    --shard holds it. None where the system or file system has no flock (warned about by the part's own lock)."""
    try:
        import fcntl
    except ImportError:
        return None
    for _ in range(ATTEMPTS):
        try:
            fd = safefiles.open_file(path, os.O_RDWR | os.O_CREAT, "the lock file", atomic.file_mode())
        except OSError as exc:
            raise OutputWriteError(f"cannot create {path}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"pid {holder}" if holder else "another process"
                raise OutputLockedError(f"an ocrbatch run without --shard ({who}) is writing into {out_dir}; "
                                        "wait for it to end or choose another -o") from exc
            return None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd  # never deleted by a part: a run without --shard deletes it at its clean end
        os.close(fd)
    raise OutputLockedError(f"cannot lock {path}: other runs keep replacing it")
