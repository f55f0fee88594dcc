"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─pages─▶ batch (lanes) ─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ─────────────────┘
    watchdog (the service's): the run's pages in flight, and each device; a stall stops the run (exit 8)

Each stage module owns its loop; this file makes the queues, starts the stages in that order and waits.
Decode reads every page with the run's one DecodeSettings (decode.py). Batch and infer are the service's
(service.py; a Converter's outlives the run); the run's pages go in the bulk lane and come back through its
RunReply (lanes.py). With `--ray` the remote stage (remote.py: Ray as a device) sends refs to the actors,
which decode and infer with these same stages on their devices. A page taken is in the ledger until its
result is written (ledger.py), which the stall watchdog reads (watchdog.py); signals.py, stats.py say the rest.
"""

from __future__ import annotations

import shutil
import time
from typing import IO, Any, Callable

from ..config import RunConfig
from ..errors import OcrbatchError, OutputWriteError, UsageError
from ..memory import return_large_buffers_to_os
from ..records import PageRef, PageResult
from . import count, decode, discover, names, remote, signals, stdin, write
from .lanes import RunReply
from .ledger import LedgerQueue, PageLedger
from .lock import OutputLock
from .queue import ClosableQueue, stage_thread
from .service import Service, lent
from .stats import Stats, Summary, Watch, run_snapshot, run_summary
from .watchdog import RunStall


class _Run:
    def __init__(self, config: RunConfig, service: Service, stdin: IO[str] | None, follow: Any = None) -> None:
        self.config, self.service, self.stdin, self.out, self.follow = config, service, stdin, config.output, follow
        self.front, self.lanes, self.devices = service.front, service.lanes, service.devices
        n_dec = 0 if config.ray else config.workers
        self.stats = Stats(workers={"decode": n_dec, "infer": len(service.device_names)})
        # discover: what it found; the folders ocrbatch writes, never inputs; the total, counted ahead
        self.found, self.skip_dirs = discover.Discovery(), discover.written_folders(config)
        self.counter = count.PageCounter(config.inputs, config.pages, self.skip_dirs, config.shard)
        self.ledger = PageLedger()  # every page taken off `refs` gets exactly one record (ledger.py)
        self.refs: ClosableQueue[PageRef] = LedgerQueue(self.ledger, max(64, 4 * n_dec), 1, "decode")
        # decode: how every page is read and prepared; the open PDFs its threads share
        self.reading, self.pdfs = decode.DecodeSettings.of(config), decode.PdfCache(size=n_dec + 1)
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 1 + n_dec + 1, "write")
        # batch and infer: the service's lanes, the run's pages back from them; or the Ray actors (remote.RayDevices)
        self.reply = RunReply(self.results, self.lanes, n_dec, fail=self.stop) if self.lanes is not None else None
        self.dispatcher: Any = None
        # write: the files, the manifest, the first 100 failures' lines for the summary
        self.writer = write.for_run(config, self.front.identity(), follow.written if follow is not None else None)
        self.manifest, self.outputs = self.writer.manifest, self.writer.outputs
        self.failures: list[str] = []
        self.write_busy = lambda seconds: self.stats.add_busy("write", seconds)
        # the watchdog's view of the run: pages in flight and none answered, or an engine stuck on a device
        self.stall = RunStall(self.ledger, lambda: (self.devices, self.dispatcher), lambda why: self.stop(why=why))
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

    def decode(self) -> None:  # → batch and infer, in the service
        try:
            decode.run(self.refs, self.reply.send, self.results, busy=lambda s: self.stats.add_busy("decode", s),
                       read_one=lambda ref: decode.read(ref, self.reading, self.pdfs, self.front))
        finally:
            self.reply.sender_done()

    def remote(self) -> None:
        remote.run(self.config, self.front.capabilities.uses_gpu, self.refs, self.results, self.stats,
                   connected=lambda d: setattr(self, "dispatcher", d))

    def write(self) -> None:  # on the caller's thread; signals are looked at between results
        write.run(self.results, self.writer, self.write_busy, self.failures, admit=self.ledger.answer,
                  tick=lambda: signals.poll(self.stopping, self.deadline, self.aborted, self.stop))

    def close_out(self) -> None:
        """The pages taken and never answered (cut short by a stop, stuck, or lost) get their one record."""
        write.write_all(self.ledger.left_over(self.stopping, self.crash), self.writer, self.write_busy, self.failures)

    def execute(self, watch: Watch | None) -> Summary:
        stages = [("discover", self.discover)] + ([("remote", self.remote)] if self.config.ray else
                                                  [(f"decode-{i}", self.decode) for i in range(self.config.workers)])
        if self.devices is not None:
            self.devices.watchers.append(self.stats)
        threads = [stage_thread(name, fn, on_error=self.stop) for name, fn in stages]
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
            if self.devices is not None:
                self.devices.watchers.remove(self.stats)
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
        if self.reply is not None:
            self.reply.stopped = True
            self.lanes.wake()


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
