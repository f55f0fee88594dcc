"""What a run shows while it goes: a live panel on a terminal, plain timestamped lines elsewhere (progress
every --log-every seconds and one `finished` line; with -v a `started` line too), and the metrics file. All
of it reads snapshots on its own threads (Rich's refresh thread and one ticker); the pipeline never waits on it.

    reporter = Reporter(mode=Reporter.choose_mode(quiet=False, progress=True), ...)
    with reporter:
        summary = run(config, watch=reporter.watch)
        reporter.finish(summary)
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Callable

from rich.console import Console, RenderableType
from rich.text import Text

from ..errors import ExitCode, OutputLockedError, UsageError
from ..pipeline.stats import Snapshot
from . import plain
from .panel import render_panel

if TYPE_CHECKING:
    from ..metrics import MetricsFile
    from ..pipeline.stats import Summary

log = logging.getLogger("ocrbatch")

MODES = ("panel", "plain", "off")


def stderr_is_terminal() -> bool:
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
    return tty and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


class Reporter:
    def __init__(self, *, mode: str, about: dict[str, str] | None = None, log_every: float = 30.0,
                 metrics: MetricsFile | None = None, console: Console | None = None, verbose: bool = False) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        if not log_every > 0:
            raise UsageError("--log-every must be more than 0 seconds")
        self.mode = mode
        self.about = dict(about or {})
        self.title = " · ".join(["ocrbatch", *(f"{k} {v}" for k, v in self.about.items())])
        self.log_every = log_every
        self.metrics = metrics
        self.verbose = verbose  # plain mode: a `started` line too (else only progress lines and the finished one);
        # the panel: the queues, the buffers, why there are no GPU figures
        self.console = console or Console(stderr=True)
        self._snapshot: Callable[[], Snapshot] | None = None
        self._live = None
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self._finished = False

    @staticmethod
    def choose_mode(*, quiet: bool, progress: bool) -> str:
        """-q: nothing; a terminal: the panel (unless --no-progress); anything else: plain lines."""
        if quiet:
            return "off"
        return "panel" if progress and stderr_is_terminal() else "plain"

    # -- the run calls this once, before the first page moves ----------------------------------------
    def watch(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot
        if self.mode == "panel":
            from rich.live import Live

            self._live = Live(get_renderable=self._render, console=self.console, refresh_per_second=4,
                              transient=True, redirect_stdout=False, redirect_stderr=True)
            self._live.start()
        elif self.mode == "plain" and self.verbose:
            self._emit("started", self.about)
        if self.metrics is not None:
            self.metrics.write(snapshot())
        if self.mode == "plain" or self.metrics is not None:
            self._ticker = threading.Thread(target=self._tick, name="reporter", daemon=True)
            self._ticker.start()

    def _render(self) -> RenderableType:
        try:
            return render_panel(self._snapshot(), self.title, self.verbose)  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - a display bug must not stop the run
            return Text(f"ocrbatch: cannot draw the panel: {type(exc).__name__}: {exc}")

    def _tick(self) -> None:
        while not self._stop.wait(self.log_every):
            try:
                snap = self._snapshot()  # type: ignore[misc]
                if self.mode == "plain":
                    self._emit("progress", plain.figures(snap))
                if self.metrics is not None:
                    self.metrics.write(snap)
            except Exception:  # noqa: BLE001 - reporting must never break a run
                log.debug("progress report failed", exc_info=True)

    def _emit(self, event: str, fields: dict[str, str]) -> None:
        try:
            sys.stderr.write(plain.line(event, fields) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed or gone: nothing to tell
            pass

    # -- the end ---------------------------------------------------------------------------------------
    def _stop_threads(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finish(self, summary: Summary) -> None:
        """The run ended with a summary: a last plain line and the final metrics."""
        self._stop_threads()
        self._finished = True
        snap = self._snapshot() if self._snapshot is not None else None
        if self.mode == "plain" and snap is not None:
            review = {"review": str(len(summary.review))} if summary.review_below is not None else {}
            self._emit("finished", {**plain.figures(snap, final=True), **review,
                                    "exit_code": str(int(summary.exit_code))})
        if self.metrics is not None:
            self.metrics.write(snap, exit_code=int(summary.exit_code))

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stop_threads()
        if self._finished or self.metrics is None:
            return
        if isinstance(exc, OutputLockedError):  # the metrics belong to the run that holds the folder
            return
        if isinstance(exc, KeyboardInterrupt):
            code = ExitCode.INTERRUPTED
        else:
            code = getattr(exc, "exit_code", ExitCode.INTERNAL)
        self.metrics.write(self._snapshot() if self._snapshot is not None else None, exit_code=int(code))
