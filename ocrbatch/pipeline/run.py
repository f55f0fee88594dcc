"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─images─▶ batch ─batches─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ──────────────────┘

Each arrow is a bounded, closable queue; each stage closes its output when its input is drained.
With `--ray`, one remote stage (cluster.py) takes the place of decode, batch and infer:

    discover ─refs─▶ remote ══▶ Ray actors on the cluster (decode, engine) ══▶ results ─▶ write
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable

from ..config import RunConfig
from ..engines import registry
from ..engines.base import Engine
from ..errors import (EngineLoadError, ExitCode, NoInputsError, OcrbatchError, OutputWriteError, UsageError,
                      error_line)
from ..gpu.nvml import ResourceSampler
from ..manifest import Manifest
from ..memory import return_large_buffers_to_os
from ..records import Batch, PageImage, PageResult, Status
from ..gpu.adaptive import BatchSizeController
from ..gpu.device import load_reader, resolve_devices
from . import signals
from .batcher import Batcher
from .decode import PdfCache, read_page
from .discover import Discovery, discover
from .infer import InferWorker
from .lock import OutputLock
from .queue import ClosableQueue, Closed
from .stats import Snapshot, Stats, summary_dict
from .write import Writer

log = logging.getLogger("ocrbatch")


@dataclass
class Summary:
    counts: dict[str, int]
    pages_total: int
    sources: int
    missing_inputs: list[str]
    renamed: list[tuple[str, str]]
    engine: dict[str, Any]
    figures: dict[str, Any]
    output: str
    failures: list[str] = field(default_factory=list)
    stopped_by: OcrbatchError | None = None  # a signal or a write error ended the run early

    @property
    def exit_code(self) -> ExitCode:
        if self.stopped_by is not None:
            return self.stopped_by.exit_code
        if self.counts["failed"] or self.counts["truncated"] or self.missing_inputs:
            return ExitCode.PARTIAL
        return ExitCode.OK

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": int(self.exit_code),
            "output": self.output,
            "sources": self.sources,
            "pages": self.pages_total,
            **{f"pages_{k}": v for k, v in self.counts.items()},
            **self.figures,
            "engine": self.engine,
            "missing_inputs": self.missing_inputs,
            "renamed": [{"source": s, "output": k} for s, k in self.renamed],
            "failures": self.failures,
            "stopped_by": str(self.stopped_by) if self.stopped_by is not None else None,
        }


