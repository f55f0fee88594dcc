"""Batches → page results: one worker per device runs the engine's runner there (`Devices`, below: one
thread per device, taking batches from the lanes when it is free; each runner loads on its first batch
and stays loaded until `close()`).

Before running a batch, the worker of an engine that stages (Capabilities.stages: its copy to the device
starts on a side stream) takes and stages the next one if it is already due, so that copy overlaps this
batch's compute; a runner that does not stage gets its next batch only once it is free, so the latest
interactive page goes first. After a batch, whatever happened, the runner releases its pages' buffers.

A batch the engine rejects as a whole is split in halves until the page at fault is alone; that page
is recorded as failed and its neighbours still get their output. An out-of-memory error also lowers the
device's batch-size cap (gpu/throughput.py), so later batches fit; each clean batch reports its time, tokens
and memory to that controller, which may raise the cap while throughput gains (`--max-batch auto`). A runner
that decodes continuously (Capabilities.streams: `Runner.decoder`) gets its pages streamed instead
(streaming.py).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Callable, Sequence

from ..engines.base import Runner
from ..errors import EngineLoadError, OcrbatchError, StalledError, error_line, forget_frames, is_out_of_memory
from ..gpu.device import MemoryProbe
from ..gpu.throughput import SlotFigures, ThroughputController
from ..records import Batch, PageImage, PageOutput, PageResult, Status
from .lanes import Lanes
from .stats import Stats, WorkerFigures
from .watchdog import Watchdog

log = logging.getLogger("ocrbatch")

# The next batch: block=True waits for one (None: no more will come); block=False returns None at once
# when none is waiting.
Take = Callable[[bool], "Batch | None"]

# Warm-up, for the "buffer allocations after warm-up" figure: the worker's first WARMUP_BATCHES batches, and,
# when the engine's buffers fill up at some point (the decode threads get held back: from then on buffers
# only cycle), until then.
WARMUP_BATCHES = 2


class InferWorker:
    def __init__(self, engine: Runner, emit: Callable[[PageResult], None],
                 controller: ThroughputController | None = None, memory: MemoryProbe | None = None,
                 device: str = "", room: int = 0) -> None:
        self.engine = engine
        self.room = room  # pages a batch may hold beyond the cap (interactive ones riding on top)
        self.emit = emit
        self.controller = controller
        self.memory = memory
        self.slots: SlotFigures | None = None  # the engine's (continuous decoding: the decoder's)
        self.device = device
        self.busy_s = 0.0
        self.compute_s = 0.0
        self.running = 0  # pages in the engine's infer now
        self.batches = 0
        self.pages = 0
        self.started: float | None = None  # when the first batch arrived
        self.ended: float | None = None  # when the last one was done
        self.warm_allocations: int | None = None  # allocations when warm-up ended
        # The ledger: every page taken and not yet answered, from `take` to its one result. A page gets a
        # result only by leaving it (`_send`), so none gets two; whatever breaks the loop, those still in it
        # fail (`fail_held`), so none gets none.
        self.ledger: dict[int, PageImage] = {}
        self._ledger_lock = threading.Lock()  # the device watchdog's thread reads and empties it too
        self.progress = time.monotonic()  # when a page last left the ledger, or the first entered an empty one
        self._outbox: list[tuple[PageImage, PageResult]] | None = None
        self._filled = False

    def run(self, take: Take, busy: Callable[[float], None], begin: Callable[[], None] | None = None,
            ahead: bool = True) -> None:
        """Take batches until there are none. `begin` is called as each batch starts, `busy` with the time
        it took. With `ahead`, the next batch is taken and staged before this one runs (its copy overlaps
        this compute); without, a batch is chosen only when the device is free (the latest priorities)."""
        take = self._ledgered(take)
        batch, staging_s = self._take(take, block=True)
        decoder = self.engine.decoder() if batch is not None else None
        if decoder is not None:
            from .streaming import StreamRunner

            StreamRunner(self, decoder).run(batch, take, busy, begin)
            self.ended = time.monotonic()
            return
        self.slots = self.engine.slots
        while batch is not None:
            upcoming = self._take(take, block=False) if ahead else (None, 0.0)
            if begin is not None:
                begin()
            t0 = time.perf_counter()
            self._outbox = []  # results go out once the batch is counted: a reader of the figures sees it
            try:
                self.run_batch(batch.pages)
            finally:
                self.release(batch.pages)
            self.count(len(batch), staging_s + time.perf_counter() - t0, busy)
            outbox, self._outbox = self._outbox, None
            for page, result in outbox:
                self._send(page, result)
            batch, staging_s = upcoming if upcoming[0] is not None else self._take(take, block=True)
        self.ended = time.monotonic()

    def _ledgered(self, take: Take) -> Take:
        """`take`, with every page it hands out entered in the ledger before anything else can raise."""
        def taking(block: bool) -> Batch | None:
            batch = take(block)
            if batch is not None:
                self._enter(batch.pages)
            return batch
        return taking

    def _enter(self, pages: Sequence[PageImage]) -> None:
        with self._ledger_lock:
            if not self.ledger:
                self.progress = time.monotonic()
            for page in pages:
                self.ledger.setdefault(id(page), page)

    @property
    def holding(self) -> list[PageImage]:
        """The pages taken and not yet answered."""
        with self._ledger_lock:
            return list(self.ledger.values())

    def stalled_for(self, now: float) -> float:
        """Seconds since a page last finished while pages are in hand (0 when none is)."""
        with self._ledger_lock:
            return now - self.progress if self.ledger else 0.0

    def give_up(self, exc: BaseException) -> int:
        """From another thread, while this worker's thread is stuck in the engine: every page in hand fails with
        `exc` (their buffers stay: the engine may still be using them). Returns how many."""
        held = self.holding
        for page in held:  # straight out, not through a batch's outbox: the batch may never end
            self._deliver(page, PageResult(ref=page.ref, status=Status.FAILED, error=error_line(exc),
                                           timings={"decode_s": page.decode_s}))
        return len(held)

    def fail_held(self, exc: BaseException) -> None:
        """Whatever broke the worker's loop: results already decided go out, every other page still in the
        ledger fails with `exc`, once."""
        outbox, self._outbox = self._outbox or [], None
        for page, result in outbox:
            self._send(page, result)
        for page in self.holding:
            self.emit_output(page, exc, {"decode_s": page.decode_s})
        self.release(self.holding)

    def release(self, pages: Sequence[PageImage]) -> None:
        """The engine frees what `pages` held; its failing to is logged, never a page's failure (the page's
        result is already decided) nor the worker's."""
        try:
            self.engine.release(pages)
        except Exception as exc:  # noqa: BLE001 - engine code is foreign
            log.warning("releasing the buffers of %d page(s) failed: %s", len(pages), error_line(exc))

    def _take(self, take: Take, block: bool) -> tuple[Batch | None, float]:
        """The next batch, staged; and how long staging took."""
        batch = take(block)
        if batch is None:
            return None, 0.0
        if self.started is None:
            self.started = time.monotonic()
        t0 = time.perf_counter()
        try:
            self.engine.stage(batch.pages)
        except Exception:  # noqa: BLE001 - infer stages what is left, inside the batch's error handling
            log.debug("staging a batch of %d failed; it is staged again when it runs", len(batch), exc_info=True)
        return batch, time.perf_counter() - t0

    def count(self, pages: int, spent: float, busy: Callable[[float], None], batches: int = 1) -> None:
        """`pages` finished in `batches` batches that took `spent` seconds."""
        self.busy_s += spent
        self.batches += batches
        self.pages += pages
        if self.batches >= WARMUP_BATCHES and not self._filled:
            stats = self.engine.stats()
            self._filled = stats.filled
            if self.warm_allocations is None or self._filled:
                self.warm_allocations = stats.allocations
        busy(spent)

    def figures(self) -> WorkerFigures:
        """The worker's figures now (read from other threads: a consistent-enough copy)."""
        running = self.running
        stats = self.engine.stats()
        allocations = stats.allocations
        warm = self.warm_allocations
        return WorkerFigures(
            device=self.device, batches=self.batches, pages=self.pages, busy_s=self.busy_s,
            wall_s=(self.ended or time.monotonic()) - self.started if self.started is not None else 0.0,
            compute_s=self.compute_s, copy_s=stats.copy_s,
            cap=self.controller.cap if self.controller is not None else None, allocations=allocations,
            allocations_after_warmup=None if allocations is None or warm is None else allocations - warm,
            slot_efficiency=self.slots.efficiency if self.slots is not None else None,
            tokens=self.slots.useful if self.slots is not None else None,
            kv_cache=stats.kv_cache_usage, kv_cache_peak=stats.kv_cache_peak,
            running=running, running_done=(stats.batch_done or 0.0) if running else 0.0)

    def run_batch(self, pages: Sequence[PageImage]) -> None:
        """Infer `pages`, splitting on failure; every page ends in exactly one result. Pages handed here
        directly (not taken by `run`: a Ray worker's, a recovery's) enter the ledger first."""
        self._enter(pages)
        self._run_batch(pages)

    def _run_batch(self, pages: Sequence[PageImage]) -> None:
        cap = self.controller.cap + self.room if self.controller is not None else len(pages)
        if len(pages) > cap:  # the cap dropped (out of memory) since this batch was formed
            for i in range(0, len(pages), cap):
                self._run_batch(pages[i:i + cap])
            return
        t0 = time.perf_counter()
        if self.memory is not None:
            self.memory.begin()
        outputs, failure = self._infer(pages)
        if failure is not None:
            # Out of the `except` block, the traceback dropped and garbage collected: the failed attempt's
            # frames (KV cache, logits, pixels) are gone before the cache is emptied and the halves run.
            failure = forget_frames(failure)
            if is_out_of_memory(failure):
                gc.collect()
                self.engine.after_out_of_memory()
                if self.controller is not None:
                    cap = self.controller.on_out_of_memory(len(pages))
                    log.info("out of memory on a batch of %d; batch cap now %d", len(pages), cap)
            if len(pages) > 1:
                log.debug("batch of %d failed (%s); splitting", len(pages), error_line(failure))
                half = len(pages) // 2
                self._run_batch(pages[:half])
                self._run_batch(pages[half:])
                return
            outputs = [failure]
        elif self.controller is not None:
            used, free = self.memory.end() if self.memory is not None else (None, None)
            tokens = sum((o.tokens if o.tokens is not None else 1) + 1 for o in outputs if isinstance(o, PageOutput))
            self.controller.on_batch_done(len(pages), time.perf_counter() - t0, tokens, used, free)
        per_page = (time.perf_counter() - t0) / len(pages)
        for page, out in zip(pages, outputs):
            self.emit_output(page, out, {"decode_s": page.decode_s, "infer_s": per_page,
                                         "batch_size": float(len(pages))})

    def _infer(self, pages: Sequence[PageImage]) -> tuple[list[PageOutput | Exception], BaseException | None]:
        t0 = time.perf_counter()
        self.running = len(pages)  # the panel counts how far the engine is into them (figures)
        try:
            outputs = self.engine.infer(pages)
            if len(outputs) != len(pages):
                raise RuntimeError(f"engine returned {len(outputs)} results for {len(pages)} pages")
            return outputs, None
        except Exception as exc:  # noqa: BLE001 - engine code is foreign; we isolate the culprit
            if len(pages) == 1:
                log.debug("engine failed on %s", pages[0].ref.label, exc_info=True)
            return [], exc
        finally:
            self.running = 0
            self.compute_s += time.perf_counter() - t0

    def emit_output(self, page: PageImage, out: PageOutput | BaseException, timings: dict[str, float]) -> None:
        if isinstance(out, PageOutput):
            info = out.info
            if page.dpi is not None:  # rendered below --dpi (a poster-sized page): its real dpi, flagged
                info = {**info, "dpi": round(page.dpi, 3), "dpi_capped": True}
            self._send(page, PageResult(ref=page.ref, status=out.status, markdown=out.markdown,
                                        attachments=out.attachments, timings=timings, info=info,
                                        lines=out.lines, confidence=out.confidence, record=out.record))
        else:
            self._send(page, PageResult(ref=page.ref, status=Status.FAILED, error=error_line(out),
                                        timings=timings))

    def _send(self, page: PageImage, result: PageResult) -> None:
        if self._outbox is not None:
            self._outbox.append((page, result))
            return
        self._deliver(page, result)

    def _deliver(self, page: PageImage, result: PageResult) -> None:
        """The page's one result, out of the ledger; a second one is dropped."""
        with self._ledger_lock:
            answered = self.ledger.pop(id(page), None) is None
            self.progress = time.monotonic()
        if answered:
            log.debug("%s: a second result dropped (%s)", page.ref.label, result.status.value)
            return
        if page.reply is not None:
            page.reply.deliver(result)
        else:
            self.emit(result)


