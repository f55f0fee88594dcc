"""The live panel: one Rich renderable built from a Snapshot, nothing else.

    ╭─ ocrbatch · rapidocr → out ──────────────────────────────────────────────────╮
    │ ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╺━━━━━━━━━━━━  1,234/10,000 pages  12%  ETA 1h10m │
    │ rate     2.31 pages/s now · 2.10 average · 9m48s elapsed                    │
    │ pages    ok 1,230 · skipped 0 · failed 4                                    │
    │ batch    8 now · 7.6 mean · 154 batches · 8 in the engine, 40% read          │
    │ stage    busy now                                                           │
    │ decode   ███▊       38%                                                     │
    │ ...                                                                         │
    │ infer cpu  154 batches · 7.6 mean · busy 98% · compute 9m20s · copy 0.0 s     │
    │ cpu      ██████▌    1.8 of 2 cores busy · RSS 1.3 GiB · 2.31 pages/s         │
    │ last error  scan.pdf page 3: RuntimeError: ...                             │
    ╰──────────────────────────────────────────────────────────────────────────────╯

The share and the ETA count how far the engines are into their batches (Snapshot.partial), so a CPU batch of
several pages does not read 0% until it ends. On a GPU its utilisation and VRAM take the cpu row's place. With
-v: the queue in front of each stage ("waiting"), the engine's buffers, and why there are no GPU figures.

Bars are Text so that the panel renders the same in a recording console as on a terminal.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from ..pipeline.stats import STAGES, Snapshot, WorkerFigures
from . import fmt

_EIGHTHS = " ▏▎▍▌▋▊▉"


def meter(fraction: float, width: int = 10) -> Text:
    """A horizontal bar of `width` cells, coloured by how full it is."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = int(round(fraction * width * 8))
    full, part = divmod(eighths, 8)
    bar = "█" * full + (_EIGHTHS[part] if part else "")
    style = "red" if fraction >= 0.9 else "yellow" if fraction >= 0.6 else "green"
    return Text(bar.ljust(width), style=style)


def render_panel(snap: Snapshot, title: str = "ocrbatch", verbose: bool = False) -> RenderableType:
    """The panel; `verbose` (-v) adds what is for tuning: the queues in front of each stage, the buffers, why there
    are no GPU figures."""
    return Panel(Group(_progress(snap), _figures(snap), _stages(snap, verbose), _workers(snap, verbose),
                       _resources(snap, verbose), *_last_error(snap)),
                 title=Text(fmt.safe(title), style="bold"), title_align="left", border_style="blue")


def _progress(snap: Snapshot) -> Table:
    row = Table.grid(padding=(0, 2), expand=True)
    row.add_column(ratio=1)
    row.add_column(justify="right", no_wrap=True)
    if snap.discovering:
        bar = ProgressBar(total=None, pulse=True)
        count = f"{snap.finished:,}/{snap.pages_total:,}+ pages (finding more)"
        eta = "ETA ?"
    else:  # the share includes how far the engines are into their batches: it moves before a batch ends
        total = max(snap.pages_total, 1)
        bar = ProgressBar(total=total, completed=snap.progress)
        count = f"{snap.finished:,}/{snap.pages_total:,} pages  {snap.progress / total:.0%}"
        eta = f"ETA {fmt.duration(snap.eta_s)}"
    row.add_row(bar, Text.assemble(count, "  ", (eta, "bold")))
    return row


def _figures(snap: Snapshot) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    grid.add_row("rate", Text.assemble((fmt.rate(snap.rate_now), "bold"), " pages/s now · ",
                                       fmt.rate(snap.rate_avg), " average · ",
                                       fmt.duration(snap.elapsed_s), " elapsed"))
    counts = [(f"ok {snap.done.get('ok', 0):,}", "green"), (f"skipped {snap.done.get('skipped', 0):,}", ""),
              (f"failed {snap.done.get('failed', 0):,}", "red" if snap.done.get("failed") else "")]
    if snap.done.get("truncated"):
        counts.append((f"truncated {snap.done['truncated']:,}", "yellow"))
    grid.add_row("pages", Text(" · ").join(Text(t, style=s) for t, s in counts))
    running = sum(w.running for w in snap.infer_workers)
    in_engine = f" · {running} in the engine, {snap.partial / running:.0%} read" if running and snap.partial else ""
    grid.add_row("batch", f"{snap.last_batch} now · {snap.mean_batch:.1f} mean · {snap.batches:,} batches"
                          f"{in_engine}")
    return grid


