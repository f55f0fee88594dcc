"""The Python API: a long-lived converter that keeps its engine loaded and batches pages from every caller.

    from ocrbatch import Converter

    with Converter(engine="rapidocr") as conv:           # nothing loads yet
        summary = conv.convert(["scans/"], "md/")         # what `ocrbatch convert scans -o md` does
        page = conv.submit("invoice.png").result()        # one page, ahead of any bulk work
        for result in conv.stream(["more/"]):             # pages as they finish, no files written
            print(result.ref.label, result.status.value, len(result.markdown))

Public API (everything a server needs; names are stable):

- `Converter(engine="rapidocr", **options)`: the options are the command line's, by their names (the rows of
  config.OPTIONS whose scope has "engine", listed in `help(Converter)`: `model`, `devices`, `max_batch`,
  `max_wait_ms`, `workers`, `dtype`, ...), and `starve_ms` (the longest a bulk page waits while interactive
  pages keep coming). Bad options raise UsageError at once (an engine's own checks, such as deepseek-ocr2
  without a model, on first use). `Converter.from_env(**overrides)` reads OCRBATCH_* variables first.
  A context manager; `close()` waits for pages in flight, then unloads; a closed converter refuses work.
- The engine loads lazily, once per device, on its first batch, and stays loaded until `close()`:
  two `convert` calls load it once. `load()` loads it now (raises EngineLoadError); `check()` runs the
  engine's own checks now without loading it (a server's start); `loaded` says whether every device is
  ready (a server's readiness).
- `convert(inputs, output, *, stdin=None, watch=None, follow=None, **options) -> Summary`: the CLI's run;
  `options` are the run's own options of the command line (the rows of config.OPTIONS to RunConfig that are not
  the engine's: config.RUN_OWN), by their fields' names: `pages` ("1-3,7"), `force`, `null_separated`,
  `formats` ("md,json"), `join`, `review_below`, `shard` ("1/3"); `follow`, as pipeline/run.py says: how
  `-o -` prints pages as they finish. The same files, manifest, resume and `summary.exit_code`; raises
  NoInputsError, UsageError, EngineLoadError, OutputLockedError as the CLI would exit 4, 2, 5, 6; a run
  that a full disk stopped returns its summary with `stopped_by` set (exit code 7). Its pages go in the
  bulk lane.
- `submit(page, priority="interactive", *, pages=None, name=None)`: `page` is a path, the bytes of a PDF
  or image, or a PIL image; `pages` a selection such as "1-3,7" (multi-page documents); `name` labels it in
  messages. A single image gives one `concurrent.futures.Future[PageResult]`; a PDF or multi-frame TIFF a
  list of them, one per selected page (empty when the selection names none of its pages). Safe from any
  number of threads; pages of every caller share batches (an asyncio server awaits them with
  `asyncio.wrap_future`). A page that cannot be read, decoded or converted resolves to a PageResult with
  status `failed` and `message` the CLI's one-line error (file, page, why); a future raises only when the
  engine cannot run at all (EngineLoadError) or the converter was closed (ConverterClosedError: when
  `close()` returns, every future it ever returned is resolved). A file is read afresh by each
  call (a changed file is never served from an earlier one).
- `cancel(futures)` (or `Future.cancel()` on each): a page whose batch has not started is dropped and its
  buffers freed; returns how many were cancelled. For a client that went away.
- `stream(inputs, *, priority="bulk", pages=None)`: the PageResults of everything `inputs` names (files,
  folders), yielded as pages finish, with the one window policy's pages in flight (pipeline/batcher.py:
  `window`, over every device); closing the generator early cancels the rest.
- With `ray=...` every call runs on the cluster through the same executor seam (pipeline/executor.py):
  `convert`, `submit`, `stream` and `load` share the converter's own Ray workers, started on first use and
  kept until `close()` (the CLI starts them for its one run); a PIL image goes to a worker as a PNG file.
- Callbacks: a future's done-callbacks run outside the converter's locks, on the thread that finished the
  page; one may call `submit()` or `close()` (which then returns at once and finishes on its own thread).
- `fork()`: a Converter belongs to the process that made it. In a forked child every call raises
  ConverterClosedError saying so (`close()` only marks the child's copy closed); make a new one there. Futures
  from before the fork resolve in the parent only.
- `stats()`: a dict for health and metrics endpoints: `loaded`, `devices`, `queued` (pages waiting per
  lane), `in_flight` (submitted, not finished), `batches`, `pages`, `mean_batch`, `workers` (per device),
  `stalled` (devices whose stall watchdog gave their pages up: the engine is stuck there).
- `stall_timeout` (seconds, default 1800): a device with pages in hand and none finished for this long is
  stuck, and so is a page being read or prepared for this long; those pages resolve as failed ("stalled"), so
  no caller waits forever (one watchdog, pipeline/watchdog.py; `watchdog` is it, for a server's own check).

PageResult: `markdown`, `status` (ok, failed, truncated), `ok`, `error`, `message`, `timings` (decode_s,
infer_s, batch_size), `info`, `attachments`, `ref` (its `label`: "name page 2").
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path, PurePosixPath
from typing import IO, Any, Iterable, Iterator, Mapping

from .config import ENGINE, RUN_OWN, PageSelection, RunConfig, env_values, options_help, settle
from .errors import ConverterClosedError, UsageError
from .records import Kind, PageImage, PageRef, PageResult, Source, Status
from .pipeline import decode, discover
from .pipeline.engine_side import open_service
from .pipeline.executor import Executor, Job
from .pipeline.lanes import FutureReply, answering
from .pipeline.run import run
from .pipeline.service import Service
from .pipeline.stats import Summary, Watch
from .pipeline.watchdog import Watchdog

PRIORITIES = ("interactive", "bulk")


class Converter:
    def __init__(self, engine: str | None = None, **options: Any) -> None:
        given = {"engine": engine, **options} if engine is not None else options
        # unknown names and refused values (an engine not registered: the `engine` row's choices): UsageError,
        # naming the flag
        values = settle(ENGINE, given)
        self._template = RunConfig.build(inputs=("-",), output=Path("."), **values)
        self._service_config = self._template.service
        self._service: Service | None = None  # its executor runs every page (pipeline/executor.py)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._replies: dict[int, FutureReply] = {}  # every page taken and not landed: close() answers them all
        self._tmp: Path | None = None
        self._closed = False
        self._closer: threading.Thread | None = None  # a close() called from a done-callback finishes on it
        self._pid = os.getpid()  # threads and locks are this process's: a forked child may not use them

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "Converter":
        """Options from OCRBATCH_* variables (a value refused names its variable), keyword arguments winning."""
        return cls(**{**env_values(ENGINE, os.environ if environ is None else environ, skip=overrides), **overrides})

    # -- life ---------------------------------------------------------------------------------------
    def __enter__(self) -> "Converter":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        self.close(wait=exc is None)

    def close(self, wait: bool = True) -> None:
        """Finish the pages in flight (unless not `wait`), unload the engine, remove temporary files. When it
        returns, every future this converter ever returned is resolved: without `wait` (or for a page that
        could not finish) with ConverterClosedError, and the PDFs its pages were read from are closed.

        Called from a future's done-callback (which runs on one of the converter's own threads), it cannot
        wait for those threads: it refuses new work at once and finishes on a thread of its own; every future
        still resolves, and a later close() from elsewhere waits for that finish. In a forked child it only
        marks this copy closed (the threads, the engine and the temporary files are the parent's)."""
        if os.getpid() != self._pid:
            self._closed = True  # no lock: one held at fork() by a parent thread stays held here for good
            return
        with self._lock:  # submitting takes this lock too: no page slips in behind the decode pools' close
            first, self._closed = not self._closed, True
            if first and answering():
                self._closer = threading.Thread(target=self._finish, args=(wait,), name="converter-close",
                                                daemon=True)
            closer = self._closer
        if first and closer is None:
            self._finish(wait)
        elif first:
            closer.start()
        elif closer is not None and not answering() and closer is not threading.current_thread():
            closer.join()  # closed from a callback: resolved when that finish is done

    def _finish(self, wait: bool) -> None:
        try:  # the executor's pages not started are dropped without `wait`: they are answered below
            if self._service is not None:
                self._service.close(wait=wait)
        finally:
            with self._lock:
                left = list(self._replies.values())
            for reply in left:  # a future is answered once: one resolved meanwhile keeps its result
                reply.fail(ConverterClosedError("the converter was closed before this page was converted"))
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    def _here(self) -> None:
        """ConverterClosedError in a forked child: its copy has no decode or device threads (their work would
        wait forever) and may hold locks that parent threads held at fork()."""
        if os.getpid() != self._pid:
            raise ConverterClosedError(f"this Converter was made in process {self._pid} and cannot be used in "
                                       f"a process forked from it ({os.getpid()}): make a new Converter there")

    def _svc(self) -> Service:
        self._here()
        with self._lock:
            if self._closed:
                raise ConverterClosedError("the converter is closed")
            if self._service is None:
                self._service = open_service(self._service_config)
            return self._service

    def check(self) -> None:
        """Set the engine up on its devices without loading it: what it cannot work with (deepseek-ocr2
        without a model, a device that does not exist) raises UsageError now, a missing package
        EngineLoadError, rather than on first use. Cheap; `load()` does it too."""
        self._svc()

    def load(self) -> None:
        """Load the engine on every device now (it would load on the first batch otherwise)."""
        self._svc().executor.load()

    @property
    def config(self) -> RunConfig:
        """The typed configuration its options made (its inputs and output are placeholders, each `convert`'s)."""
        return self._template

    @property
    def engine(self) -> str:
        return self._template.engine

    @property
    def dpi(self) -> int:
        """The resolution PDF pages are rendered at (their page JSON's `dpi`)."""
        return self._template.dpi

    @property
    def watchdog(self) -> Watchdog:
        """The stall watchdog its pages and devices are watched by (pipeline/watchdog.py); a server adds its own."""
        return self._svc().watchdog

    @property
    def loaded(self) -> bool:
        svc = self._service
        return bool(svc is not None and svc.executor.loaded())

    # -- a run, as the CLI does it ----------------------------------------------------------------------
    def convert(self, inputs: str | os.PathLike | Iterable[str | os.PathLike], output: str | os.PathLike, *,
                stdin: IO[str] | None = None, watch: Watch | None = None, follow: Any = None,
                **options: Any) -> Summary:
        """`options`: the run's own (config.RUN_OWN, by their fields' names), checked and parsed by their rows."""
        self._here()
        config = self._template.rerun(_names(inputs), output, **options)
        # the converter's engine side: its engines here, or with `ray=...` its actors, kept for the next call
        return run(config, stdin=stdin, watch=watch, service=self._svc, follow=follow)

    # -- pages, one by one ------------------------------------------------------------------------------
    def submit(self, page: str | os.PathLike | bytes | Any, priority: str = "interactive", *,
               pages: str | PageSelection | None = None, name: str | None = None) -> Future | list[Future]:
        if priority not in PRIORITIES:
            raise UsageError(f"priority {priority!r}: choose interactive or bulk")
        executor = self._executor()
        if isinstance(page, (str, os.PathLike)):
            path = Path(page).expanduser()
            return self._submit_file(path.resolve(), name or str(page), _selection(pages), priority)
        if isinstance(page, (bytes, bytearray, memoryview)):
            path = self._spill(bytes(page))
            futures = self._submit_file(path, name or "<bytes>", _selection(pages), priority)
            _when_all(futures, lambda: path.unlink(missing_ok=True))
            return futures
        if hasattr(page, "convert") and hasattr(page, "size") and not executor.takes_images:  # sent as a file (Ray)
            label = name or "<image>"  # its file named as a page given as an image is named
            path = self._spill(_png(page), PurePosixPath(label).name or "image")
            futures = self._submit_file(path, label, None, priority)
            _when_all(futures, lambda: shutil.rmtree(path.parent, ignore_errors=True))
            return futures
        if hasattr(page, "convert") and hasattr(page, "size"):  # a PIL image
            label = name or "<image>"
            source = Source(Path(label), label, Kind.PNG, PurePosixPath(label), 0, 0, 1, False)
            image = decode.given(PageRef(source, 1), page, self._template.max_pixels)  # over --max-pixels: failed
            return _done(image) if isinstance(image, PageResult) else self._enqueue(PageRef(source, 1), priority,
                                                                                    image)
        raise UsageError(f"cannot convert a {type(page).__name__}: give a path, bytes or a PIL image")

    def cancel(self, futures: Iterable[Future]) -> int:
        """Cancel pages whose batch has not started (they are dropped); returns how many were."""
        self._here()
        n = sum(1 for f in futures if f.cancel())
        svc = self._service
        if svc is not None:
            svc.executor.wake()
        return n

    def stream(self, inputs: str | os.PathLike | Iterable[str | os.PathLike], *, priority: str = "bulk",
               pages: str | PageSelection | None = None) -> Iterator[PageResult]:
        """Everything `inputs` names, as PageResults in the order they finish (no files are written)."""
        self._here()
        found: list[PageRef | PageResult] = []
        discover.discover(_names(inputs), stdin=None, null_separated=False, pages=_selection(pages), skip_dirs=[],
                          found=discover.Discovery(), is_done=lambda ref: False, force=True,
                          emit_page=found.append, emit_result=found.append)
        window = self._svc().window()  # the one window policy (pipeline/batcher.py), over every device
        pending: set[Future] = set()
        pdfs = decode.PdfCache(size=self._template.workers + 1)
        try:
            for item in found:
                if isinstance(item, PageResult):
                    yield item
                    continue
                pending.add(self._enqueue(item, priority, pdfs=pdfs))
                while len(pending) >= window:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    yield from (f.result() for f in done)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                yield from (f.result() for f in done)
        finally:
            self.cancel(pending)
            _when_all(list(pending), pdfs.close)

    def stats(self) -> dict[str, Any]:
        self._here()
        svc = self._service
        executor: Executor | None = svc.executor if svc is not None else None
        workers = [w.as_dict() for w in executor.figures()] if executor is not None else []
        batches, pages = sum(w["batches"] for w in workers), sum(w["pages"] for w in workers)
        return {"loaded": self.loaded, "engine": self._template.engine,
                "devices": list(svc.device_names) if svc is not None else [],
                "queued": executor.depth() if executor is not None else {lane: 0 for lane in PRIORITIES},
                "in_flight": self._in_flight, "batches": batches, "pages": pages,
                "mean_batch": round(pages / batches, 2) if batches else 0.0, "workers": workers,
                "stalled": sorted(executor.stalled) if executor is not None else []}

    # -- internals ----------------------------------------------------------------------------------
    def _executor(self) -> Executor:
        return self._svc().executor

    def _submit_file(self, path: Path, display: str, selection: PageSelection | None,
                     priority: str) -> Future | list[Future]:
        cand = discover.Candidate(path, display, PurePosixPath(Path(display).name))
        try:
            kind, count, st = discover.probe(cand)  # as discovery does: kind by content, page count
        except Exception as exc:  # noqa: BLE001 - DecodeError: the CLI's line; anything else, one line too
            if self._closed:  # the converter closed as it was read (its spilled bytes removed): say that
                return _refused()
            return _done(PageResult.failed_file(path, display, str(exc)))
        multipage = kind is Kind.PDF or (kind is Kind.TIFF and count > 1)
        source = Source(path, display, kind, PurePosixPath(Path(display).stem), st.st_size, st.st_mtime_ns,
                        count, multipage)
        chosen = selection.select(count) if selection else list(range(1, count + 1))
        pdfs = decode.PdfCache(size=1)  # this document's, open while its pages are read (then never stale)
        futures = [self._enqueue(PageRef(source, p), priority, pdfs=pdfs) for p in chosen]
        _when_all(futures, pdfs.close)
        return futures if multipage or not futures else futures[0]

    def _enqueue(self, ref: PageRef, priority: str, image: PageImage | None = None,
                 pdfs: decode.PdfCache | None = None) -> Future:
        """The page to the executor (pipeline/executor.py): read on its decode intake (watched: a page stuck there
        for stall_timeout is answered as stalled), batched, converted; its one result completes the future."""
        executor = self._executor()
        future: Future = Future()
        reply = FutureReply(future, priority, done=lambda: self._landed(id(reply)))
        with self._lock:  # with close()'s check: a page is taken before the executor's end, or refused
            if self._closed:
                return _refused()
            self._in_flight += 1
            self._replies[id(reply)] = reply
        try:
            executor.submit(Job(ref, reply, image=image, pdfs=pdfs, watched=True))
        except Exception as exc:  # noqa: BLE001 - the engine cannot start (Ray: EngineLoadError): its answer
            reply.fail(exc)
        return future

    def _landed(self, key: int) -> None:
        with self._lock:
            self._in_flight -= 1
            self._replies.pop(key, None)

    def _spill(self, data: bytes, name: str | None = None) -> Path:
        """`data` in a file of the converter's own; under `name` (a file name) when given: in a folder of its own."""
        with self._lock:
            if self._closed:
                raise ConverterClosedError("the converter is closed")
            if self._tmp is None:
                self._tmp = Path(tempfile.mkdtemp(prefix="ocrbatch-api-"))
        try:
            if name is not None:
                path = Path(tempfile.mkdtemp(dir=self._tmp)) / name
                path.write_bytes(data)
                return path
            fd, spilled = tempfile.mkstemp(dir=self._tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        except OSError:
            if self._closed:  # its folder was removed by close() meanwhile
                raise ConverterClosedError("the converter is closed") from None
            raise
        return Path(spilled)


def _png(image) -> bytes:
    """A PIL image as PNG bytes: how a page given as an image goes to an executor that reads files (Ray)."""
    import io

    buffer = io.BytesIO()
    decode.rgb_copy(image).save(buffer, "PNG")
    return buffer.getvalue()


def _names(inputs: str | os.PathLike | Iterable[str | os.PathLike]) -> tuple[str, ...]:
    if isinstance(inputs, (str, os.PathLike)):
        return (os.fspath(inputs),)
    return tuple(os.fspath(i) for i in inputs)


def _selection(pages: str | PageSelection | None) -> PageSelection | None:
    return PageSelection.parse(pages) if isinstance(pages, str) else pages


def _refused() -> Future:
    """The future of a page submitted as the converter closed."""
    future: Future = Future()
    future.set_exception(ConverterClosedError("the converter was closed before this page was taken"))
    return future


def _done(result: PageResult) -> Future:
    future: Future = Future()
    future.set_running_or_notify_cancel()
    future.set_result(result)
    return future


def _when_all(futures: Future | list[Future], fn) -> None:
    group = futures if isinstance(futures, list) else [futures]
    if not group:
        fn()
        return
    left = [len(group)]
    lock = threading.Lock()

    def one(_: Future) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            fn()

    for f in group:
        f.add_done_callback(one)


Converter.__doc__ = "Keyword options (config.OPTIONS):\n\n" + options_help(ENGINE)
Converter.convert.__doc__ = (Converter.convert.__doc__ or "") + "\n\n" + "\n".join(
    f"- {o.field}={o.default!r} ({o.flag}): {o.help}" for o in RUN_OWN)

__all__ = ["Converter", "PageResult", "Status", "Summary"]
