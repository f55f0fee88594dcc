"""Plain, timestamped log lines for cron and pipes: the panel's key figures as logfmt key=value pairs.

    2026-11-30T12:42:45+0000 ocrbatch: progress pages=120/10000 ok=118 skipped=0 failed=2 rate=2.31/s
    avg_rate=2.10/s eta=1h10m batch=8 mean_batch=7.6 queue=decode:12,batch:3,infer:2,write:0
    busy=decode:40%,batch:0%,infer:98%,write:2% gpu0=95%,30.1/80.0GiB        (one line)
"""

from __future__ import annotations

import time

from ..pipeline.stats import STAGES, Snapshot
from . import fmt


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(now))


def quote(value: str) -> str:
    """A logfmt value, its control characters escaped (fmt.safe): bare when it can be, else double-quoted."""
    value = fmt.safe(value)
    if value and not any(c in value for c in ' ="\\\n'):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def line(event: str, fields: dict[str, str]) -> str:
    body = " ".join(f"{k}={quote(v)}" for k, v in fields.items())
    return f"{timestamp()} ocrbatch: {event}" + (f" {body}" if body else "")


def figures(snap: Snapshot, final: bool = False) -> dict[str, str]:
    """The key figures of a snapshot, in reading order; `final`: whole-run figures only."""
    f = {"pages": f"{snap.finished}/{snap.pages_total}" + ("+" if snap.discovering else "")}
    f.update({k: str(snap.done.get(k, 0)) for k in ("ok", "skipped", "failed")})
    if snap.done.get("truncated"):
        f["truncated"] = str(snap.done["truncated"])
    if final:
        f["avg_rate"] = f"{fmt.rate(snap.rate_avg)}/s"
        f["elapsed"] = fmt.wall(snap.elapsed_s).replace(" ", "")
        f["mean_batch"] = f"{snap.mean_batch:.1f}"
        f["busy"] = ",".join(f"{s}:{fmt.pct(v)}" for s, v in snap.busy_avg.items())
        return f
    f["rate"] = f"{fmt.rate(snap.rate_now)}/s"
    f["avg_rate"] = f"{fmt.rate(snap.rate_avg)}/s"
    f["eta"] = fmt.duration(snap.eta_s)
    f["elapsed"] = fmt.duration(snap.elapsed_s)
    f["batch"] = str(snap.last_batch)
    f["mean_batch"] = f"{snap.mean_batch:.1f}"
    f["queue"] = ",".join(f"{s}:{snap.queue_depth.get(s, 0)}" for s in STAGES)
    f["busy"] = ",".join(f"{s}:{fmt.pct(snap.busy_now.get(s, 0.0))}" for s in STAGES)
    res = snap.resources
    if res is not None:
        for g in res.gpus:
            util = "n/a" if g.util_pct is None else f"{g.util_pct:.0f}%"
            f[f"gpu{g.index}"] = f"{util},{fmt.gib_pair(g.mem_used, g.mem_total).replace(' ', '')}"
        if not res.gpus and res.host is not None:
            f["cpu"] = f"{res.host.cpu_pct:.0f}%"
            f["rss"] = fmt.size(res.host.rss).replace(" ", "")
    return f
