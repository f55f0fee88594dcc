"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─pages─▶ batch (lanes) ─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ─────────────────┘

Each stage module owns its loop; this file makes the queues, starts the stages in that order and waits.
Batch and infer are the service's (service.py; a Converter's outlives the run); the run's pages go in the
bulk lane and come back through its RunReply (lanes.py). With `--ray` the remote stage (remote.py: Ray as a
device) sends refs to the actors, which decode and infer with these same stages on their devices.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import IO, Any, Callable

from ..config import RunConfig
from ..errors import Interrupted, NoInputsError, OcrbatchError, OutputWriteError, StalledError, UsageError
from ..manifest import NAME as MANIFEST, Manifest, shard_name
from ..memory import return_large_buffers_to_os
from ..records import PageRef, PageResult, Status
from .. import safefiles
from . import count, decode, discover, names, remote, signals, write
from .lanes import RunReply
from .ledger import LedgerQueue, PageLedger
from .lock import OutputLock
from .outputs import Outputs
from .queue import ClosableQueue, stage_thread
from .service import Service, lent
from .stats import Snapshot, Stats, Summary, Watch, summary_dict

log = logging.getLogger("ocrbatch")


class _Run:
    def __init__(self, config: RunConfig, service: Service, stdin: IO[str] | None, follow: Any = None) -> None:
        self.config, self.service, self.stdin, self.out = config, service, stdin, config.output
        self.front, self.lanes, self.devices = service.front, service.lanes, service.devices
        # furniture kept or not changes text-layer pages whatever the engine: resume never mixes the two
        ident = self.front.identity() + ("+furniture" if config.engine_options.keep_furniture else "")
        # --dpi and --text-layer change what a PDF page becomes: resume compares them too
        self.manifest = Manifest(self.out, ident, pdf_options={"dpi": config.dpi, "text_layer": config.text_layer},
                                 name=shard_name(config.shard.name) if config.shard else MANIFEST)
        self.outputs = Outputs(self.out, self.manifest, ident, formats=config.formats, join=config.join,
                               review_below=config.review_below, pages=config.pages, dpi=config.dpi,
                               follow=follow.written if follow is not None else None)
        self.follow = follow
        self.writer = write.Writer(self.out, self.manifest, ident, self.outputs)
        self.found = discover.Discovery()
        # Folders ocrbatch writes are never inputs: the output, and --debug-layout's pictures
        debug = config.engine_options.debug_layout
        self.skip_dirs = [self.out] + ([Path(debug)] if debug else [])
        self.counter = count.PageCounter(config.inputs, config.pages, self.skip_dirs, config.shard)  # the total, ahead
        n_dec = 0 if config.ray else config.workers
        self.stats = Stats(workers={"decode": n_dec, "infer": len(service.device_names)})
        self.ledger = PageLedger()  # every page taken off `refs` gets exactly one record (ledger.py)
        self.refs: ClosableQueue[PageRef] = LedgerQueue(self.ledger, max(64, 4 * n_dec), 1, "decode")
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 1 + n_dec + 1, "write")
        self.reply = RunReply(self.results, self.lanes, n_dec, fail=self.stop) if self.lanes is not None else None
        self.pdfs = decode.PdfCache(size=n_dec + 1)  # open PDFs, shared by the decode threads
        self.crash: BaseException | None = None  # a bug, raised on the main thread
        self.stopping: OcrbatchError | None = None  # why the run takes no more pages (a signal, a write error)
        self.deadline, self.aborted = 0.0, False  # then until when the pages in progress are waited for
        self.dispatcher: Any = None  # remote.RayDevices, with --ray
        self.failures: list[str] = []  # the first 100 failures' lines, for the summary

    # -- the stages, in data-flow order ----------------------------------------------------------
    def discover(self) -> None:
        refs, results = self.refs, self.results
        if self.follow is not None:  # it sees what discovery hands on, in order
            refs, results = _Seen(refs, self.follow.found), _Seen(results, self.follow.found)
        discover.run(self.config.inputs, refs, results, stdin=self.stdin, found=self.found,
                     null_separated=self.config.null_separated, pages=self.config.pages, skip_dirs=self.skip_dirs,
                     is_done=self._is_done, force=self.config.force, names=self.manifest,
                     name_max=_name_max(self.out), shard=self.config.shard)

    def _is_done(self, ref: PageRef) -> bool:
        return self.manifest.is_done(ref) and self.outputs.still_done(ref)

    def decode(self) -> None:  # → batch and infer, in the service
        c = self.config
        try:
            decode.run(self.refs, self.reply.send, self.results, busy=lambda s: self.stats.add_busy("decode", s),
                       read_one=lambda r: decode.read(r, c.dpi, self.pdfs, c.text_layer, self.front, c.max_pixels,
                                                      c.engine_options.keep_furniture,
                                                      c.engine_options.debug_layout))
        finally:
            self.reply.sender_done()

    def remote(self) -> None:
        remote.run(self.config, self.front.capabilities.uses_gpu, self.refs, self.results, self.stats,
                   connected=lambda d: setattr(self, "dispatcher", d))

    def write(self) -> None:  # on the caller's thread
        write.run(self.results, self.writer, self._write_busy, self.failures, tick=self.check_signals,
                  admit=self.ledger.answer)

    def _write_busy(self, seconds: float) -> None:
        self.stats.add_busy("write", seconds)

    def close_out(self) -> None:
        """The pages taken and never answered (cut short by a stop, stuck, or lost) get their one record."""
        status, why = Status.FAILED, "lost: no result came back for this page (an ocrbatch bug; rerun to retry it)"
        if isinstance(self.stopping, StalledError):
            why = f"stalled: {self.stopping}"
        elif isinstance(self.stopping, Interrupted):
            status, why = Status.CANCELLED, f"cancelled: {self.stopping.signal_name} stopped the run first"
        elif self.stopping is not None or self.crash is not None:
            status, why = Status.CANCELLED, f"cancelled: the run stopped first ({self.stopping or self.crash})"
        left = self.ledger.close_out(why)
        if left and status is Status.FAILED and self.stopping is None:
            log.error("%d page(s) got no result: recorded as failed (this is a bug, please report it)", len(left))
        try:
            for result in left:
                result.status = status
                write.write_one(result, self.writer, self._write_busy, self.failures)
        except (OcrbatchError, OSError) as exc:  # the output cannot take them (disk full): the run says so already
            log.debug("cannot record the pages cut short: %s", exc)

    def execute(self, watch: Watch | None) -> Summary:
        stages = [("discover", self.discover)] + ([("remote", self.remote)] if self.config.ray else
                                                  [(f"decode-{i}", self.decode) for i in range(self.config.workers)])
        if self.devices is not None:
            self.devices.watchers.append(self.stats)
        threads = [stage_thread(name, fn, on_error=self.stop) for name, fn in stages]
        if watch is not None:
            self.counter.start()
            watch(self.snapshot)
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
            if self.devices is not None:
                self.devices.watchers.remove(self.stats)
            self.counter.stop()
            self.close_out()
            self.pdfs.close()
            try:
                self.manifest.close()
            except OutputWriteError as exc:  # its rewrite at the end: a full disk then is exit 7 too
                self.stopping = self.stopping or exc
        if self.crash is not None:
            raise self.crash
        return self._summary()

    def check_signals(self) -> None:  # on the writing thread, every half second at least
        timeout = self.config.stall_timeout
        device_stalled = any(d is not None and d.stalled for d in (self.devices, self.dispatcher))
        if self.stopping is None and (self.ledger.stalled(timeout) or device_stalled):
            n = self.ledger.in_flight()
            log.error("no page finished in %.0f s with %d in flight: the engine (or a decoder) is stuck; those "
                      "pages fail and the run stops (--stall-timeout)", timeout, n)
            self.stop(why=StalledError(f"no page finished in {timeout:.0f} s (--stall-timeout); {n} page(s) in "
                                       "flight failed, the rest were not started: rerun to retry"))
        elif (why := signals.requested()) is not None and self.stopping is None:
            log.warning("%s: taking no more pages; finishing the pages in progress (up to %.0f s; send it again "
                        "to stop at once)", why.signal_name, signals.GRACE_S)
            self.stop(why=why, grace_s=signals.GRACE_S)
        elif self.stopping is not None and not self.aborted and (time.monotonic() > self.deadline
                                                                 or signals.forced()):
            if isinstance(self.stopping, Interrupted) and not signals.forced():
                log.warning("the pages in progress did not finish within %.0f s; they are recorded as cancelled "
                            "(a rerun redoes them)", signals.GRACE_S)
            self.stop()

    def stop(self, crash: BaseException | None = None, why: OcrbatchError | None = None, grace_s: float = 0) -> None:
        """Take no more pages (those not in a batch yet are dropped); the batches in progress are written for
        `grace_s`. `why` (a signal, a full disk) ends the run with its summary; a `crash` is raised instead."""
        self.crash = self.crash or crash
        if why is not None and self.stopping is None:
            self.stopping, self.deadline = why, time.monotonic() + grace_s
        self.refs.abort()
        if grace_s <= 0:
            self.aborted = self.service.cut_short = True  # closing it will not wait for the pages in flight
            self.results.abort()
        if self.reply is not None:
            self.reply.stopped = True
            self.lanes.wake()

    def snapshot(self) -> Snapshot:
        lanes, q = self.lanes, {"decode": self.refs, "write": self.results}
        total, discovering = self.found.pages + self.writer.file_failures, not self.refs.closed
        if discovering and self.counter.total is not None:  # counted ahead: the total is known
            total, discovering = max(total, self.counter.total), False
        return self.stats.snapshot(
            pages_total=total, discovering=discovering,
            done={s.value: n for s, n in self.writer.counts.items()}, last_error=self.writer.last_error,
            queue_depth={**{k: len(v) for k, v in q.items()}, "batch": len(lanes or ()), "infer": 0},
            queue_max={**{k: v.maxsize for k, v in q.items()}, "batch": getattr(lanes, "limit", 1), "infer": 1},
            resources=self.service.sampler.latest(),
            infer_workers=(self.devices or self.dispatcher).figures() if self.devices or self.dispatcher else ())

    def _summary(self) -> Summary:
        snap = self.snapshot()
        if not self.found.sources and not self.writer.counts[Status.FAILED] and self.stopping is None:
            raise NoInputsError(f"no PDF or image files found in {', '.join(self.config.inputs)}")
        ray = {**self.dispatcher.facts, "ray_workers": self.dispatcher.workers} if self.dispatcher is not None else {}
        return Summary(counts=snap.done, pages_total=snap.pages_total, sources=self.found.sources,
                       missing_inputs=list(self.found.missing_inputs), renamed=list(self.found.renamed),
                       engine={**self.service.describe(), **ray}, figures=summary_dict(snap),
                       output=str(self.out), failures=self.failures, stopped_by=self.stopping,
                       review_below=self.config.review_below, review=self.outputs.review_list())


