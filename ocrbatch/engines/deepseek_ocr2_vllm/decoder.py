"""Pages in and out of vLLM's running batch (the decoder pipeline/streaming.py drives; static batches use it too).

    decoder.add(pages)          pages wait here, outside vLLM
    decoder.step(rows)          pages nobody wants any more are aborted in vLLM (answered `cancelled`); waiting
                                pages become vLLM requests while fewer than `rows` are in; one vLLM step
                                (its scheduler mixes prefills and decodes, its KV cache is paged)
    → [(page, result, info)]    the pages whose requests finished at this step

A request finishes on an end token (`ok`) or at the token limit: then, unless the run fixes the pages' lengths,
the page is asked again once with the stronger repetition guard, ahead of the waiting pages, and that second
answer is final (`truncated` if it runs to the limit again). A request vLLM refuses (`add_request` raises)
fails its page alone. A step that raises is the caller's: `abandon()` aborts every request and hands all pages
back for the static path, which splits batches until the page at fault is alone (each page one result).

Only the thread that drives the decoder calls vLLM.
"""

from __future__ import annotations

import collections
import itertools
import time
from dataclasses import dataclass
from typing import Any, Sequence

from ...gpu.throughput import SlotFigures
from ...records import PageImage
from ..deepseek_ocr2.common import GUARD, RETRY_GUARD, Generated

_IDS = itertools.count()


def _token_scores(completion: Any, n: int) -> tuple[list[float] | None, bool]:
    """The log-probability of each of the first `n` chosen tokens (vLLM's raw logprobs, asked for with
    logprobs=0), and whether any was not the model's best (rank > 1: the repetition guard banned the best);
    (None, False) when vLLM gave none."""
    chosen = list(completion.token_ids)[:n]
    given = completion.logprobs
    if given is None or len(given) < len(chosen):
        return None, False
    logprobs, fired = [], False
    for pos, token in enumerate(chosen):
        entry = given[pos].get(token) if given[pos] is not None else None
        if entry is None:
            return None, False
        logprobs.append(float(entry.logprob))
        fired = fired or (entry.rank is not None and entry.rank > 1)
    return logprobs, fired


@dataclass(eq=False)
class _Request:
    page: PageImage
    guard: tuple[int, int]
    retry: bool = False
    id: str = ""


class Failed:
    """A page vLLM refused: `engine.output` raises its error (the page fails alone)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


CANCELLED = object()  # a page's result when nobody wanted it any more: engine.output writes it `cancelled`


class VllmDecoder:
    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.llm = engine.llm
        self.figures = SlotFigures()
        self.waiting: collections.deque[_Request] = collections.deque()
        self.running: dict[str, _Request] = {}
        self.dropped = 0  # pages aborted because nobody wanted them any more

    # -- what the scheduler sees -------------------------------------------------------------------
    def add(self, pages: Sequence[PageImage]) -> None:
        self.waiting.extend(_Request(p, GUARD) for p in pages)

    @property
    def active(self) -> int:
        return len(self.running)

    @property
    def prefilled(self) -> int:
        return 0

    def wanted(self, rows: int) -> int:
        """Pages it would like waiting: the rows free at a cap of `rows`."""
        return max(1, rows - len(self.running))

    def idle(self) -> bool:
        return not self.running and not self.waiting

    def pages(self) -> list[PageImage]:
        return [r.page for r in self.running.values()] + [r.page for r in self.waiting]

    def abandon(self) -> list[PageImage]:
        """Abort every request (after an error): their pages, for another path."""
        pages = self.pages()
        self._abort(list(self.running))
        self.running.clear()
        self.waiting.clear()
        # A failed step leaves the front end's record of processed images out of step with the engine
        # core's ("encoder cache miss" when they come again): both are cleared.
        self.llm.reset_mm_cache()
        self.llm.reset_encoder_cache()
        return pages

    # -- a step --------------------------------------------------------------------------------------
    def step(self, rows: int) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        done = self._drop_unwanted()
        while self.waiting and len(self.running) < rows:
            request = self.waiting.popleft()
            try:
                self._submit(request)
            except Exception as exc:  # noqa: BLE001 - vLLM refused this page: it fails alone
                done.append((request.page, Failed(exc), {}))
        if not self.running:
            return done
        t0 = time.perf_counter()
        outputs = self.llm.step()
        self.figures.steps += 1
        self.figures.slot_steps += max(rows, len(self.running))
        self.figures.row_steps += len(self.running)
        for out in outputs:
            request = self.running.get(out.request_id)
            if request is None or not out.finished:
                continue
            del self.running[out.request_id]
            done += self._finished(request, out.outputs[0])
        self.figures.step_s += time.perf_counter() - t0
        return done

    def _submit(self, request: _Request) -> None:
        request.id = f"ocrbatch-{next(_IDS)}"
        self.llm.add_request(request.id, self.engine.request_prompt(request.page),
                             self.engine.sampling(request.page, request.guard), priority=_priority(request.page))
        self.running[request.id] = request
        self.figures.prefills += 1

    def _finished(self, request: _Request, completion: Any) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        tokens = list(completion.token_ids)
        # Tokens chosen, end tokens included (a benchmark's page of fixed length ends with one, as on the other
        # backend): what SlotFigures counts.
        self.figures.useful += len(tokens) + int(self.engine.fixed_lengths(request.page))
        ended = completion.finish_reason == "stop"
        if ended and tokens and tokens[-1] in self.engine.end_ids:
            tokens = tokens[:-1]
        if completion.finish_reason == "length" and self.engine.retries and not request.retry:
            # A loop the guard did not break, or a page longer than the limit: once more, harder, next.
            self.waiting.appendleft(_Request(request.page, RETRY_GUARD, retry=True))
            return []
        if self.engine.fixed_lengths(request.page):
            ended = True  # a benchmark's page ends where it was told to
        info: dict[str, Any] = {"retried": True} if request.retry else {}
        logprobs, fired = _token_scores(completion, len(tokens))
        return [(request.page, Generated(tokens, ended, logprobs, fired), info)]

    def _drop_unwanted(self) -> list[tuple[PageImage, Any, dict[str, Any]]]:
        """Pages whose owner no longer waits for them (a stopped run): aborted in vLLM, answered `cancelled`."""
        gone = [r for r in itertools.chain(self.running.values(), self.waiting)
                if r.page.reply is not None and not r.page.reply.wanted()]
        if not gone:
            return []
        self._abort([r.id for r in gone if r.id in self.running])
        for r in gone:
            self.running.pop(r.id, None)
        self.waiting = collections.deque(r for r in self.waiting if r not in gone)
        self.dropped += len(gone)
        return [(r.page, CANCELLED, {}) for r in gone]

    def _abort(self, ids: list[str]) -> None:
        if ids:
            self.llm.abort_request(ids)


def _priority(page: PageImage) -> int:
    """vLLM's priority (lower first): interactive pages ahead of bulk ones."""
    return 0 if page.priority == "interactive" else 1