def _stages(snap: Snapshot, verbose: bool = False) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="dim", no_wrap=True)
    if verbose:  # the queues in front of each stage: for tuning, not for following a run
        table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(justify="right", no_wrap=True)
    table.add_row("stage", *([Text("waiting", style="dim")] if verbose else []), Text("busy now", style="dim"), "")
    busiest = max(STAGES, key=lambda s: snap.busy_now.get(s, 0.0))
    for stage in STAGES:
        unit = "batches" if stage == "infer" else "pages"
        depth = snap.queue_depth.get(stage, 0)
        cap = snap.queue_max.get(stage)
        waiting = f"{depth:,}/{cap:,} {unit}" if cap else f"{depth:,} {unit}"
        busy = snap.busy_now.get(stage, 0.0)
        threads = snap.workers.get(stage, 1)
        name = Text(stage + (f" ×{threads}" if threads > 1 else ""),
                    style="bold" if stage == busiest and busy >= 0.5 else "")
        table.add_row(name, *([waiting] if verbose else []), meter(busy), fmt.pct(busy))
    return table


def worker_line(w: WorkerFigures, verbose: bool = True) -> str:
    """One infer worker's figures (the panel and the summary table share it); the buffers only if `verbose`."""
    parts = [f"{w.batches:,} batches", f"{w.mean_batch:.1f} mean", f"busy {fmt.pct(w.busy_frac)}",
             f"compute {fmt.wall(w.compute_s)}", f"copy {fmt.wall(w.copy_s)}"]
    if w.cap is not None:
        parts.append(f"cap {int(w.cap)}{' (auto)' if getattr(w.cap, 'auto', False) else ''}")
    if w.allocations is not None and verbose:
        after = "?" if w.allocations_after_warmup is None else f"{w.allocations_after_warmup:,}"
        parts.append(f"buffers {w.allocations:,} made, {after} after warm-up")
    if w.kv_cache is not None:
        parts.append(f"KV cache {fmt.pct(w.kv_cache)} (peak {fmt.pct(w.kv_cache_peak or 0.0)})")
    return " · ".join(parts)


def _workers(snap: Snapshot, verbose: bool = False) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for w in snap.infer_workers:
        grid.add_row(f"infer {w.device or ''}".strip(), worker_line(w, verbose))
    return grid


def _resources(snap: Snapshot, verbose: bool = False) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(no_wrap=True)
    res = snap.resources
    if res is None:
        grid.add_row("device", Text("sampling…", style="dim"))
        return grid
    for g in res.gpus:
        util = Text("util n/a", style="dim") if g.util_pct is None else Text.assemble(
            "util ", meter(g.util_pct / 100), f" {g.util_pct:.0f}%")
        mem = g.mem_used / g.mem_total if g.mem_total else 0.0
        grid.add_row(f"gpu{g.index}", Text.assemble(g.name, "  ", util, "  VRAM ", meter(mem), " ",
                                                    fmt.gib_pair(g.mem_used, g.mem_total)))
    if not res.gpus and res.host is not None:  # a CPU run: its own figures, not why there are no GPU ones
        h = res.host
        busy = h.cpu_pct / 100
        grid.add_row("cpu", Text.assemble(meter(busy / h.cores), f" {busy:.1f} of {h.cores} cores busy · "
                                          f"RSS {fmt.size(h.rss)} · {fmt.rate(snap.rate_now or snap.rate_avg)} "
                                          "pages/s",
                                          (f"   no GPU data ({res.gpu_note})" if verbose and res.gpu_note else "",
                                           "dim")))
    return grid


def _last_error(snap: Snapshot) -> list[RenderableType]:
    if not snap.last_error:
        return []
    line = snap.last_error.splitlines()[0] if snap.last_error.strip() else snap.last_error
    return [Text.assemble(("last error  ", "dim"), (line, "red"), no_wrap=True, overflow="ellipsis")]
