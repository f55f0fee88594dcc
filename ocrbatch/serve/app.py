"""The routes. One Converter behind them all: pages of concurrent requests share its batches.

    POST /v1/convert   a PDF or image (multipart field `file`, or the raw body) → its pages as JSON, NDJSON lines
                       as each page finishes (Accept: application/x-ndjson), or one document in an output format
                       (Accept: text/markdown, text/plain, text/vnd.hocr+html, application/pdf; or ?format=md,
                       txt, hocr, pdf: accept.py); ?pages=1-3, ?priority=interactive|bulk; each page with its
                       confidence, and with ?format=lines (or Accept: application/json; format=lines) its lines
                       and boxes (the page JSON of pagejson.py)
    GET  /healthz      the process answers
    GET  /readyz       the engine is loaded (503 while loading, or if it failed to load)
    GET  /metrics      Prometheus text

A conversion, in order: refused at once if unauthorized, malformed, the server is not ready, shutting down or
over --max-connections; admitted only if a page slot is free now (else 503, before the body is read: see
limits.py); its body read onto disk (upload.py); its pages counted; then converted (pages.py) and answered
whole or streamed (answer.py). Whatever ends it (an answer, an error, the client leaving, the drain deadline), its
slots go back and its temporary folder is removed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..config import PageSelection
from ..errors import DecodeError, UsageError
from .accept import NDJSON, Choice, Refused, choose
from .answer import ROUTE, Job, Streamed
from .limits import Ticket, authorized
from .metrics import CONTENT_TYPE
from .pages import convert_pages
from .state import ServerState
from .upload import MIN_BODY_RATE, BadUpload, Gone, Stalled, TooLarge, Upload

log = logging.getLogger("ocrbatch")
PRIORITIES = ("interactive", "bulk")


def create_app(state: ServerState, lifespan=None) -> Starlette:
    routes = [
        Route("/healthz", partial(_healthz, state), methods=["GET"]),
        Route("/readyz", partial(_readyz, state), methods=["GET"]),
        Route("/metrics", partial(_metrics, state), methods=["GET"]),
        Route(ROUTE, partial(_convert, state), methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = state
    return app


async def _healthz(state: ServerState, request: Request) -> Response:
    return _count(state, "/healthz", JSONResponse({"status": "alive"}))


async def _readyz(state: ServerState, request: Request) -> Response:
    if state.broken is not None:
        return _count(state, "/readyz", JSONResponse({"ready": False, "error": state.broken}, 503))
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
    return _count(state, ROUTE, JSONResponse({"error": message}, status, headers=headers))


def _busy(state: ServerState, message: str, reason: str) -> Response:
    return _error(state, 503, message, reason, {"Retry-After": str(state.config.retry_after_s)})


def _refused(state: ServerState, request: Request) -> Response | None:
    """The answer to a request refused before any work (nothing read, nothing held), or None."""
    cfg = state.config
    if not authorized(request, cfg.token):
        return _error(state, 401, "a bearer token is needed: Authorization: Bearer TOKEN", "unauthorized",
                      {"WWW-Authenticate": "Bearer"})
    priority = request.query_params.get("priority", "interactive")
    if priority not in PRIORITIES:
        return _error(state, 400, f"priority {priority!r}: choose interactive or bulk", "bad_request")
    try:
        choose(request.headers.get("accept"), request.query_params.get("format"))
    except Refused as exc:
        return _error(state, exc.status, str(exc), "bad_request" if exc.status == 400 else "not_acceptable")
    if request.query_params.get("pages"):
        try:
            PageSelection.parse(request.query_params["pages"])
        except UsageError as exc:
            return _error(state, 400, str(exc).replace("--pages", "pages"), "bad_request")
    if state.broken is not None:
        return _error(state, 503, state.broken, "not_ready")
    if state.draining:
        return _busy(state, "the server is shutting down; retry on another instance", "draining")
    if state.guard.over():
        return _busy(state, f"busy: more than {state.guard.limit} connections (--max-connections) are open; "
                            "retry later", "connections")
    return None


async def _convert(state: ServerState, request: Request) -> Response:
    started = time.monotonic()
    refused = _refused(state, request)
    if refused is not None:
        return refused
    ticket = state.slots.admit()  # the check and the take in one step: a burst cannot pass --max-queue
    if ticket is None:
        return _busy(state, f"busy: {state.config.max_queue} pages (--max-queue) are already held; retry later",
                     "queue_full")
    state.active += 1  # until the request's end: _admitted's finally, or its job's close()
    work = asyncio.ensure_future(_admitted(state, request, ticket, Upload(state.tmp), started))
    over = asyncio.ensure_future(state.drained.wait())
    try:
        await asyncio.wait({work, over}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        over.cancel()
        if not work.done():  # the drain is over (or we are cancelled): the work's own finally cleans up
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    if not work.cancelled():
        return work.result()
    return _error(state, 503, state.drain_message(), "drained")


async def _admitted(state: ServerState, request: Request, ticket: Ticket, upload: Upload,
                    started: float) -> Response:
    """An admitted request: its body onto disk, its pages counted, then converted (the job owns the ticket
    and the upload from then on)."""
    cfg = state.config
    handed_over = False
    try:
        try:
            await upload.receive(request, cfg.max_upload_bytes, cfg.body_timeout_s)
        except TooLarge:
            return _error(state, 413, f"the upload is over --max-upload-mb {cfg.max_upload_mb:g} MB", "too_large")
        except BadUpload as exc:
            return _error(state, 400, str(exc), "bad_request")
        except Stalled as exc:
            state.metrics.cut.labels("body_timeout").inc()
            log.info("POST %s from %s: body too slow, cut (%s)", ROUTE, _client(request), exc)
            return _error(state, 408, f"the body did not arrive in time (a pause of --body-timeout-s "
                                      f"{cfg.body_timeout_s:g} s, or slower than {MIN_BODY_RATE // 1024} KB/s "
                                      f"after it): cut after {exc.received} bytes", None, {"Connection": "close"})
        except Gone as exc:
            log.warning("POST %s from %s: %s; counted as 499", ROUTE, _client(request), exc)
            return _count(state, ROUTE, Response(status_code=499))
        except OSError as exc:
            log.error("cannot store an upload in %s: %s", state.tmp, exc)
            return _busy(state, f"the server cannot store the upload now ({exc.strerror or exc})", "storage")
        name = upload.name
        try:
            count, multipage = await asyncio.to_thread(_probe, upload.path, name)
        except DecodeError as exc:
            return _error(state, 422, f"{name}: {exc}", "unreadable")
        pages_param = request.query_params.get("pages")
        numbers = PageSelection.parse(pages_param).select(count) if pages_param else list(range(1, count + 1))
        if not numbers:
            return _error(state, 422, f"{name}: pages {pages_param} selects none of its {count} page(s)",
                          "unreadable")
        priority = request.query_params.get("priority", "interactive")
        pages = convert_pages(state.conv, ticket, upload.path, name, numbers, priority, cfg.window,
                              lambda n: state.metrics.pages.labels("cancelled").inc(n))
        job = Job(state, request, pages, ticket, upload, multipage, priority, started)
        answer: Choice = choose(request.headers.get("accept"), request.query_params.get("format"))
        if answer.lines:
            job.lines = {"engine": state.conv.engine, "dpi": state.conv.dpi}
        handed_over = True
        if answer.media == NDJSON:
            return Streamed(job)
        return await job.whole(answer.format)
    finally:
        if not handed_over:
            ticket.close()
            upload.remove()
            state.active -= 1


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "a client"


def _probe(path: Path, name: str) -> tuple[int, bool]:
    """Page count of an upload, as discovery finds it; DecodeError with the CLI's reason."""
    from ..pipeline import discover
    from ..records import Kind

    kind, count, _ = discover.probe(discover.Candidate(path, name, PurePosixPath(name)))
    return count, kind is Kind.PDF or (kind is Kind.TIFF and count > 1)
