"""`--metrics-file`: the run's figures in Prometheus text format, for node_exporter's textfile collector.

The file is replaced atomically (temporary file in the same folder, then rename), so the collector never
reads half of it, during the run and at its end. `ocrbatch_last_success_timestamp_seconds` is carried over
from the previous file until a run ends with every page done (exit 0), so an alert such as
`time() - ocrbatch_last_success_timestamp_seconds > 86400` works across failed runs.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path

from . import safefiles
from .atomic import TEMP_NAME_CHARS
from .errors import UsageError
from .pipeline.stats import STAGES, Snapshot

log = logging.getLogger("ocrbatch")

LAST_SUCCESS = "ocrbatch_last_success_timestamp_seconds"
MAX_BYTES = 1 << 20  # an earlier metrics file is read only up to this (ocrbatch's are a few kilobytes)
STATUSES = ("ok", "skipped", "failed", "truncated", "cancelled")


class MetricsFile:
    def __init__(self, path: Path) -> None:
        if safefiles.check_folder(path.parent, "--metrics-file: folder") is None:
            raise UsageError(f"--metrics-file: folder {path.parent} does not exist")
        safefiles.check_file(path, "--metrics-file")  # a FIFO, /dev/full, /dev/null...: refused, never replaced
        self.path = path
        self.last_success = previous_value(path, LAST_SUCCESS)
        self._lock = threading.Lock()  # the periodic writer and the final write may meet
        self._warned = False

    def write(self, snap: Snapshot | None, exit_code: int | None = None) -> None:
        """Replace the file; `exit_code` None means the run is still going. Never raises OSError."""
        with self._lock:
            if exit_code == 0:
                self.last_success = time.time()
            text = render(snap, exit_code=exit_code, last_success=self.last_success)
            try:
                _replace(self.path, text)
            except (OSError, UsageError) as exc:
                if not self._warned:
                    log.warning("cannot write the metrics file %s: %s", self.path,
                                getattr(exc, "strerror", None) or exc)
                    self._warned = True


def render(snap: Snapshot | None, *, exit_code: int | None, last_success: float | None) -> str:
    out: list[str] = []

    def metric(name: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
        if not samples:
            return
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{lab}}} {_num(value)}" if lab else f"{name} {_num(value)}")

    metric("ocrbatch_running", "1 while a run is going, 0 once it has ended.", [({}, exit_code is None)])
    if exit_code is not None:
        metric("ocrbatch_exit_code", "Exit status of the last run (0 all done, 3 some pages failed).",
               [({}, exit_code)])
    if last_success is not None:
        metric(LAST_SUCCESS, "When a run last ended with every page done (exit 0), seconds since the epoch.",
               [({}, last_success)])
    if snap is not None:
        metric("ocrbatch_run_start_timestamp_seconds", "When the current or last run started.",
               [({}, snap.started_at)])
        metric("ocrbatch_run_duration_seconds", "Seconds since the run started (its wall time once ended).",
               [({}, snap.elapsed_s)])
        metric("ocrbatch_pages", "Pages of this run by status.",
               [({"status": s}, snap.done.get(s, 0)) for s in STATUSES])
        metric("ocrbatch_pages_discovered", "Pages found so far in the inputs.", [({}, snap.pages_total)])
        metric("ocrbatch_pages_per_second", "Pages converted per second, recently and over the run.",
               [({"window": "recent"}, snap.rate_now), ({"window": "run"}, snap.rate_avg)])
        metric("ocrbatch_stage_busy_ratio", "Share of a stage's threads busy over the run (0..1).",
               [({"stage": s}, v) for s, v in snap.busy_avg.items()])
        metric("ocrbatch_stage_queue_depth", "Items waiting in front of each stage (infer: batches).",
               [({"stage": s}, snap.queue_depth.get(s, 0)) for s in STAGES])
        metric("ocrbatch_batch_size_mean", "Mean pages per engine batch.", [({}, snap.mean_batch)])
        _resources(snap, metric)
    return "\n".join(out) + "\n"


def _resources(snap: Snapshot, metric) -> None:
    res = snap.resources
    if res is None:
        return
    gpus = [({"gpu": str(g.index), "name": g.name}, g) for g in res.gpus]
    metric("ocrbatch_gpu_utilization_percent", "GPU utilization (NVML, whole device).",
           [(lab, g.util_pct) for lab, g in gpus if g.util_pct is not None])
    metric("ocrbatch_gpu_memory_used_bytes", "GPU memory in use (NVML, whole device).",
           [(lab, g.mem_used) for lab, g in gpus])
    metric("ocrbatch_gpu_memory_peak_bytes", "Most GPU memory in use seen during the run.",
           [(lab, g.mem_peak) for lab, g in gpus])
    metric("ocrbatch_gpu_memory_total_bytes", "GPU memory size.", [(lab, g.mem_total) for lab, g in gpus])
    if res.host is not None:
        metric("ocrbatch_process_cpu_percent", "CPU used by ocrbatch recently (100 = one core).",
               [({}, res.host.cpu_pct)])
        if res.host.rss is not None:
            metric("ocrbatch_process_resident_memory_bytes", "Resident memory of ocrbatch.", [({}, res.host.rss)])


def previous_value(path: Path, name: str) -> float | None:
    """The value of an unlabelled sample `name` in an existing metrics file, if there is one (UsageError when
    the path is not a regular file, or larger than any ocrbatch writes)."""
    try:
        text = safefiles.read_text(path, "--metrics-file", MAX_BYTES)
    except OSError:
        return None
    if text is None:
        return None
    m = re.search(rf"^{re.escape(name)}\s+(\S+)\s*$", text, re.MULTILINE)
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def _replace(path: Path, text: str) -> None:
    # Not pipeline.write.atomic_write: the collector runs as another user, so the file must be readable
    # (mkstemp makes it 0600) before the rename, and its temporary name must not end in .prom.
    safefiles.check_file(path, "--metrics-file")  # something else put there since: not replaced
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:TEMP_NAME_CHARS]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if hasattr(os, "fchmod"):
                os.fchmod(fh.fileno(), 0o644)
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(round(float(value), 6))