class Devices:
    """The engine on its devices, for as long as a converter lives: one runner and one thread per device,
    each taking from the lanes the batch the policy picks when its device is free. A runner loads on its
    first batch (or on `load()`) and stays loaded until `close()`. Runs that want the figures (batches,
    busy time) `watch` with their Stats."""

    def __init__(self, runners: list[Runner], devices: tuple[str, ...], lanes: Lanes,
                 controllers: list[ThroughputController], memory: Callable[[str], MemoryProbe | None],
                 room: int = 0, ahead: bool = False, watchdog: Watchdog | None = None) -> None:
        self.lanes, self.controllers = lanes, controllers
        self.ahead = ahead  # the engine stages (Capabilities.stages): take and stage the next batch early
        self.stalled: dict[str, float] = {}  # device -> when the watchdog gave its pages up
        self.runners, self.devices = runners, devices
        self.loaded = [False] * len(runners)
        self.watchers: list[Stats] = []
        self._locks = [threading.Lock() for _ in runners]
        self.workers = [InferWorker(r, _unrouted, c, memory=memory(d), device=d, room=room)
                        for r, c, d in zip(runners, controllers, devices)]
        self._threads = [threading.Thread(target=self._serve, args=(i,), name=f"infer-{d}", daemon=True)
                         for i, d in enumerate(devices)]
        for t in self._threads:
            t.start()
        if watchdog is not None:  # a worker stuck in the engine: its pages fail as stalled (watchdog.py)
            for device, worker in zip(devices, self.workers):
                watchdog.watch(_StuckDevice(device, worker, self.stalled))

    def load(self) -> None:
        """Load every device's runner now (a server's readiness); raises EngineLoadError."""
        for i in range(len(self.runners)):
            self._load(i)

    def _load(self, i: int) -> None:
        with self._locks[i]:
            if not self.loaded[i]:
                self._each(lambda st: st.begin("infer"))  # loading shows as busy
                try:
                    self.runners[i].load(self.devices[i])
                except OcrbatchError:
                    raise
                except Exception as exc:  # noqa: BLE001 - whatever the engine raised, it cannot run: exit 5
                    log.debug("loading the engine on %s", self.devices[i], exc_info=True)
                    raise EngineLoadError(f"the engine failed to load on {self.devices[i]}: "
                                          f"{error_line(exc)}") from exc
                self.loaded[i] = True

    def _each(self, fn: Callable[[Stats], None]) -> None:
        for stats in list(self.watchers):
            fn(stats)

    def _serve(self, i: int) -> None:
        runner, worker = self.runners[i], self.workers[i]

        def take(block: bool) -> Batch | None:
            while True:
                batch, dropped = self.lanes.take(block)
                if dropped:
                    runner.release(dropped)  # pages nobody waits for any more: their buffers go back
                    for page in dropped:
                        page.reply.start()  # False: the owner counts it gone
                live, gone = [], []
                for page in batch.pages if batch is not None else ():
                    (live if page.reply is None or page.reply.start() else gone).append(page)
                if gone:
                    runner.release(gone)
                if live:
                    try:
                        self._load(i)
                    except Exception as exc:  # noqa: BLE001 - the engine cannot run: its pages' owners hear why
                        _fail(live, exc)
                        runner.release(live)
                        continue
                    self._each(lambda st: st.add_batch(len(live)))
                    return Batch(tuple(live), batch.bucket if batch else None)
                if batch is None and not dropped:
                    return None

        while True:
            try:
                worker.run(take, busy=lambda s: self._each(lambda st: st.add_busy("infer", s)),
                           begin=lambda: self._each(lambda st: st.begin("infer")),
                           ahead=self.ahead)  # no staging: choose late, for priority
                return
            except Exception as exc:  # noqa: BLE001 - the pages in hand fail with it, the device goes on
                log.debug("infer worker on %s", self.devices[i], exc_info=True)
                worker.fail_held(exc)

    def figures(self) -> tuple[WorkerFigures, ...]:
        return tuple(w.figures() for w in self.workers)

    def close(self) -> None:
        """Finish what waits, then unload every runner."""
        self.lanes.close()
        for t in self._threads:
            t.join()
        for runner, loaded in zip(self.runners, self.loaded):
            if loaded:
                runner.close()
        self.loaded = [False] * len(self.runners)


class _StuckDevice:
    """A device's worker as the watchdog sees it: pages in hand and none finished for the stall timeout is an
    engine stuck there; its pages fail as stalled (their owners hear at once), the device is marked stalled."""

    def __init__(self, device: str, worker: InferWorker, stalled: dict[str, float]) -> None:
        self.device, self.worker, self.stalled = device, worker, stalled
        self.stalled_for = worker.stalled_for

    def reason(self, timeout: float) -> str:
        return f"stalled: no page finished on {self.device} in {timeout:.0f} s (--stall-timeout); the engine is stuck"

    def give_up(self, why: str) -> None:
        n = self.worker.give_up(StalledError(why))
        self.stalled[self.device] = time.monotonic()
        log.error("%s: %d page(s) failed as stalled", why, n)


def _fail(pages: list[PageImage], exc: BaseException) -> None:
    for page in pages:
        if page.reply is None:
            raise exc
        page.reply.fail(exc)


def _unrouted(result: PageResult) -> None:  # pragma: no cover - every page through Devices has a reply
    raise RuntimeError(f"a result with nowhere to go: {result.ref}")
