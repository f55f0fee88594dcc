"""A file probed before its pages are taken: its kind by its first bytes (not its name), its page count (a PDF's
checked against its page tree, its size and a cap: pdfium.py; its streams measured first: pdfscan.py; an
image's frames counted), its stat. Every way in probes so (discovery, the counter, the Python API, serve), and a
probe is remembered while the file's path and stat are the same: serve and submit() ask again for each chunk of
a document's pages, and a 3,000-frame TIFF's frames are counted once, not per call.
"""

from __future__ import annotations

import collections
import errno
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from .. import pdfium, pdfscan
from ..config import PageSelection
from ..errors import DecodeError
from ..images import frame_count, open_image
from ..records import Kind, PageResult


def sniff(head: bytes) -> Kind | None:
    """The document kind from a file's first bytes."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Kind.PNG
    if head.startswith(b"\xff\xd8\xff"):
        return Kind.JPEG
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return Kind.TIFF
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return Kind.WEBP
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return Kind.GIF
    if head[:2] == b"BM" and len(head) >= 26:
        return Kind.BMP
    if b"%PDF-" in head[:1024]:  # the spec allows junk before the header
        return Kind.PDF
    return None


def _describe(head: bytes) -> str:
    if not head:
        return "empty file (0 bytes)"
    sample = head[:512]
    try:
        sample.decode("utf-8")
        return "not a PDF or image: it holds plain text"
    except UnicodeDecodeError:
        return "not a PDF or image this tool can read"


def special_kind(mode: int) -> str | None:
    """What a file that is neither a regular file nor a folder is, in words; None for those two."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    for test, what in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return what
    return "not a regular file"


def stat_error(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop (the link points back to itself)"
    return f"cannot read: {exc.strerror or exc}"


@dataclass(frozen=True)
class Probed:
    """What a probe found: the kind by content, the pages it holds (a PDF: those its page tree really has), the
    pages it claims (a PDF's /Count; more than `count` when its tree is damaged), its stat."""

    kind: Kind
    count: int
    claimed: int
    st: os.stat_result

    def missing(self, display: str, path: Path, pages: PageSelection | None) -> PageResult | None:
        """The one failed record for the pages a PDF claims and does not hold, when `pages` takes any of them
        (None: it holds them all)."""
        if self.claimed <= self.count or (pages is not None and not pages.select(self.claimed)[-1:] > [self.count]):
            return None
        return PageResult.failed_file(path, f"{display} pages {self.count + 1}-{self.claimed}",
                                      f"the PDF claims {self.claimed:,} pages, but its page tree holds "
                                      f"{self.count:,}: the rest cannot be read (a damaged page tree)")


PROBES_KEPT = 64  # probes remembered by file (path and stat): serve and submit ask again per chunk of pages
_probes: "collections.OrderedDict[tuple, Probed]" = collections.OrderedDict()
_probes_lock = threading.Lock()


def probe(path: Path) -> Probed:
    """The file at `path` probed (remembered while its path, inode, size and times are the same: a 3,000-frame TIFF's frames
    are counted once, not per call); raises DecodeError with a user-facing reason."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise DecodeError(stat_error(exc)) from exc
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _probes_lock:
        known = _probes.get(key)
        if known is not None:
            _probes.move_to_end(key)
            return known
    got = _uncached(path)
    if (got.st.st_ino, got.st.st_size, got.st.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns):
        with _probes_lock:
            _probes[key] = got
            while len(_probes) > PROBES_KEPT:
                _probes.popitem(last=False)
    return got


def _uncached(path: Path) -> Probed:
    try:
        st = os.stat(path)
        special = special_kind(st.st_mode)
        if special:  # replaced since it was found
            raise DecodeError(f"{special}, not a document: refused without opening it")
        # O_NONBLOCK: should it have become a FIFO after all, opening it must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise DecodeError("not a regular file: refused")
            head = fh.read(1024)
    except OSError as exc:
        raise DecodeError(stat_error(exc)) from exc
    kind = sniff(head)
    if kind is None:
        raise DecodeError(_describe(head))
    if kind is Kind.PDF:
        pdfscan.check(path)  # no stream over its bound reaches PDFium
        tree = pdfium.page_tree(path, st.st_size)
        if tree.held == 0:
            raise DecodeError("the PDF has no pages" if tree.claimed == 0 else
                              f"the PDF claims {tree.claimed:,} pages, but its page tree holds none")
        return Probed(kind, tree.held, tree.claimed, st)
    from PIL import UnidentifiedImageError

    try:
        with open_image(path) as im:
            count = frame_count(im, kind)
    except (UnidentifiedImageError, OSError, ValueError, EOFError, SyntaxError) as exc:
        raise DecodeError(f"cannot read the {kind.value.upper()} image: {exc}") from exc
    return Probed(kind, count, count, st)
