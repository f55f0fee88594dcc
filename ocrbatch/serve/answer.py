"""One admitted request's answer: whole (JSON; or the document in an output format: Markdown with Accept:
text/markdown, plain text, hOCR, a searchable PDF, each made by its renderer, render/) or streamed (NDJSON with
Accept: application/x-ndjson, one line per page as it finishes). The job owns the request's ticket and
upload from the moment its pages are counted; `close()`, reached however the answer ends (sent, the client
gone, the drain deadline, an error), cancels the pages not started, gives the slots back and removes the
upload."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any, AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import DecodeError, EngineLoadError
from ..records import PageRef, PageResult, Status
from ..render import RENDERERS, DocumentPage, Page, Refusal
from .accept import MARKDOWN, NDJSON
from .guard import ABORT
from .limits import Ticket
from .upload import Upload

if TYPE_CHECKING:
    from .state import ServerState

ROUTE = "/v1/convert"
# A streamed answer's client that takes no bytes for this long is gone (a peer dead without closing: power off,
# a NAT entry dropped): its stream ends and its pages are cancelled, rather than holding their slots until TCP
# gives up (15 minutes and more). A client that closes is seen at once; this bounds the one that cannot say so.
SEND_STALL_S = 60.0

log = logging.getLogger("ocrbatch")


def page_entry(page: int, result: PageResult, lines: dict[str, Any] | None = None) -> dict[str, Any]:
    """A page in the JSON and NDJSON answers, with its confidence; `lines` (format=lines: the engine's name and
    the PDF dpi) adds its page JSON (pagejson.py)."""
    entry = {"page": page, "status": result.status.value, "markdown": result.markdown,
             "error": result.message, "timings": {k: round(v, 4) for k, v in result.timings.items()},
             "confidence": result.confidence.as_dict() if result.confidence is not None else None}
    if lines is not None and result.ref is not None and result.status in (Status.OK, Status.TRUNCATED):
        from ..pagejson import page_json

        dpi = result.info.get("dpi", lines["dpi"]) if result.ref.source.kind.value == "pdf" else None
        entry["lines"] = page_json(result, lines["engine"], dpi=dpi)
    return entry


class Job:
    """One request's pages on their way out; the client going away cancels the rest. Owns the request's
    ticket and upload: `close()` (always reached) cancels what is left, gives the slots back and removes
    the upload."""

    def __init__(self, state: ServerState, request: Request, pages: AsyncIterator[tuple[int, PageResult]],
                 ticket: Ticket, upload: Upload, multipage: bool, priority: str, started: float) -> None:
        self.state, self.request, self.pages, self.ticket, self.upload = state, request, pages, ticket, upload
        self.name, self.multipage, self.priority, self.started = upload.name, multipage, priority, started
        self.closed = False
        self.lines: dict[str, Any] | None = None  # format=lines: what each page's entry needs for its page JSON

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with anyio.CancelScope(shield=True):
            await self.pages.aclose()  # cancels the pages not started (pages.py's finally)
        self.ticket.close()
        self.upload.remove()
        self.state.active -= 1

    def _seen(self, result: PageResult) -> None:
        m = self.state.metrics
        m.pages.labels(result.status.value).inc()
        if "batch_size" in result.timings:
            m.page_batch.observe(result.timings["batch_size"])

    def _done(self, status: int | str) -> None:
        self.state.metrics.requests.labels(ROUTE, str(status)).inc()
        if status == 200:
            self.state.metrics.latency.labels(self.priority).observe(time.monotonic() - self.started)

    async def _collect(self) -> list[tuple[int, PageResult]]:
        out = []
        async for page, result in self.pages:
            self._seen(result)
            out.append((page, result))
        return out

    async def whole(self, fmt: str | None = None) -> Response:
        """The whole answer: JSON, or the document in format `fmt` (a name in render.RENDERERS)."""
        collect = asyncio.ensure_future(self._collect())
        gone = asyncio.ensure_future(_disconnected(self.request))
        document: tuple[bytes | None, str | None] = (None, None)
        try:
            await asyncio.wait({collect, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not collect.done():  # the client left: cancel its pages (pages' finally)
                collect.cancel()
                await asyncio.gather(collect, return_exceptions=True)
                self._done(499)
                return Response(status_code=499)
            results = collect.result()
            if fmt not in (None, "md") and any(r.ok and r.ref is not None for _, r in results):
                # made before close(): a PDF is made from the upload, which close() removes
                document = await asyncio.to_thread(self._document, results, fmt)
        except EngineLoadError as exc:
            self._done(503)
            return JSONResponse({"error": f"the engine could not be loaded: {exc}"}, 503)
        finally:
            gone.cancel()
            if not collect.done():  # we are being cancelled (the drain deadline passed)
                collect.cancel()
                await asyncio.gather(collect, return_exceptions=True)
            await self.close()
        status = 200
        if all(r.status is Status.FAILED for _, r in results):
            # The engine's side (the page reached it: timed; or it got no result) is 500; unreadable is 422.
            engine_side = any("infer_s" in r.timings or "decode_s" in r.timings or r.info.get("server")
                              for _, r in results)
            status = 500 if engine_side else 422
        body, why = document
        if why is not None:  # the format refuses every page that was read (hocr: no line boxes)
            status = 422
        self._done(status)
        if status != 200 and (not self.multipage or fmt not in (None, "md")):
            return JSONResponse({"error": f"{self.name}: {why}" if why else results[0][1].message}, status)
        if fmt == "md":
            return PlainTextResponse(_markdown(results, self.multipage), status, media_type=MARKDOWN)
        if fmt is not None:
            return Response(body, status, media_type=RENDERERS[fmt].media)
        return JSONResponse({"name": self.name, "priority": self.priority,
                             "failed": sum(r.status is Status.FAILED for _, r in results),
                             "pages": [page_entry(p, r, self.lines) for p, r in results]}, status)

    def _document(self, results: list[tuple[int, PageResult]], fmt: str) -> tuple[bytes | None, str | None]:
        """The pages in format `fmt`, as one document: (its bytes, None), or (None, why not) when the format
        refuses every page (hocr: no line boxes) or the upload cannot be read again (pdf)."""
        from ..pagerecord import record_of

        renderer = RENDERERS[fmt]
        dpi = self.state.conv.dpi
        done = [(p, r) for p, r in results if r.ok and r.ref is not None]
        if renderer.per_document:
            assert renderer.document is not None
            source = done[0][1].ref.source  # type: ignore[union-attr]
            pages = [DocumentPage(p, record_of(r) if r.ok else None, r.info.get("path") == "text-layer")
                     for p, r in results]

            def image_of(number: int) -> Any:
                from ..pipeline.decode import decode_page

                return decode_page(PageRef(source, number), dpi, pdfs=None).image  # type: ignore[arg-type]

            try:
                return renderer.document(source, pages, image_of), None
            except DecodeError as exc:
                return None, f"cannot make its {fmt}: {exc}"
        parts: list[tuple[int, bytes | None, str | None]] = []
        refused: list[str] = []
        for page, r in results:
            if not (r.ok and r.ref is not None):
                parts.append((page, None, r.error or "failed"))
                continue
            conf = r.confidence.as_dict() if r.confidence is not None else None
            try:
                parts.append((page, renderer.page(Page(record_of(r), self.name, page, r.status.value,
                                                       self.state.conv.engine, conf)), None))
            except Refusal as exc:
                parts.append((page, None, str(exc)))
                refused.append(str(exc))
        if len(refused) == len(done):
            return None, refused[0]
        if not self.multipage and parts[0][1] is not None:
            return parts[0][1], None
        assert renderer.join is not None
        return renderer.join(parts), None

    async def ndjson(self) -> AsyncIterator[bytes]:
        """One line per page as it finishes, then {"done": true, ...}; a stream cut short by the drain
        deadline or an engine that cannot load ends with {"done": false, "error": ...} instead."""
        gone = asyncio.ensure_future(_disconnected(self.request))
        over = asyncio.ensure_future(self.state.drained.wait())
        step: asyncio.Future | None = None
        failed = n = 0
        ended: int | None = None  # the status the request is counted with
        try:
            while True:
                step = asyncio.ensure_future(anext(self.pages))
                await asyncio.wait({step, gone, over}, return_when=asyncio.FIRST_COMPLETED)
                if gone.done():  # the client left
                    return
                error = None
                if not step.done():
                    error = self.state.drain_message()
                else:
                    try:
                        page, result = step.result()
                    except StopAsyncIteration:
                        break
                    except EngineLoadError as exc:
                        error = f"the engine could not be loaded: {exc}"
                if error is not None:
                    ended = 503
                    yield _line({"done": False, "name": self.name, "pages": n, "failed": failed, "error": error})
                    return
                self._seen(result)
                n += 1
                failed += result.status is Status.FAILED
                yield _line(page_entry(page, result, self.lines))
            ended = 200
            yield _line({"done": True, "name": self.name, "pages": n, "failed": failed})
        finally:
            # Starlette may be cancelling us (it saw the disconnect first): finish the cleanup regardless.
            with anyio.CancelScope(shield=True):
                gone.cancel()
                over.cancel()
                if step is not None and not step.done():
                    step.cancel()  # the pages' own finally cancels what is left
                    await asyncio.gather(step, return_exceptions=True)
                elif step is not None and not step.cancelled():
                    step.exception()  # the last page came as the client left: its StopAsyncIteration is seen
                await self.close()
                self._done(ended if ended is not None else 499)


class Streamed(StreamingResponse):
    """The NDJSON answer; its job is closed however the response ends, even if the stream never started
    (Starlette may cancel it before its first line when it sees the client leave)."""

    def __init__(self, job: Job) -> None:
        super().__init__(job.ndjson(), media_type=NDJSON)
        self.job = job

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_or_gone(message: Any) -> None:
            with anyio.move_on_after(SEND_STALL_S) as waited:  # only the wait for room is cut: nothing half sent
                await send(message)
            if waited.cancelled_caught:
                raise _Stalled()

        try:
            await super().__call__(scope, receive, send_or_gone)
        except _Stalled:
            client = scope.get("client")
            log.warning("POST %s from %s: the client took no bytes for %g s; taken as gone (499)", ROUTE,
                        f"{client[0]}:{client[1]}" if client else "a client", SEND_STALL_S)
            abort = (scope.get("extensions") or {}).get(ABORT)
            if abort is not None:  # dropped, bytes buffered and all (a close would wait for them to be sent)
                abort()
                await asyncio.sleep(0)  # its connection_lost runs first: the server sees a client gone, not an
                # answer left unfinished by the app
        finally:
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()  # left at a line not sent: its finally runs now
                if not self.job.closed:  # never started: its finally never ran
                    await self.job.close()
                    self.job._done(499)


class _Stalled(Exception):
    """A streamed answer's client took no bytes for SEND_STALL_S."""


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body is read already, so the next message is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _markdown(results: list[tuple[int, PageResult]], multipage: bool) -> str:
    parts = []
    for page, r in results:
        head = f"<!-- page {page} -->\n\n" if multipage else ""
        body = r.markdown if r.status is not Status.FAILED else f"<!-- failed: {r.message} -->\n"
        parts.append(head + body)
    return "\n".join(parts)
