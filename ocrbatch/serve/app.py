"""The routes. One Converter behind them all: pages of concurrent requests share its batches.

    POST /v1/convert   a PDF or image (multipart field `file`, or the raw body) → its pages as JSON, Markdown
                       (Accept: text/markdown) or NDJSON lines as each page finishes (Accept:
                       application/x-ndjson); ?pages=1-3, ?priority=interactive|bulk; each page with its
                       confidence, and with ?format=lines (or Accept: application/json; format=lines) its lines
                       and boxes (the page JSON of pagejson.py)
    GET  /healthz      the process answers
    GET  /readyz       the engine is loaded (503 while loading, or if it failed to load)
    GET  /metrics      Prometheus text
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, AsyncIterator

import anyio
from starlette.applications import Starlette
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from ..config import PageSelection
from ..errors import DecodeError, EngineLoadError, UsageError
from ..records import PageResult, Status
from .config import ServeConfig
from .limits import PageSlots, TooLarge, authorized, read_body
from .metrics import CONTENT_TYPE, ServerMetrics
from .pages import convert_pages

log = logging.getLogger("ocrbatch")
NDJSON = "application/x-ndjson"
MARKDOWN = "text/markdown"
PRIORITIES = ("interactive", "bulk")


@dataclass
class ServerState:
    """What the routes share: the converter, the limits, the metrics, the engine's load outcome."""

    conv: Any  # ocrbatch.Converter
    config: ServeConfig
    slots: PageSlots
    metrics: ServerMetrics
    tmp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="ocrbatch-serve-")))
    load_error: str | None = None


