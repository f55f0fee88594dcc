"""The final summary table on stderr (the same figures `--json` prints on stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import fmt

if TYPE_CHECKING:
    from ..pipeline.stats import Summary


def summary_table(summary: Summary) -> Table:
    c, f = summary.counts, summary.figures
    table = Table(box=None, show_header=False, title="ocrbatch summary", title_justify="left",
                  title_style="bold", pad_edge=False)
    table.add_column(style="dim", no_wrap=True)
    table.add_column()

    parts = [Text(f"{c['ok']} ok", style="green"), Text(f"{c['skipped']} skipped"),
             Text(f"{c['failed']} failed", style="red" if c["failed"] else "")]
    if c.get("truncated"):
        parts.append(Text(f"{c['truncated']} truncated", style="yellow"))
    if c.get("cancelled"):
        parts.append(Text(f"{c['cancelled']} cancelled", style="yellow"))
    files = f" in {summary.sources} file{'s' if summary.sources != 1 else ''}"
    table.add_row("pages", Text.assemble(f"{summary.pages_total}{files}: ", Text(", ").join(parts)))
    if summary.missing_inputs:
        table.add_row("missing", Text(f"{len(summary.missing_inputs)} input(s) not found", style="red"))
    below, review = summary.review_below, summary.review
    if below is not None:
        lowest = f" (lowest: {review[0]['source']} page {review[0]['page']}, {review[0]['score']:.3f})" \
            if review else ""
        table.add_row("review", Text(f"{len(review)} page{'s' if len(review) != 1 else ''} under confidence "
                                     f"{below:g}{lowest}", style="yellow" if review else ""))
    table.add_row("rate", f"{fmt.rate(f['pages_per_s'])} pages/s")
    table.add_row("wall time", fmt.wall(f["wall_s"]))
    busy = f.get("stage_busy_pct", {})
    table.add_row("stage busy", " · ".join(f"{s} {v:.0f}%" for s, v in busy.items()))
    table.add_row("batches", f"{f.get('batches', 0)}, mean {f.get('mean_batch', 0):.1f} pages")
    for w in f.get("infer_workers", []):
        table.add_row(f"infer {w['device'] or ''}".strip(), _worker(w))
    for g in f.get("gpus", []):
        util = "n/a" if g["util_mean_pct"] is None else f"{g['util_mean_pct']:.0f}%"
        table.add_row(f"gpu{g['index']}", f"{g['name']}: utilization mean {util}, peak VRAM "
                                          f"{g['vram_peak_mib'] / 1024:.1f} of {g['vram_total_mib'] / 1024:.1f} GiB")
    if "cpu_mean_pct" in f:
        rss = f.get("rss_peak_mib")
        table.add_row("cpu", f"mean {f['cpu_mean_pct']:.0f}%" +
                             (f", peak RSS {fmt.size(rss * 2**20)}" if rss is not None else ""))
    table.add_row("engine", _engine(summary.engine))
    table.add_row("output", Text(fmt.safe(str(summary.output))))  # Text: a name is never read as markup
    return table


def _worker(w: dict) -> str:
    """One infer worker: cuda:0  154 batches, mean 7.6 · busy 98% · compute 9m20s · copy 0.4 s · cap 8 · ..."""
    parts = [f"{w['batches']} batches, mean {w['mean_batch']:.1f}", f"busy {w['busy_pct']:.0f}%",
             f"compute {fmt.wall(w['compute_s'])}", f"copy {fmt.wall(w['copy_s'])}"]
    if w.get("batch_cap") is not None:
        parts.append(f"cap {w['batch_cap']}")
    if w.get("buffer_allocations") is not None:
        after = w.get("buffer_allocations_after_warmup")
        parts.append(f"buffers {w['buffer_allocations']} made, {'?' if after is None else after} after warm-up")
    if w.get("kv_cache_peak_pct") is not None:
        parts.append(f"KV cache peak {w['kv_cache_peak_pct']:.0f}%")
    return " · ".join(parts)


def _engine(info: dict) -> str:
    """rapidocr (models: PP-OCRv6 small; dtype: bfloat16; attention: sdpa)."""
    rest = "; ".join(f"{k}: {v}" for k, v in info.items() if k != "engine" and v not in (None, ""))
    name = str(info.get("engine", "?"))
    return f"{name} ({rest})" if rest else name


def print_summary(summary: Summary, console: Console | None = None) -> None:
    (console or Console(stderr=True)).print(summary_table(summary))
