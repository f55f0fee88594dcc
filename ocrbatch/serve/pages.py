"""One request's pages: submitted to the Converter a window at a time, each holding a page slot until its
result is in, and yielded in page order. Leaving early (a client gone, a cancelled task) cancels the pages
not yet started and frees their slots."""

from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from ..records import PageResult
from .limits import PageSlots


async def convert_pages(conv: Any, slots: PageSlots, path: Path, name: str, numbers: list[int], priority: str,
                        window: int, cancelled: Callable[[int], None]) -> AsyncIterator[tuple[int, PageResult]]:
    """(page number, result) for each of `numbers`, in order; each page takes a slot (waiting for one) before
    it is submitted, and gives it back when it is done or cancelled. At most `window` pages of the request
    are submitted and unfinished at a time."""
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
        slots.give(1)

    def adopt(future: Future) -> Future:
        nonlocal running
        running += 1
        future.add_done_callback(finished)  # its slot comes back when it is done or cancelled
        return future

    def submitted_late(taken: int, task: asyncio.Future) -> None:  # we left while the submit was under way
        if task.cancelled() or task.exception() is not None:
            slots.give(taken)
        else:
            futures = [adopt(f) for f in _as_list(task.result())]
            n = conv.cancel(futures)
            if n:
                cancelled(n)

    try:
        number = next(left, None)
        while number is not None or pending:
            while number is not None and running < window:
                # One submit for as many pages as have slots free now (one opening of the file), at least one.
                await slots.take()
                chunk = [number]
                number = next(left, None)
                while number is not None and running + len(chunk) < window and slots.try_take():
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
                    slots.give(len(chunk))
                    raise
                pending.extend(zip(chunk, (adopt(f) for f in _as_list(got)), strict=True))
            page, future = pending[0]
            result = await asyncio.shield(asyncio.wrap_future(future))
            pending.popleft()
            yield page, result
    finally:
        if pending:
            n = conv.cancel([f for _, f in pending])
            if n:
                cancelled(n)


def _as_list(got: Future | list[Future]) -> list[Future]:
    return got if isinstance(got, list) else [got]