def create_app(state: ServerState, lifespan=None) -> Starlette:
    routes = [
        Route("/healthz", partial(_healthz, state), methods=["GET"]),
        Route("/readyz", partial(_readyz, state), methods=["GET"]),
        Route("/metrics", partial(_metrics, state), methods=["GET"]),
        Route("/v1/convert", partial(_convert, state), methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = state
    return app


async def _healthz(state: ServerState, request: Request) -> Response:
    return _count(state, "/healthz", JSONResponse({"status": "alive"}))


async def _readyz(state: ServerState, request: Request) -> Response:
    if state.load_error is not None:
        return _count(state, "/readyz", JSONResponse({"ready": False, "error": state.load_error}, 503))
    ready = bool(state.conv.loaded)
    body = {"ready": ready, "engine": state.conv.engine}
    return _count(state, "/readyz", JSONResponse(body, 200 if ready else 503))


async def _metrics(state: ServerState, request: Request) -> Response:
    data = await asyncio.to_thread(state.metrics.render)
    return _count(state, "/metrics", Response(data, media_type=CONTENT_TYPE))


def _count(state: ServerState, route: str, response: Response) -> Response:
    state.metrics.requests.labels(route, str(response.status_code)).inc()
    return response


def _error(state: ServerState, status: int, message: str, reason: str | None = None,
           headers: dict[str, str] | None = None) -> Response:
    if reason is not None:
        state.metrics.rejected.labels(reason).inc()
    return _count(state, "/v1/convert", JSONResponse({"error": message}, status, headers=headers))


async def _convert(state: ServerState, request: Request) -> Response:
    started = time.monotonic()
    cfg = state.config
    if not authorized(request, cfg.token):
        return _error(state, 401, "a bearer token is needed: Authorization: Bearer TOKEN", "unauthorized",
                      {"WWW-Authenticate": "Bearer"})
    priority = request.query_params.get("priority", "interactive")
    if priority not in PRIORITIES:
        return _error(state, 400, f"priority {priority!r}: choose interactive or bulk", "bad_request")
    selection = None
    if request.query_params.get("pages"):
        try:
            selection = PageSelection.parse(request.query_params["pages"])
        except UsageError as exc:
            return _error(state, 400, str(exc).replace("--pages", "pages"), "bad_request")
    try:
        body = await read_body(request, cfg.max_upload_bytes)
    except TooLarge:
        return _error(state, 413, f"the upload is over --max-upload-mb {cfg.max_upload_mb:g} MB", "too_large")
    name, data = "upload", body
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        try:
            form = await MultiPartParser(request.headers, _once(body), max_files=1).parse()
        except MultiPartException as exc:
            return _error(state, 400, f"cannot read the multipart body: {exc.message}", "bad_request")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            await form.close()
            return _error(state, 400, "multipart upload without a file field named 'file'", "bad_request")
        name = PurePosixPath((upload.filename or "").replace("\\", "/")).name
        name = name if name not in ("", ".", "..") else "upload"
        data = await upload.read()
        await form.close()
    if state.load_error is not None:
        return _error(state, 503, f"the engine could not be loaded: {state.load_error}", "not_ready")
    if not state.slots.has_room():
        return _error(state, 503, f"busy: {cfg.max_queue} pages (--max-queue) are already waiting; retry later",
                      "queue_full", {"Retry-After": str(cfg.retry_after_s)})
    path = state.tmp / uuid.uuid4().hex / name  # the engine and messages see the upload's own name
    handed_over = False  # to the job, which removes the file when the response is over
    try:
        await asyncio.to_thread(_spill, path, data)
        del body, data  # the file holds it now; a long conversion need not keep it in memory
        try:
            count, multipage = await asyncio.to_thread(_probe, path, name)
        except DecodeError as exc:
            return _error(state, 422, f"{name}: {exc}", "unreadable")
        numbers = selection.select(count) if selection else list(range(1, count + 1))
        if not numbers:
            return _error(state, 422, f"{name}: pages {request.query_params['pages']} selects none of its "
                                      f"{count} page(s)", "unreadable")
        pages = convert_pages(state.conv, state.slots, path, name, numbers, priority, cfg.window,
                              lambda n: state.metrics.pages.labels("cancelled").inc(n))
        handed_over = True
        job = _Job(state, request, pages, path, name, multipage, priority, started)
        if wants_lines(request):
            job.lines = {"engine": state.conv.engine, "dpi": state.conv.dpi}
        accept = request.headers.get("accept", "")
        if NDJSON in accept:
            return StreamingResponse(job.ndjson(), media_type=NDJSON)
        return await job.whole(markdown=MARKDOWN in accept and "application/json" not in accept)
    finally:
        if not handed_over:
            _remove(path)


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


def _spill(path: Path, data: bytes) -> None:
    path.parent.mkdir()
    path.write_bytes(data)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _probe(path: Path, name: str) -> tuple[int, bool]:
    """Page count of an upload, as discovery finds it; DecodeError with the CLI's reason."""
    from ..pipeline import discover
    from ..records import Kind

    kind, count, _ = discover.probe(discover.Candidate(path, name, PurePosixPath(name)))
    return count, kind is Kind.PDF or (kind is Kind.TIFF and count > 1)


def page_entry(page: int, result: PageResult, lines: dict[str, Any] | None = None) -> dict[str, Any]:
    """A page in the JSON and NDJSON answers; `lines` (format=lines): the page JSON's fields (pagejson.py)."""
    conf = result.info.get("confidence")
    entry = {"page": page, "status": result.status.value, "markdown": result.markdown,
             "error": result.message, "timings": {k: round(v, 4) for k, v in result.timings.items()},
             "confidence": conf}
    if lines is not None and result.ref is not None and result.status in (Status.OK, Status.TRUNCATED):
        from ..pagejson import page_json

        entry["lines"] = page_json(result, lines["engine"], dpi=lines["dpi"] if result.ref.source.kind.value == "pdf"
                                   else None)
    return entry


def wants_lines(request: Request) -> bool:
    """`?format=lines`, or `Accept: application/json; format=lines` (or application/x-ndjson; format=lines)."""
    if request.query_params.get("format") == "lines":
        return True
    return any(p.strip().replace(" ", "") == "format=lines" for part in request.headers.get("accept", "").split(",")
               for p in part.split(";")[1:])


class _Job:
    """One request's pages on their way out; the client going away cancels the rest."""

    def __init__(self, state: ServerState, request: Request, pages: AsyncIterator[tuple[int, PageResult]],
                 path: Path, name: str, multipage: bool, priority: str, started: float) -> None:
        self.state, self.request, self.pages, self.path = state, request, pages, path
        self.name, self.multipage, self.priority, self.started = name, multipage, priority, started
        self.lines: dict[str, Any] | None = None  # format=lines: the page JSON in each page's entry

    def _seen(self, result: PageResult) -> None:
        m = self.state.metrics
        m.pages.labels(result.status.value).inc()
        if "batch_size" in result.timings:
            m.page_batch.observe(result.timings["batch_size"])

    def _done(self, status: int | str) -> None:
        self.state.metrics.requests.labels("/v1/convert", str(status)).inc()
        if status == 200:
            self.state.metrics.latency.labels(self.priority).observe(time.monotonic() - self.started)

    async def _collect(self) -> list[tuple[int, PageResult]]:
        out = []
        async for page, result in self.pages:
            self._seen(result)
            out.append((page, result))
        return out

    async def whole(self, markdown: bool) -> Response:
        collect = asyncio.ensure_future(self._collect())
        gone = asyncio.ensure_future(_disconnected(self.request))
        try:
            await asyncio.wait({collect, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not collect.done():  # the client left: cancel its pages (pages' finally)
                collect.cancel()
                await asyncio.gather(collect, return_exceptions=True)
                self._done(499)
                return Response(status_code=499)
            results = collect.result()
        except EngineLoadError as exc:
            self._done(503)
            return JSONResponse({"error": f"the engine could not be loaded: {exc}"}, 503)
        finally:
            gone.cancel()
            if not collect.done():  # we are being cancelled (the drain deadline passed)
                collect.cancel()
                await asyncio.gather(collect, return_exceptions=True)
            await self.pages.aclose()
            _remove(self.path)
        status = 200
        if all(r.status is Status.FAILED for _, r in results):
            status = 500 if any("infer_s" in r.timings for _, r in results) else 422
        self._done(status)
        if status != 200 and not self.multipage:
            return JSONResponse({"error": results[0][1].message}, status)
        if markdown:
            return PlainTextResponse(_markdown(results, self.multipage), status, media_type=MARKDOWN)
        return JSONResponse({"name": self.name, "priority": self.priority,
                             "failed": sum(r.status is Status.FAILED for _, r in results),
                             "pages": [page_entry(p, r, self.lines) for p, r in results]}, status)

    async def ndjson(self) -> AsyncIterator[bytes]:
        gone = asyncio.ensure_future(_disconnected(self.request))
        step: asyncio.Future | None = None
        failed = n = 0
        finished = False
        try:
            while True:
                step = asyncio.ensure_future(anext(self.pages))
                await asyncio.wait({step, gone}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():  # the client left
                    return
                try:
                    page, result = step.result()
                except StopAsyncIteration:
                    break
                self._seen(result)
                n += 1
                failed += result.status is Status.FAILED
                yield (json.dumps(page_entry(page, result, self.lines)) + "\n").encode()
            yield (json.dumps({"done": True, "name": self.name, "pages": n, "failed": failed}) + "\n").encode()
            finished = True
        finally:
            # Starlette may be cancelling us (it saw the disconnect first): finish the cleanup regardless.
            with anyio.CancelScope(shield=True):
                gone.cancel()
                if step is not None and not step.done():
                    step.cancel()  # the pages' own finally cancels what is left
                    await asyncio.gather(step, return_exceptions=True)
                await self.pages.aclose()
                _remove(self.path)
                self._done(200 if finished else 499)


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
