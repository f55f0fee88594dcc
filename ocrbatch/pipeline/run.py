"""The orchestrator. Reads like the data flow:

    discover ─refs─▶ decode ×N ─pages─▶ batch (lanes) ─▶ infer ×devices ─results─▶ write
        └──────────────── skips and failures go straight to results ─────────────────┘

Each stage module owns its loop; this file makes the queues, starts the stages in that order and waits.
Batch and infer are the service's (service.py; a Converter's outlives the run); the run's pages go in the
bulk lane and come back through its RunReply (lanes.py). With `--ray`, remote.py replaces decode → infer.
"""

from __future__ import annotations

from typing import IO, Any, Callable

from ..config import RunConfig
from ..errors import NoInputsError
from ..manifest import Manifest
from ..records import PageRef, PageResult, Status
from . import decode, discover, remote, write
from .lanes import RunReply
from .queue import ClosableQueue, stage_thread
from .service import Service
from .stats import Snapshot, Stats, Summary, summary_dict

Watch = Callable[[Callable[[], Snapshot]], None]


class _Run:
    def __init__(self, config: RunConfig, service: Service, stdin: IO[str] | None) -> None:
        self.config, self.service, self.stdin, self.out = config, service, stdin, config.output
        self.front, self.lanes, self.devices = service.front, service.lanes, service.devices
        self.manifest = Manifest(self.out, self.front.identity())
        self.writer = write.Writer(self.out, self.manifest, self.front.identity())
        self.found = discover.Discovery()
        n_dec = 0 if config.ray else config.workers
        self.stats = Stats(workers={"decode": n_dec, "infer": len(service.device_names)})
        self.refs: ClosableQueue[PageRef] = ClosableQueue(max(64, 4 * n_dec), 1, "decode")
        self.results: ClosableQueue[PageResult] = ClosableQueue(256, 1 + n_dec + 1, "write")
        self.reply = RunReply(self.results, self.lanes, n_dec, fail=self.stop) if self.lanes is not None else None
        self.pdfs = decode.PdfCache(size=n_dec + 1)  # open PDFs, shared by the decode threads
        self.crash: BaseException | None = None
        self.dispatcher: Any = None  # remote.Dispatcher, with --ray
        self.failures: list[str] = []  # the first 100 failures' lines, for the summary

    # -- the stages, in data-flow order ----------------------------------------------------------
    def discover(self) -> None:
        discover.run(self.config.inputs, self.refs, self.results, stdin=self.stdin, found=self.found,
                     null_separated=self.config.null_separated, pages=self.config.pages, skip_dirs=[self.out],
                     is_done=self.manifest.is_done, force=self.config.force)

    def decode(self) -> None:  # → batch and infer, in the service
        c = self.config
        try:
            decode.run(self.refs, self.reply.send, self.results, busy=lambda s: self.stats.add_busy("decode", s),
                       read_one=lambda ref: decode.read(ref, c.dpi, self.pdfs, c.text_layer, self.front))
        finally:
            self.reply.sender_done()

    def remote(self) -> None:
        remote.run(self.config, getattr(self.front, "uses_gpu", False), self.refs, self.results, self.stats,
                   connected=lambda d: setattr(self, "dispatcher", d))

    def write(self) -> None:  # on the caller's thread
        write.run(self.results, self.writer, lambda s: self.stats.add_busy("write", s), self.failures)

    # -- driving ----------------------------------------------------------------------------------
    def execute(self, watch: Watch | None) -> Summary:
        stages = [("discover", self.discover)] + ([("remote", self.remote)] if self.config.ray else
                                                  [(f"decode-{i}", self.decode) for i in range(self.config.workers)])
        if self.devices is not None:
            self.devices.watchers.append(self.stats)
        threads = [stage_thread(name, fn, on_error=self.stop) for name, fn in stages]
        if watch is not None:
            watch(self.snapshot)
        for t in threads:
            t.start()
        try:
            self.write()
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

    def stop(self, crash: BaseException | None = None) -> None:
        """Stop early (`crash`: raised by the main thread): the queues wake every thread; this run's pages
        waiting in the lanes are dropped."""
        self.crash = self.crash or crash
        for q in (self.refs, self.results):
            q.abort()
        if self.reply is not None:
            self.reply.stopped = True
            self.lanes.wake()

    def snapshot(self) -> Snapshot:
        lanes, q = self.lanes, {"decode": self.refs, "write": self.results}
        return self.stats.snapshot(
            pages_total=self.found.pages + self.writer.file_failures, discovering=not self.refs.closed,
            done={s.value: n for s, n in self.writer.counts.items()}, last_error=self.writer.last_error,
            queue_depth={**{k: len(v) for k, v in q.items()}, "batch": len(lanes or ()), "infer": 0},
            queue_max={**{k: v.maxsize for k, v in q.items()}, "batch": lanes.limit if lanes is not None else 1,
                       "infer": len(self.service.device_names)},
            resources=self.service.sampler.latest(), infer_workers=self.devices.figures() if self.devices else ())

    def _summary(self) -> Summary:
        snap = self.snapshot()
        if not self.found.sources and not self.writer.counts[Status.FAILED]:
            raise NoInputsError(f"no PDF or image files found in {', '.join(self.config.inputs)}")
        ray = {"ray_workers": self.dispatcher.workers} if self.dispatcher is not None else {}
        return Summary(counts=snap.done, pages_total=snap.pages_total, sources=self.found.sources,
                       missing_inputs=list(self.found.missing_inputs), renamed=list(self.found.renamed),
                       engine={**self.front.describe(), **ray}, figures=summary_dict(snap),
                       output=str(self.out), failures=self.failures)


def run(config: RunConfig, *, stdin: IO[str] | None = None, watch: Watch | None = None,
        service: Callable[[], Service] | None = None) -> Summary:
    """Convert everything `config` names; returns the summary. Raises OcrbatchError subclasses. `watch`, if
    given, is called once before the first page moves, with a function that returns a fresh Snapshot (a
    reader calls it from its own thread). `service` gives the engine side (a Converter's); else one is made."""
    write.check_output(config.output)
    engine_side = Service(config.service) if service is None else service()
    try:
        summary = _Run(config, engine_side, stdin).execute(watch)
    except BaseException:
        if service is None:
            engine_side.close(wait=False)  # pages in flight are dropped, not waited for
        raise
    if service is None:
        engine_side.close()
    return summary
