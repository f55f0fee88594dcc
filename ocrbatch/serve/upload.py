"""An upload on its way to disk, in bounded memory.

The body is read with the size limit (--max-upload-mb: refused from its Content-Length, or as soon as the
bytes read pass it) and a deadline for the whole body (--body-timeout-s, plus its bytes at MIN_BODY_RATE: a
pause longer than --body-timeout-s, or a trickle, is cut with 408), and written to the request's own
folder in the server's temporary folder a megabyte at a time: it is never whole in memory. A multipart
body's `file` part is spooled by Starlette's parser (up to 1 MB in memory, then an anonymous temporary file)
and copied there. The client's file name is only ever used made safe (`safe_name`); the folder is removed
with the request, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import unicodedata
import uuid
from pathlib import Path
from typing import IO, AsyncIterator

from starlette.datastructures import Headers
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

WRITE_CHUNK = 1 << 20  # bytes gathered before each write to disk
MAX_NAME_BYTES = 200  # a safe name's longest, in UTF-8 bytes (file systems allow 255; room for suffixes)
MIN_BODY_RATE = 10 * 1024  # bytes a second an upload must average (beyond --body-timeout-s) or be cut (408)
MAX_SUFFIX = 16  # a longer "extension" is not one: truncated with the rest
FALLBACK_NAME = "upload"


class TooLarge(Exception):
    """The body is over the size limit."""


class BadUpload(Exception):
    """A multipart body that cannot be read, or without a `file` part (400)."""


class Stalled(Exception):
    """The client's body did not arrive in time: a pause of --body-timeout-s, or slower than MIN_BODY_RATE
    overall (408)."""

    def __init__(self, received: int) -> None:
        super().__init__(f"no data for the body after {received} bytes")
        self.received = received


class Gone(Exception):
    """The client disconnected before its body was in (499)."""

    def __init__(self, received: int) -> None:
        super().__init__(f"the client went away after {received} bytes of the body")
        self.received = received


def safe_name(raw: str | None) -> str:
    """The client's file name made safe to show and to use as the last part of a path: the part after the
    last / or \\, without control, format and unassigned characters (NUL, newlines, bidi overrides, lone
    surrogates), trimmed, at most MAX_NAME_BYTES of UTF-8 (its suffix kept); "upload" when nothing is left."""
    name = (raw or "").replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if not unicodedata.category(ch).startswith("C")).strip()
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        stem, dot, suffix = name.rpartition(".")
        if not (dot and stem and len(suffix.encode("utf-8")) <= MAX_SUFFIX):
            stem, suffix = name, ""
        room = MAX_NAME_BYTES - (len(suffix.encode("utf-8")) + 1 if suffix else 0)
        stem = stem.encode("utf-8")[:room].decode("utf-8", "ignore").rstrip()
        name = f"{stem}.{suffix}" if suffix else stem
    return name if name.strip(".") else FALLBACK_NAME


class Upload:
    """The request's folder (`folder`) and the file in it (`path`, named after the upload's safe name)."""

    def __init__(self, root: Path) -> None:
        self.folder = root / uuid.uuid4().hex
        self.name = FALLBACK_NAME
        self.received = 0  # bytes of the body read so far

    @property
    def path(self) -> Path:
        return self.folder / self.name

    async def receive(self, request: Request, limit: int, idle_s: float) -> None:
        """Read the body onto disk. Raises TooLarge, Stalled, Gone, BadUpload, or OSError (disk full)."""
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise TooLarge
        await asyncio.to_thread(self.folder.mkdir, parents=True)
        async with contextlib.aclosing(self._chunks(request, limit, idle_s)) as chunks:
            if request.headers.get("content-type", "").startswith("multipart/form-data"):
                await self._multipart(request.headers, chunks)
            else:
                await self._write(chunks)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    async def _chunks(self, request: Request, limit: int, idle_s: float) -> AsyncIterator[bytes]:
        receive = request.receive
        loop = asyncio.get_running_loop()
        started = loop.time()
        while True:
            # The whole body's deadline: --body-timeout-s, plus the time its bytes so far take at the minimum
            # rate; never longer than one pause of --body-timeout-s. A client trickling a byte a second is cut
            # about --body-timeout-s after it began, whatever its pauses.
            left = min(idle_s, started + idle_s + self.received / MIN_BODY_RATE - loop.time())
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                message = await asyncio.wait_for(receive(), left)
            except asyncio.TimeoutError:
                raise Stalled(self.received) from None
            if message["type"] == "http.disconnect":
                raise Gone(self.received)
            chunk = message.get("body", b"")
            self.received += len(chunk)
            if self.received > limit:
                raise TooLarge
            if chunk:
                yield chunk
            if not message.get("more_body", False):
                return

    async def _write(self, chunks: AsyncIterator[bytes]) -> None:
        fh = await asyncio.to_thread(open, self.path, "wb")
        try:
            buffer = bytearray()
            async for chunk in chunks:
                buffer += chunk
                if len(buffer) >= WRITE_CHUNK:
                    await asyncio.to_thread(fh.write, buffer)
                    buffer = bytearray()
            if buffer:
                await asyncio.to_thread(fh.write, buffer)
        finally:
            await asyncio.to_thread(fh.close)

    async def _multipart(self, headers: Headers, chunks: AsyncIterator[bytes]) -> None:
        parser = MultiPartParser(headers, chunks, max_files=1, max_fields=16, max_part_size=64 * 1024)
        try:
            form = await parser.parse()
        except MultiPartException as exc:
            raise BadUpload(f"cannot read the multipart body: {exc.message}") from None
        try:
            upload = form.get("file")
            if upload is None or isinstance(upload, str):
                raise BadUpload("multipart upload without a file field named 'file'")
            self.name = safe_name(upload.filename)
            await asyncio.to_thread(self._copy, upload.file)
        finally:
            await form.close()

    def _copy(self, source: IO[bytes]) -> None:
        source.seek(0)
        with open(self.path, "wb") as fh:
            shutil.copyfileobj(source, fh, WRITE_CHUNK)
