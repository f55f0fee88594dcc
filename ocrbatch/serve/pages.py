"""One request's pages: submitted to the Converter a window at a time, each holding a page slot (through the
request's ticket) until its result is in, and yielded in page order. Leaving early (a client gone, a
cancelled task) cancels the pages not yet started and frees their slots.

Every page submitted comes out exactly once: with its result, or as a failed page saying why when its
future raised (a bug in a worker, the converter closing); only an engine that cannot load at all ends the
request instead (EngineLoadError)."""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from ..errors import EngineLoadError, error_line
from ..records import PageResult, Status
from .limits import Ticket

REFILL = 2  # a request's next pages are submitted once 1/REFILL of its window is free (and no result is waiting)


async def convert_pages(conv: Any, ticket: Ticket, path: Path, name: str, numbers: list[int], priority: str,
                        window: int, cancelled: Callable[[int], None]) -> AsyncIterator[tuple[int, PageResult]]:
    """(page number, result) for each of `numbers`, in order; each page takes a slot of `ticket` (waiting for
    one if needed) before it is submitted, and gives it back when it is done or cancelled. At most `window`
    pages of the request are submitted and unfinished at a time. The ticket is closed once the last page is
    submitted, or when the generator ends."""
    loop = asyncio.get_running_loop()
    pending: deque[tuple[int, Future]] = deque()
    left = iter(numbers)
    running = 0  # this request's pages submitted and not finished

    def finished(_: Future) -> None:  # on a worker thread, or wherever the future was cancelled
        try:
            loop.call_soon_threadsafe(_free)
        except RuntimeError:  # the loop is closed: the server is gone
            pass

    def _free() -> None:
        nonlocal running
        running -= 1
        ticket.give(1)

    def adopt(future: Future) -> Future:
        nonlocal running
        running += 1
        future.add_done_callback(finished)  # its slot comes back when it is done or cancelled
        return future

    def submitted_late(taken: int, task: asyncio.Future) -> None:  # we left while the submit was under way
        if task.cancelled() or task.exception() is not None:
            ticket.give(taken)
            return
        futures = _as_list(task.result())
        if len(futures) != taken:  # the upload was removed as it was read: one failed future for the chunk
            conv.cancel(futures)
            ticket.give(taken)  # every slot taken comes back, whatever the count (none adopted)
            return
        n = conv.cancel([adopt(f) for f in futures])
        if n:
            cancelled(n)

    try:
        number = next(left, None)
        while number is not None or pending:
            # Finished pages go out before anything more is submitted: a submit may take longer than pages take
            # to finish (a long multi-frame file), and submitting while slots are free would hold every result
            # back until the last page is in (issue 39). Then one submit, and results again. A submit costs per
            # call (it opens the file), so the window is refilled once half of it is free, not page by page.
            head_done = bool(pending) and pending[0][1].done()
            if number is not None and running <= window // REFILL and not head_done:
                # One submit for as many pages as have slots free now (one opening of the file), at least one.
                await ticket.take()
                chunk = [number]
                number = next(left, None)
                while number is not None and running + len(chunk) < window and ticket.try_take():
                    chunk.append(number)
                    number = next(left, None)
                submit = partial(conv.submit, path, priority, pages=",".join(map(str, chunk)), name=name)
                task = loop.run_in_executor(None, submit)  # it opens the file: not on the event loop
                try:
                    got = await asyncio.shield(task)
                except asyncio.CancelledError:
                    task.add_done_callback(partial(submitted_late, len(chunk)))
                    raise
                except BaseException:
                    ticket.give(len(chunk))
                    raise
                futures = _as_list(got)
                if len(futures) != len(chunk):  # the file read differently this time: its pages still answer
                    conv.cancel(futures)
                    ticket.give(len(chunk))
                    futures = [_resolved(failed(name, p, f"expected page {p}, the file gave {len(futures)} "
                                                         "result(s)")) for p in chunk]
                else:
                    futures = [adopt(f) for f in futures]
                pending.extend(zip(chunk, futures))
                if number is None:
                    ticket.close()  # nothing left to submit: the slots go back as the pages finish
                continue
            page, future = pending[0]  # there is one: a page is running (running <= len(pending)), or done
            try:
                result = await asyncio.shield(asyncio.wrap_future(future))
            except EngineLoadError:
                raise
            except asyncio.CancelledError:
                if not future.cancelled():  # we are cancelled (a client gone, the drain over)
                    raise
                result = failed(name, page, "cancelled by the server")
            except Exception as exc:  # noqa: BLE001 - the page still gets its one result
                result = failed(name, page, error_line(exc))
            pending.popleft()
            yield page, result
    finally:
        ticket.close()
        if pending:
            n = conv.cancel([f for _, f in pending])
            if n:
                cancelled(n)


def failed(name: str, page: int, error: str) -> PageResult:
    """A page that got no result from the engine: failed, on the server's side (`info["server"]`)."""
    return PageResult(ref=None, status=Status.FAILED, error=error, source_display=f"{name} page {page}",
                      info={"server": True})


def _resolved(result: PageResult) -> Future:
    future: Future = Future()
    future.set_result(result)
    return future


def _as_list(got: Future | list[Future]) -> list[Future]:
    return got if isinstance(got, list) else [got]
