"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─pages─▶ batch (lanes) ─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ─────────────────┘
    watchdog (the service's): the run's pages in flight, and each device; a stall stops the run (exit 8)

Each stage module owns its loop; this file makes the queues, starts the stages in that order and waits.
Decode, batch and infer are where the service's executor runs pages (executor.py: here, or on a Ray cluster's
actors with `--ray`; the service chose which, and a Converter's outlives the run): the run feeds it each ref
taken, in the bulk lane, and the pages come back through its RunReply (lanes.py). A page taken is in the
ledger until its result is written (ledger.py), which the stall watchdog reads (watchdog.py); signals.py,
stats.py say the rest.
"""

from __future__ import annotations

import shutil
import time
from typing import IO, Any, Callable

from ..config import RunConfig
from ..errors import OcrbatchError, OutputWriteError, UsageError
from ..memory import return_large_buffers_to_os
from ..records import PageRef, PageResult
from . import count, decode, discover, names, signals, stdin, write
from .executor import Job
from .lanes import RunReply
from .ledger import LedgerQueue, PageLedger
from .lock import OutputLock
from .engine_side import lent
from .queue import ClosableQueue, Closed, stage_thread
from .service import Service
from .stats import Stats, Summary, Watch, run_snapshot, run_summary
from .watchdog import RunStall


class _Run:
    def __init__(self, config: RunConfig, service: Service, stdin: IO[str] | None, follow: Any = None) -> None:
        self.config, self.service, self.stdin, self.out, self.follow = config, service, stdin, config.output, follow
        self.front, self.executor = service.front, service.executor  # where pages run: here, or on Ray
        self.stats = Stats(workers={"decode": self.executor.decoders, "infer": len(service.device_names)})
        # discover: what it found; the folders ocrbatch writes, never inputs; the total, counted ahead
        self.found, self.skip_dirs = discover.Discovery(), discover.written_folders(config)
        self.counter = count.PageCounter(config.inputs, config.pages, self.skip_dirs, config.shard)
        self.ledger = PageLedger()  # every page taken off `refs` gets exactly one record (ledger.py)
        self.refs: ClosableQueue[PageRef] = LedgerQueue(self.ledger, max(64, 4 * config.workers), 1, "decode")
        self.pdfs = decode.PdfCache(size=config.workers + 1)  # the open PDFs its pages are read from
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 2, "write")  # from discover and the reply
        self.reply = RunReply(self.results, self.executor, fail=self.stop)  # the run's pages, back from it
        # write: the files, the manifest, the first 100 failures' lines for the summary
        self.writer = write.for_run(config, self.front.identity(), follow.written if follow is not None else None)
        self.manifest, self.outputs = self.writer.manifest, self.writer.outputs
        self.failures: list[str] = []
        self.write_busy = lambda seconds: self.stats.add_busy("write", seconds)
        self.decode_busy = lambda seconds: self.stats.add_busy("decode", seconds)
        # the watchdog's view of the run: pages in flight and none answered, or an engine stuck on a device
        self.stall = RunStall(self.ledger, lambda: (self.executor,), lambda why: self.stop(why=why))
        self.crash: BaseException | None = None  # a bug, raised on the main thread
        self.stopping: OcrbatchError | None = None  # why the run takes no more pages (a signal, a write error)
        self.deadline, self.aborted = 0.0, False  # then until when the pages in progress are waited for

    # -- the stages, in data-flow order ----------------------------------------------------------
    def discover(self) -> None:
        c = self.config
        discover.run(c.inputs, self.refs, self.results, shown=self.follow.found if self.follow else None,
                     stdin=self.stdin, found=self.found, null_separated=c.null_separated, pages=c.pages,
                     skip_dirs=self.skip_dirs, force=c.force, names=self.manifest, name_max=names.name_max(self.out),
                     is_done=lambda ref: self.manifest.is_done(ref) and self.outputs.still_done(ref), shard=c.shard,
                     spool=self.out / stdin.SPOOL)

    def feed(self) -> None:  # → decode, batch and infer: the executor's (back-pressure: it waits for room)
        try:
            self.executor.start()  # ready before a page is taken: an engine's start never counts as a stall
            while True:
                try:
                    ref = self.refs.get()
                except Closed:
                    return
                self.reply.taken()
                self.executor.submit(Job(ref, self.reply, pdfs=self.pdfs, busy=self.decode_busy), block=True)
        finally:
            self.reply.sender_done()

    def write(self) -> None:  # on the caller's thread; signals are looked at between results
        write.run(self.results, self.writer, self.write_busy, self.failures, admit=self.ledger.answer,
                  tick=lambda: signals.poll(self.stopping, self.deadline, self.aborted, self.stop))

    def close_out(self) -> None:
        """The pages taken and never answered (cut short by a stop, stuck, or lost) get their one record."""
        write.write_all(self.ledger.left_over(self.stopping, self.crash), self.writer, self.write_busy, self.failures)

    def execute(self, watch: Watch | None) -> Summary:
        self.executor.watchers.append(self.stats)
        threads = [stage_thread(f.__name__, f, on_error=self.stop) for f in (self.discover, self.feed)]
        if watch is not None:
            self.counter.start()
            watch(lambda: run_snapshot(self))
        self.service.watchdog.watch(self.stall)
        for t in threads:
            t.start()
        try:
            self.write()
        except (OutputWriteError, UsageError) as exc:  # disk full, a FIFO where a page goes: stop, with a summary
            self.stop(why=exc)
        except BaseException:
            self.stop()
            raise
        finally:
            for t in threads:
                t.join(timeout=5 if self.crash or self.aborted or not self.results.closed else None)
            self.service.watchdog.check()  # a last look: a device stuck as the last pages came back stops it too
            self.service.watchdog.unwatch(self.stall)
            self.executor.watchers.remove(self.stats)
            self.counter.stop()
            self.close_out()
            self.pdfs.close()
            shutil.rmtree(self.out / stdin.SPOOL, ignore_errors=True)  # a document read from stdin, if any
            try:
                self.manifest.close()
            except OutputWriteError as exc:  # its rewrite at the end: a full disk then is exit 7 too
                self.stopping = self.stopping or exc
        if self.crash is not None:
            raise self.crash
        return run_summary(self)

    def stop(self, crash: BaseException | None = None, why: OcrbatchError | None = None, grace_s: float = 0) -> None:
        """Take no more pages (those not in a batch yet are dropped); the batches in progress are written for
        `grace_s`. `why` (a signal, a full disk, a stall) ends the run with its summary; a `crash` is raised."""
        self.crash = self.crash or crash
        if why is not None and self.stopping is None:
            self.stopping, self.deadline = why, time.monotonic() + grace_s
        self.stall.stopped = True  # stopping already: no stall to look for
        self.refs.abort()
        if grace_s <= 0:
            self.aborted = self.service.cut_short = True  # closing it will not wait for the pages in flight
            self.results.abort()
        self.reply.stop()  # its pages not started yet are dropped


def run(config: RunConfig, *, stdin: IO[str] | None = None, watch: Watch | None = None,
        service: Callable[[], Service] | None = None, follow: Any = None) -> Summary:
    """Convert everything `config` names; returns the summary; raises OcrbatchError subclasses. `watch` gets a
    function that returns a fresh Snapshot; `service` gives the engine side (a Converter's), else one is made;
    `follow` (e.g. stdout.StdoutPrinter) sees each page ref and early result discovery hands on, in order
    (`found`, on discovery's thread), and each result once written and recorded (`written`, on the writer's)."""
    write.check_folders(config)  # the output, --debug-layout's
    return_large_buffers_to_os()  # peak memory flat in the page count (memory.py)
    with OutputLock(config.output, config.shard), lent(config.service, service) as engine_side:  # one per folder
        return _Run(config, engine_side, stdin, follow).execute(watch)