class _Run:
    """The threads of one run and the queues between them."""

    def __init__(self, config: RunConfig, engines: list[Engine], devices: tuple[str, ...],
                 stdin: IO[str] | None) -> None:
        self.config = config
        self.engines = engines
        self.devices = devices
        self.stdin = stdin
        self.out = config.output
        self.manifest = Manifest(self.out, engines[0].identity())
        self.writer = Writer(self.out, self.manifest, engines[0].identity())
        self.found = Discovery()
        self.controller = BatchSizeController(config.max_batch)
        n_dec, n_dev = (0, 1) if config.ray else (config.workers, len(engines))
        self.dispatcher: Any = None  # cluster.Dispatcher, with --ray
        self.stats = Stats(workers={"decode": n_dec, "infer": n_dev})
        self.sampler = ResourceSampler()
        self.refs: ClosableQueue = ClosableQueue(max(64, 4 * n_dec), 1, "decode")
        self.images: ClosableQueue[PageImage] = ClosableQueue(2 * config.max_batch + n_dec, n_dec, "batch")
        self.batches: ClosableQueue[Batch] = ClosableQueue(2 * n_dev, 1, "infer")
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 1 + n_dec + n_dev, "write")
        self.discovering = True
        self.crash: BaseException | None = None
        self.stopping: OcrbatchError | None = None  # why the run stops taking pages (a signal, a write error)
        self.stop_deadline = 0.0  # then: when the pages in progress stop being waited for
        self.aborted = False
        self.failures: list[str] = []
        self.infer_workers: list[InferWorker] = []
        # Open PDFs, shared by the decode threads (a document is opened once, not once per thread).
        self.pdfs = PdfCache(size=n_dec + 1)

    # -- stages ---------------------------------------------------------------------------
    def discover_stage(self) -> None:
        try:
            discover(self.config.inputs, stdin=self.stdin, null_separated=self.config.null_separated,
                     pages=self.config.pages, skip_dirs=[self.out], found=self.found,
                     is_done=self.manifest.is_done, force=self.config.force,
                     emit_page=self.refs.put, emit_result=self.results.put)
        finally:
            self.discovering = False
            self.refs.close()
            self.results.close()

    def decode_stage(self) -> None:
        pdfs = self.pdfs
        try:
            while True:
                try:
                    ref = self.refs.get()
                except Closed:
                    return
                t0 = time.perf_counter()
                page = read_page(ref, self.config.dpi, pdfs, self.config.text_layer, self.config.max_pixels)
                self.stats.add_busy("decode", time.perf_counter() - t0)
                if isinstance(page, PageResult):  # read from the text layer, or failed: no engine needed
                    self.results.put(page)
                    continue
                page = self.prepare(page)
                if page is None:
                    continue
                self.images.put(page)
        finally:
            self.images.close()
            self.results.close()

    def prepare(self, page: PageImage) -> PageImage | None:
        """The engine's own preprocessing, on this decode thread (Engine.prepare); None when it failed the page
        (its result is sent). Time spent waiting for free buffers is back-pressure, not decode work."""
        engine = self.engines[0]  # pages are prepared before anyone knows which device will take them
        t0 = time.perf_counter()
        waited = engine.waited_s()
        try:
            return engine.prepare(page)
        except EngineLoadError:
            raise
        except Exception as exc:  # noqa: BLE001 - one page's preprocessing failed; the run goes on
            log.debug("preparing %s failed", page.ref.label, exc_info=True)
            self.results.put(PageResult(ref=page.ref, status=Status.FAILED, error=error_line(exc)))
            return None
        finally:
            self.stats.add_busy("decode", time.perf_counter() - t0 - (engine.waited_s() - waited))

    def batch_stage(self) -> None:
        batcher: Batcher[PageImage] = Batcher(self.config.max_batch, self.config.max_wait_s,
                                              key=self.engines[0].bucket_key)

        def send(ready: list) -> None:
            for key, pages in ready:
                self.stats.add_batch(len(pages))
                self.batches.put(Batch(tuple(pages), key))

        try:
            while True:
                deadline = batcher.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    page = self.images.get(timeout)
                except Closed:
                    send(batcher.flush())
                    return
                batcher.max_batch = self.controller.cap  # lowered after an out-of-memory error
                if page is not None:
                    send(batcher.add(page, time.monotonic()))
                send(batcher.due(time.monotonic()))
        finally:
            self.batches.close()

    def remote_stage(self) -> None:
        """--ray: group page refs into tasks of up to --max-batch pages (a task closes when full or when
        its first page has waited --max-wait-ms) and hand them to the cluster's actors."""
        from ..cluster import Dispatcher

        def busy(seconds: float, pages: int) -> None:
            self.stats.add_busy("infer", seconds / max(1, self.dispatcher.workers))

        self.dispatcher = Dispatcher(self.config, getattr(self.engines[0], "uses_gpu", False),
                                     emit=self.results.put, busy=busy)
        unit: list = []
        since = 0.0

        def send() -> None:
            nonlocal unit
            if unit:
                self.stats.add_batch(len(unit))
                self.stats.begin("infer")
                self.dispatcher.submit(unit)
                unit = []

        try:
            while True:
                try:
                    ref = self.refs.get(0.05)
                except Closed:
                    send()
                    break
                if ref is not None:
                    if not unit:
                        since = time.monotonic()
                    unit.append(ref)
                if len(unit) >= self.config.max_batch or \
                        (unit and time.monotonic() - since >= self.config.max_wait_s):
                    send()
                self.dispatcher.collect(block=False)
            self.dispatcher.drain()
        finally:
            self.results.close()

    def infer_stage(self, engine: Engine, device: str) -> None:
        loaded = False

        def take(block: bool) -> Batch | None:
            nonlocal loaded
            try:
                batch = self.batches.get(None if block else 0)
            except Closed:
                return None
            if batch is not None and not loaded:  # load on the first batch: a rerun with nothing to do never loads
                self.stats.begin("infer")  # loading shows as busy
                engine.load(device)
                loaded = True
            return batch

        worker = InferWorker(engine, self.results.put, self.controller,
                             load=load_reader(device, self.sampler.latest), device=device)
        self.infer_workers.append(worker)
        try:
            worker.run(take, busy=lambda s: self.stats.add_busy("infer", s),
                       begin=lambda: self.stats.begin("infer"))  # busy until the worker reports the batch's time
        finally:
            if loaded:
                engine.close()
            self.results.close()

    # -- driving ------------------------------------------------------------------------------
    def _guard(self, fn: Callable[..., None], *args: Any) -> Callable[[], None]:
        def target() -> None:
            try:
                fn(*args)
            except Closed:
                pass  # aborted elsewhere
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                if self.crash is None:
                    self.crash = exc
                self.abort()
        return target

    def abort(self) -> None:
        self.aborted = True
        for q in (self.refs, self.images, self.batches, self.results):
            q.abort()
        self.engines[0].abort()  # a decode thread waiting for buffers would wait forever

    def stop(self, reason: OcrbatchError, grace_s: float) -> None:
        """Take no more pages; results of the pages in progress are written for up to `grace_s` seconds."""
        if self.stopping is None:
            self.stopping = reason
            self.stop_deadline = time.monotonic() + grace_s
            for q in (self.refs, self.images, self.batches):
                q.abort()
        if grace_s <= 0:
            self.abort()

    def check_stop(self) -> None:
        reason = signals.requested()
        if reason is not None and self.stopping is None:
            log.warning("%s: taking no more pages; finishing the pages in progress (up to %.0f s; send it again "
                        "to stop at once)", reason.signal_name, signals.GRACE_S)
            self.stop(reason, signals.GRACE_S)
        if self.stopping is not None and not self.aborted and time.monotonic() > self.stop_deadline:
            self.abort()

    def snapshot(self) -> Snapshot:
        return self.stats.snapshot(
            pages_total=self.found.pages + self.writer.file_failures,
            discovering=self.discovering,
            done={s.value: n for s, n in self.writer.counts.items()},
            queue_depth={"decode": len(self.refs), "batch": len(self.images),
                         "infer": len(self.batches), "write": len(self.results)},
            queue_max={"decode": self.refs.maxsize, "batch": self.images.maxsize,
                       "infer": self.batches.maxsize, "write": self.results.maxsize},
            last_error=self.writer.last_error,
            resources=self.sampler.latest(),
            infer_workers=tuple(w.figures() for w in list(self.infer_workers)),
        )

    def execute(self, watch: Callable[[Callable[[], Snapshot]], None] | None) -> Summary:
        threads = [threading.Thread(target=self._guard(self.discover_stage), name="discover", daemon=True)]
        if self.config.ray:
            threads.append(threading.Thread(target=self._guard(self.remote_stage), name="remote", daemon=True))
        else:
            threads += [threading.Thread(target=self._guard(self.decode_stage), name=f"decode-{i}", daemon=True)
                        for i in range(self.config.workers)]
            threads.append(threading.Thread(target=self._guard(self.batch_stage), name="batch", daemon=True))
            threads += [threading.Thread(target=self._guard(self.infer_stage, e, d), name=f"infer-{d}",
                                         daemon=True) for e, d in zip(self.engines, self.devices)]
        self.sampler.start()
        if watch is not None:
            watch(self.snapshot)
        for t in threads:
            t.start()
        try:
            while True:
                self.check_stop()
                try:
                    result = self.results.get(timeout=0.5)
                except Closed:
                    break
                if result is not None:
                    t0 = time.perf_counter()
                    try:
                        self.writer.write(result)
                    except OutputWriteError as exc:
                        self.stop(exc, 0)
                        break
                    self.stats.add_busy("write", time.perf_counter() - t0)
                    if result.status is Status.FAILED and len(self.failures) < 100:
                        self.failures.append(self.writer.last_error or "")
        except BaseException:
            self.abort()
            raise
        finally:
            for t in threads:
                t.join(timeout=5 if self.crash or self.aborted or not self.results.closed else None)
            self.manifest.close()
            self.sampler.stop()
            self.pdfs.close()
        if self.crash is not None:
            raise self.crash
        return self._summary()

    def _summary(self) -> Summary:
        snap = self.snapshot()
        if not self.found.sources and not self.writer.counts[Status.FAILED] and self.stopping is None:
            where = ", ".join(self.config.inputs)
            raise NoInputsError(f"no PDF or image files found in {where}")
        return Summary(
            counts={s.value: n for s, n in self.writer.counts.items()},
            pages_total=self.found.pages + self.writer.file_failures,
            sources=self.found.sources,
            missing_inputs=list(self.found.missing_inputs),
            renamed=list(self.found.renamed),
            engine={**self.engines[0].describe(),
                    **({"ray_workers": self.dispatcher.workers} if self.dispatcher is not None else {})},
            figures=summary_dict(snap),
            output=str(self.out),
            failures=self.failures,
            stopped_by=self.stopping,
        )