class _Seen:
    """A queue as discovery uses it, each item shown to `seen` before it goes in."""

    def __init__(self, queue: ClosableQueue, seen: Callable[[Any], None]) -> None:
        self._queue, self._seen = queue, seen

    def put(self, item: Any, *args: Any, **kw: Any) -> None:
        self._seen(item)
        self._queue.put(item, *args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system of `folder` takes."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return names.NAME_MAX


def run(config: RunConfig, *, stdin: IO[str] | None = None, watch: Watch | None = None,
        service: Callable[[], Service] | None = None, follow: Any = None) -> Summary:
    """Convert everything `config` names; returns the summary; raises OcrbatchError subclasses. `watch` gets a
    function that returns a fresh Snapshot; `service` gives the engine side (a Converter's), else one is made;
    `follow` (e.g. stdout.StdoutPrinter) sees each page ref and early result discovery hands on, in order
    (`found`, on discovery's thread), and each result once written and recorded (`written`, on the writer's)."""
    write.check_output(config.output)
    debug = config.engine_options.debug_layout
    if debug:
        safefiles.check_folder(Path(debug), "--debug-layout")
    return_large_buffers_to_os()  # peak memory flat in the page count (memory.py)
    with OutputLock(config.output, config.shard), lent(config.service, service) as engine_side:  # one per folder
        return _Run(config, engine_side, stdin, follow).execute(watch)
