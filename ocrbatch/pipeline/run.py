"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─pages─▶ batch (lanes) ─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ─────────────────┘

Each stage module owns its loop; this file makes the queues, starts the stages in that order and waits.
Batch and infer belong to the service (service.py), which outlives the run when a Converter lends its own;
this run's pages go in the bulk lane and come back through `_Reply`. With `--ray`, one remote stage
(remote.py) takes the place of decode, batch and infer.
"""

from __future__ import annotations

import threading
import time
from typing import IO, Any, Callable

from ..config import RunConfig
from ..errors import NoInputsError, UsageError
from ..manifest import Manifest
from ..records import PageImage, PageRef, PageResult, Status
from . import decode, discover, remote, write
from .queue import ClosableQueue, Closed
from .service import Service
from .stats import Snapshot, Stats, Summary, summary_dict

Watch = Callable[[Callable[[], Snapshot]], None]


class _Run:
    def __init__(self, config: RunConfig, service: Service, stdin: IO[str] | None) -> None:
        self.config, self.service, self.stdin, self.out = config, service, stdin, config.output
        self.lanes, self.devices, self.front = service.lanes, service.devices, service.front
        self.manifest = Manifest(self.out, self.front.identity())
        self.writer = write.Writer(self.out, self.manifest, self.front.identity())
        self.found = discover.Discovery()
        n_dec, n_dev = (0, 1) if config.ray else (config.workers, len(service.device_names))
        self.stats = Stats(workers={"decode": n_dec, "infer": n_dev})
        self.refs: ClosableQueue[PageRef] = ClosableQueue(max(64, 4 * n_dec), 1, "decode")
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 1 + n_dec + 1, "write")
        self.pdfs = decode.PdfCache(size=n_dec + 1)  # open PDFs, shared by the decode threads
        self.reply, self.dispatcher = _Reply(self), None
        self.pending, self.decoding, self.sealed, self.lock = 0, n_dec, False, threading.Lock()
        self.crash: BaseException | None = None
        self.stopped, self.failures = False, []

    # -- stages, in data-flow order ------------------------------------------------------------
    def discover(self) -> None:
        discover.run(self.config.inputs, self.refs, self.results, stdin=self.stdin, found=self.found,
                     null_separated=self.config.null_separated, pages=self.config.pages, skip_dirs=[self.out],
                     is_done=self.manifest.is_done, force=self.config.force)

    def decode(self) -> None:
        c = self.config
        try:
            decode.run(self.refs, self.send, self.results, busy=lambda s: self.stats.add_busy("decode", s),
                       read_one=lambda ref: decode.read(ref, c.dpi, self.pdfs, c.text_layer, self.front))
        finally:
            with self.lock:
                self.decoding -= 1
                last = self.decoding == 0
            if last:
                self.lanes.expire()  # this run sends no more: its pages need not wait for company
                self.landed(0)

    def send(self, page: PageImage) -> None:  # on to batch and infer, in the service
        page.reply = self.reply
        with self.lock:
            self.pending += 1
        self.lanes.put(page)

    def landed(self, n: int = 1) -> None:
        """`n` pages came back; the service's side of the results queue closes after the last one."""
        with self.lock:
            self.pending -= n
            done = self.decoding == 0 and self.pending == 0 and not self.sealed
            self.sealed |= done
        if done:
            self.results.close()

    def remote(self) -> None:
        remote.run(self.config, getattr(self.front, "uses_gpu", False), self.refs, self.results, self.stats,
                   connected=lambda d: setattr(self, "dispatcher", d))

    # -- driving ----------------------------------------------------------------------------------
    def execute(self, watch: Watch | None) -> Summary:
        stages = [("discover", self.discover)]
        if self.config.ray:
            stages.append(("remote", self.remote))
        else:
            stages += [(f"decode-{i}", self.decode) for i in range(self.config.workers)]
            self.devices.watchers.append(self.stats)
        threads = [threading.Thread(target=self._guard(fn), name=name, daemon=True) for name, fn in stages]
        if watch is not None:
            watch(self.snapshot)
        for t in threads:
            t.start()
        try:
            write.run(self.results, self.writer, lambda s: self.stats.add_busy("write", s), self.failures)
        except BaseException:
            self.stop()
            raise
        finally:
            for t in threads:
                t.join(timeout=5 if self.crash or not self.results.closed else None)
            if self.devices is not None:
                self.devices.watchers.remove(self.stats)
            self.manifest.close()
            self.pdfs.close()
        if self.crash is not None:
            raise self.crash
        return self._summary()

    def _guard(self, fn: Callable[[], None]) -> Callable[[], None]:
        def target() -> None:
            try:
                fn()
            except Closed:
                pass  # stopped elsewhere
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread
                self.fail(exc)
        return target

    def fail(self, exc: BaseException) -> None:
        if self.crash is None:
            self.crash = exc
        self.stop()

    def stop(self) -> None:
        """Stop early: the queues wake every thread; pages waiting in the lanes are dropped."""
        self.stopped = True
        for q in (self.refs, self.results):
            q.abort()
        if self.lanes is not None:
            self.lanes.wake()

    def snapshot(self) -> Snapshot:
        lanes = len(self.lanes) if self.lanes is not None else 0
        return self.stats.snapshot(
            pages_total=self.found.pages + self.writer.file_failures, discovering=not self.refs.closed,
            done={s.value: n for s, n in self.writer.counts.items()}, last_error=self.writer.last_error,
            queue_depth={"decode": len(self.refs), "batch": lanes, "infer": 0, "write": len(self.results)},
            queue_max={"decode": self.refs.maxsize, "batch": self.lanes.limit if self.lanes else 1,
                       "infer": max(1, len(self.service.device_names)), "write": self.results.maxsize},
            resources=self.service.sampler.latest(),
            infer_workers=self.devices.figures() if self.devices is not None else ())

    def _summary(self) -> Summary:
        snap = self.snapshot()
        if not self.found.sources and not self.writer.counts[Status.FAILED]:
            raise NoInputsError(f"no PDF or image files found in {', '.join(self.config.inputs)}")
        ray: dict[str, Any] = {"ray_workers": self.dispatcher.workers} if self.dispatcher is not None else {}
        return Summary(counts={s.value: n for s, n in self.writer.counts.items()},
                       pages_total=self.found.pages + self.writer.file_failures, sources=self.found.sources,
                       missing_inputs=list(self.found.missing_inputs), renamed=list(self.found.renamed),
                       engine={**self.front.describe(), **ray}, figures=summary_dict(snap),
                       output=str(self.out), failures=self.failures)