def run(config: RunConfig, *, stdin: IO[str] | None = None,
        watch: Callable[[Callable[[], Snapshot]], None] | None = None) -> Summary:
    """Convert everything `config` names; returns the summary. Raises OcrbatchError subclasses.

    `watch`, if given, is called once before the first page moves, with a function that returns a fresh
    Snapshot; a reader (panel, log lines, metrics) calls it from its own thread whenever it likes.
    """
    _check_output(config.output)
    return_large_buffers_to_os()  # peak memory flat in the page count (memory.py)
    with OutputLock(config.output):  # one run per output folder
        return _start(config, stdin, watch)


def _start(config: RunConfig, stdin: IO[str] | None,
           watch: Callable[[Callable[[], Snapshot]], None] | None) -> Summary:
    engine_class = registry.engine_class(config.engine)
    if config.ray:  # the cluster's actors hold the engines; this one only names the engine for the manifest
        from .. import cluster

        cluster.connect(config.ray)
        try:
            return _Run(config, [engine_class(config.engine_options)], ("ray",), stdin).execute(watch)
        finally:
            if config.ray == "local":
                cluster.shutdown()
    devices = resolve_devices(config.devices, getattr(engine_class, "uses_gpu", False))
    options = config.engine_options
    if not options.buffer_pages:  # how far decoding may run ahead of the devices (the pool's back-pressure)
        # Per device a batch computing and the next one staged; two batches' worth forming in the batcher's
        # buckets; a page in each decode thread.
        options = dataclasses.replace(
            options, buffer_pages=config.max_batch * (2 * len(devices) + 2) + config.workers)
    if options.pin_memory is None:  # pinned buffers only feed GPUs; a CPU run leaves CUDA alone
        options = dataclasses.replace(options, pin_memory=any(d.startswith("cuda") for d in devices))
    engines = [engine_class(options) for _ in devices]
    return _Run(config, engines, devices, stdin).execute(watch)


def _check_output(out) -> None:
    """The output folder exists (made if need be) and can be written, before any work starts."""
    import os

    if out.exists() and not out.is_dir():
        raise UsageError(f"output {out} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the output folder {out}: {exc.strerror or exc}") from exc
    if not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write to the output folder {out}: permission denied")
