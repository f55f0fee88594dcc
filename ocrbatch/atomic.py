"""Files in the output folder: written whole or not at all, readable as the umask says, and the write errors
that stop a run (disk full and its kind) told apart from those that fail one page.

Every temporary file is named `.NAME.TOKEN.XXXXXXXX.tmp` beside its target, NAME cut to its first
TEMP_NAME_CHARS characters, so that a target whose name is as long as the file system allows (255 bytes) still
gets a temporary file whose name fits; TOKEN is this process's (RUN_TOKEN, also in its lock file). A clean run
leaves none; a run killed with `kill -9` may, and the next run into the folder removes them
(`remove_temporaries`) when it takes over the dead run's lock: all of them, or with --shard, where other parts
may be writing into the folder meanwhile, only those with the dead run's token.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import tempfile
import threading
from pathlib import Path

from . import safefiles

# Errors every later write would hit too: the run stops (exit 7) instead of failing page after page.
FATAL_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})
_TEMPORARY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")
TOKEN_CHARS = 8  # hex digits of RUN_TOKEN
RUN_TOKEN = secrets.token_hex(TOKEN_CHARS // 2)  # this process's: in its temporary files' names and its lock
# At most 4 bytes a character in UTF-8: 1 + 4 * 40 + 14 bytes stays well under the usual 255-byte limit.
TEMP_NAME_CHARS = 40

_mode_lock = threading.Lock()
_file_mode: int | None = None
_in_flight: set[str] = set()  # temporary files being written now (removed by a hard exit)


def is_fatal(exc: OSError) -> bool:
    return exc.errno in FATAL_WRITE_ERRNOS


def file_mode() -> int:
    """The mode a plain `open(..., "w")` would give a new file: 0o666 less the umask (read once)."""
    global _file_mode
    with _mode_lock:
        if _file_mode is None:
            umask = _read_umask()
            _file_mode = 0o666 & ~umask
        return _file_mode


def _read_umask() -> int:
    try:  # Linux ≥ 4.7 shows it without changing it (os.umask would, for every thread, for a moment)
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def temporary(path: Path) -> tuple[int, str]:
    """A new temporary file beside `path` (fd, name), with the umask's mode, registered as in flight."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:TEMP_NAME_CHARS]}.{RUN_TOKEN}.", suffix=".tmp",
                               dir=path.parent)
    _in_flight.add(tmp)
    try:
        os.fchmod(fd, file_mode())
    except OSError:
        pass
    return fd, tmp


def finish(tmp: str, path: Path) -> None:
    os.replace(tmp, path)
    _in_flight.discard(tmp)


def discard(tmp: str) -> None:
    _in_flight.discard(tmp)
    Path(tmp).unlink(missing_ok=True)


def make_folders(folder: Path) -> None:
    """`folder.mkdir(parents=True, exist_ok=True)` made from the top down in a loop: Path.mkdir and os.makedirs
    recurse once per missing folder, and an input tree 1,500 folders deep is mirrored as deep."""
    missing: list[Path] = []
    at = folder
    while not at.is_dir() and at != at.parent:
        missing.append(at)
        at = at.parent
    for part in reversed(missing):
        try:
            part.mkdir()
        except FileExistsError:
            if not part.is_dir():
                raise


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a reader sees the old file or the new one, never half of one. What is at
    `path` must be a regular file or nothing (safefiles: UsageError otherwise, nothing replaced)."""
    safefiles.check_file(path, "the output file", usage=False)
    make_folders(path.parent)
    fd, tmp = temporary(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        finish(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def remove_in_flight() -> None:
    """Remove temporary files being written right now; for an exit that cannot wait for them."""
    for tmp in list(_in_flight):
        try:
            os.unlink(tmp)
        except OSError:
            pass


def remove_temporaries(out_dir: Path, token: str | None = None) -> int:
    """Remove temporary files a killed run left anywhere below `out_dir` (with `token`: only that run's); how
    many were removed."""
    removed = 0
    mark = None if token is None else f".{token}."
    for dirpath, _dirnames, filenames in os.walk(out_dir):
        for name in filenames:
            if _TEMPORARY.match(name) and (mark is None or mark in name[1:]):
                try:
                    os.unlink(os.path.join(dirpath, name))
                    removed += 1
                except OSError:
                    pass
    return removed