class _Reply:
    """Where this run's pages come back from the service: its write queue."""

    lane = "bulk"

    def __init__(self, run: _Run) -> None:
        self.run = run

    def wanted(self) -> bool:
        return not self.run.stopped

    start = wanted

    def deliver(self, result: PageResult) -> None:
        try:
            self.run.results.put(result)
        except Closed:
            pass  # the run stopped meanwhile
        self.run.landed()

    def fail(self, exc: BaseException) -> None:
        self.run.fail(exc)


def run(config: RunConfig, *, stdin: IO[str] | None = None, watch: Watch | None = None,
        service: Callable[[], Service] | None = None) -> Summary:
    """Convert everything `config` names; returns the summary. Raises OcrbatchError subclasses.

    `watch`, if given, is called once before the first page moves, with a function that returns a fresh
    Snapshot; a reader (panel, log lines, metrics) calls it from its own thread whenever it likes.
    `service`: gives the engine side to use (a Converter's, kept loaded); by default one is made for this run.
    """
    _check_output(config.output)
    own = service is None
    engine_side = Service(config.service) if service is None else service()
    ok = False
    try:
        summary = _Run(config, engine_side, stdin).execute(watch)
        ok = True
        return summary
    finally:
        if own:
            engine_side.close(wait=ok)


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
