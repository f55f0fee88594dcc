"""A PDF's streams, measured before PDFium parses any of them: a small file must not cost gigabytes.

PDFium inflates a page's content stream whole before it parses it (a 1 MB stream of zeros inflates to 1 GB,
2 GB of RSS), and decodes an image XObject whole at the size it declares. So before a PDF is opened each stream
is looked at once, in file order, within bounds:

    an image (/Subtype /Image)  its declared size, /Width x /Height x components x bits, at most MAX_IMAGE_BYTES
                                (read from its dictionary: nothing is decoded)
    any other Flate stream      (page contents, forms, fonts, object streams; not attached files, which PDFium
                                never decodes to render) inflated in pieces of PIECE bytes,
                                each layer of a /FlateDecode chain after the other, and counted, never held:
                                at most MAX_STREAM_BYTES

A stream over its bound fails the document as one record (DecodeError), naming the object. The file is read
through mmap and each stream found by its keywords (`stream` ... `endstream`), not its /Length, which may be an
indirect object or wrong. Other filters (LZW, run-length: ratios far below Flate's) are not inflated here;
nor is a stream that does not inflate cleanly (encrypted, damaged): PDFium reads what it can of those.
"""

from __future__ import annotations

import mmap
import re
import zlib
from pathlib import Path
from typing import Iterator

from .errors import DecodeError

MAX_STREAM_BYTES = 64 << 20  # 64 MiB: the most one content, form, font or object stream may inflate to
MAX_IMAGE_BYTES = 600_000_000  # an image XObject's declared size: 200 MP (--max-pixels' default) as RGB
PIECE = 1 << 20  # inflated a megabyte at a time
MAX_DICT = 64 << 10  # a stream's dictionary is looked for this far before its `stream` keyword

_OBJ = re.compile(rb"(\d+)\s+\d+\s+obj\b")
_FILTER = re.compile(rb"/Filter\s*(\[[^\]]*\]|/[A-Za-z0-9]+)")
_NAME = re.compile(rb"/([A-Za-z0-9]+)")
_INT = {key: re.compile(rb"/" + key + rb"\s+(\d+)(?!\s+\d+\s+R)") for key in
        (b"Width", b"Height", b"BitsPerComponent")}
_COMPONENTS = ((b"/DeviceCMYK", 4), (b"/DeviceRGB", 3), (b"/CalRGB", 3), (b"/Lab", 3), (b"/ICCBased", 4))


def check(path: Path) -> None:
    """Raise DecodeError when a stream of the PDF at `path` is over its bound."""
    with open(path, "rb") as fh:
        try:
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file: nothing to measure (PDFium says what it is)
            return
        with mm:
            for obj, head, start, end in _streams(mm):
                _check_one(mm, obj, head, start, end)


def _streams(mm: mmap.mmap) -> Iterator[tuple[str, bytes, int, int]]:
    """(object number or "?", dictionary text, data start, data end) for each stream, in file order."""
    pos = 0
    while True:
        at = mm.find(b"stream", pos)
        if at < 0:
            return
        pos = at + 6
        if mm[max(0, at - 3):at] == b"end":
            continue
        start = at + 6
        if mm[start:start + 2] == b"\r\n":
            start += 2
        elif mm[start:start + 1] in (b"\n", b"\r"):
            start += 1
        else:
            continue  # the word inside something else
        low = max(0, at - MAX_DICT)
        head_at = mm.rfind(b"obj", low, at)
        if head_at < 0:
            continue
        line = mm[max(low, head_at - 32):head_at + 3]
        found = list(_OBJ.finditer(line))
        obj = found[-1].group(1).decode() if found else "?"
        end = mm.find(b"endstream", start)
        end = len(mm) if end < 0 else end
        pos = max(pos, end)
        yield obj, mm[head_at:at], start, end


def _check_one(mm: mmap.mmap, obj: str, head: bytes, start: int, end: int) -> None:
    if re.search(rb"/Subtype\s*/Image\b", head):
        size = _declared(head)
        if size is not None and size > MAX_IMAGE_BYTES:
            raise DecodeError(f"an image of the PDF (object {obj}) declares {size / 1e6:,.0f} MB of pixels, over "
                              f"the {MAX_IMAGE_BYTES / 1e6:,.0f} MB ocrbatch decodes from one image")
        return
    if re.search(rb"/Type\s*/EmbeddedFile\b", head):  # an attachment: PDFium never decodes it to render
        return
    m = _FILTER.search(head)
    names = [n for n in _NAME.findall(m.group(1))] if m else []
    layers = 0
    for name in names:
        if name not in (b"FlateDecode", b"Fl"):
            break
        layers += 1
    if not layers:
        return
    total = 0
    for piece in _inflated(_raw(mm, start, end), layers):
        total += len(piece)
        if total > MAX_STREAM_BYTES:
            raise DecodeError(f"a stream of the PDF (object {obj}) inflates to over {MAX_STREAM_BYTES >> 20} MiB, "
                              "the most ocrbatch decodes from one stream (a decompression bomb?)")


def _declared(head: bytes) -> int | None:
    """An image's declared size in bytes, from its dictionary; None when a number is not given directly."""
    got = {key: _INT[key].search(head) for key in _INT}
    if got[b"Width"] is None or got[b"Height"] is None:
        return None
    bits = int(got[b"BitsPerComponent"].group(1)) if got[b"BitsPerComponent"] else 8
    components = next((n for name, n in _COMPONENTS if name in head), 1)
    return int(got[b"Width"].group(1)) * int(got[b"Height"].group(1)) * components * max(1, bits) // 8


def _raw(mm: mmap.mmap, start: int, end: int) -> Iterator[bytes]:
    for at in range(start, end, PIECE):
        yield mm[at:min(end, at + PIECE)]


def _inflated(pieces: Iterator[bytes], layers: int) -> Iterator[bytes]:
    """`pieces` through `layers` Flate decoders, each output at most PIECE bytes at a time; ends quietly where
    the data stops inflating (damaged, encrypted)."""
    for _ in range(layers):
        pieces = _inflate(pieces)
    return pieces


def _inflate(pieces: Iterator[bytes]) -> Iterator[bytes]:
    d = zlib.decompressobj()
    try:
        for data in pieces:
            while data and not d.eof:
                out = d.decompress(data, PIECE)
                data = d.unconsumed_tail
                if out:
                    yield out
                elif not data:
                    break
            if d.eof:
                return
    except zlib.error:
        return
