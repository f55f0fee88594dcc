"""What a person sees on stderr: a progress bar on a terminal, a one-line summary at the end."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable, Iterator

from .pipeline.stats import Snapshot


@contextlib.contextmanager
def progress_reporter(enabled: bool) -> Iterator[Callable[[Snapshot], None] | None]:
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    progress = Progress(TextColumn("[bold]converting"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=True)
    task = progress.add_task("pages", total=None, rate="")

    def update(snap: Snapshot) -> None:
        rate = snap.processed / snap.elapsed_s if snap.elapsed_s > 0 else 0.0
        total = None if snap.discovering else snap.pages_total
        progress.update(task, completed=snap.finished, total=total, rate=f"{rate:.2f} pages/s")

    with progress:
        yield update


def print_summary(summary) -> None:
    c = summary.counts
    f = summary.figures
    parts = [f"{c['ok']} ok", f"{c['skipped']} skipped", f"{c['failed']} failed"]
    if c.get("truncated"):
        parts.append(f"{c['truncated']} truncated")
    sys.stderr.write(f"ocrbatch: {summary.pages_total} pages: {', '.join(parts)}; "
                     f"{f['pages_per_s']:.2f} pages/s, {f['wall_s']:.1f} s; output in {summary.output}\n")
