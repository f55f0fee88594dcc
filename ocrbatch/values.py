"""The value types options take once parsed: page ranges (--pages), a part of the inputs (--shard), a batch cap
(--max-batch), the output formats (--format); and the CPUs a process may use (defaults of --workers, --threads).

Each type parses the text a user gives and says why it refuses it (a UsageError naming the flag). Nothing here
knows the option table (table.py) or the typed configs (config.py)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from .errors import UsageError
from .render import NAMES as RENDERERS_NAMES

MAX_BATCH_START = 8  # the first cap on pages per batch; --max-batch auto grows it from here (gpu/throughput.py)


@dataclass(frozen=True)
class PageSelection:
    """1-based, inclusive page ranges; `end=None` means to the last page."""

    ranges: tuple[tuple[int, int | None], ...]

    @classmethod
    def parse(cls, text: "str | PageSelection") -> "PageSelection":
        if isinstance(text, cls):  # parsed already (Option.checked)
            return text
        ranges: list[tuple[int, int | None]] = []
        for part in text.replace(" ", "").split(","):
            m = re.fullmatch(r"(\d+)(?:(-)(\d*))?", part)
            if not m:
                raise UsageError(f"--pages: cannot read {part!r} (use e.g. 1-3,7,10-)")
            start = int(m.group(1))
            end: int | None = start
            if m.group(2):
                end = int(m.group(3)) if m.group(3) else None
            if start < 1 or (end is not None and end < start):
                raise UsageError(f"--pages: {part!r} is not a valid range (pages count from 1)")
            ranges.append((start, end))
        return cls(tuple(ranges))

    def select(self, page_count: int) -> list[int]:
        chosen: set[int] = set()
        for start, end in self.ranges:
            last = page_count if end is None else min(end, page_count)
            chosen.update(range(start, last + 1))
        return sorted(chosen)


@dataclass(frozen=True)
class Shard:
    """--shard I/N: this run converts the I-th (1-based) of N disjoint parts of its inputs, so that N machines
    (cron jobs, no Ray) can share one input folder and one output folder. A source belongs to the part that a
    stable hash of its output stem picks: its path relative to its input root as given (a folder's files
    relative to the folder; a file named on the command line, or listed on stdin, as pipeline/discover.py
    mirrors it), less the extension, casefolded. So `scans/a.pdf` goes to the same part on every machine and
    every run, whatever the machine's mount point, and files that would compete for one output name
    (`report.pdf`, `report.png`) are in one part, told apart as in one run. Each part keeps its own lock and
    manifest (pipeline/lock.py, manifest.py: `manifest.shard-I-of-N.jsonl`)."""

    index: int  # 1..count
    count: int

    @classmethod
    def parse(cls, text: "str | Shard") -> "Shard":
        if isinstance(text, cls):  # parsed already (Option.checked)
            return text
        m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if not m:
            raise UsageError(f"--shard {text}: use I/N, e.g. 1/3 (the first of three parts)")
        index, count = int(m.group(1)), int(m.group(2))
        if count < 1 or not 1 <= index <= count:
            raise UsageError(f"--shard {text}: I must be between 1 and N (parts count from 1), N at least 1")
        return cls(index, count)

    @property
    def name(self) -> str:
        """`shard-I-of-N`: in this part's lock and manifest file names."""
        return f"shard-{self.index}-of-{self.count}"

    def takes(self, stem: str) -> bool:
        """Whether the source whose output stem (relative path less extension) is `stem` is in this part."""
        digest = hashlib.sha256(stem.casefold().encode("utf-8", "surrogateescape")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1



class BatchCap(int):
    """--max-batch, parsed: the first cap on pages per batch (the number itself, so that code sizing things reads
    it as one) and whether the cap grows while throughput gains (`auto`: --max-batch auto starts at
    MAX_BATCH_START; gpu/throughput.py). Pickles (a Ray actor gets it) and compares with both."""

    auto: bool

    def __new__(cls, first: int, auto: bool = False) -> "BatchCap":
        self = super().__new__(cls, first)
        self.auto = bool(auto)
        return self

    def __getnewargs__(self) -> tuple[int, bool]:
        return int(self), self.auto

    def __eq__(self, other: object) -> bool:  # as a number; with another BatchCap, `auto` too
        return int(self) == other and (not isinstance(other, BatchCap) or self.auto == other.auto)

    __hash__ = int.__hash__

    def __repr__(self) -> str:
        return f"BatchCap({int(self)}{', auto=True' if self.auto else ''})"

    @property
    def text(self) -> str:
        """As the user gives it: auto, or the number."""
        return "auto" if self.auto else str(int(self))

    @classmethod
    def parse(cls, value: "int | str") -> "BatchCap":
        """A number of pages, or auto (checked by the row: kind batch)."""
        if isinstance(value, BatchCap):
            return value
        if isinstance(value, str) and value.strip().lower() == "auto":
            return cls(MAX_BATCH_START, True)
        return cls(int(value))


FORMATS = RENDERERS_NAMES  # --format: the output formats (render/: one module each, in its registry)


def parse_formats(text: "str | tuple[str, ...] | list[str]") -> tuple[str, ...]:
    """--format md,txt,pdf → ("md", "txt", "pdf"): any of FORMATS, in its order, md always among them (the
    Markdown is the run's record of each page); UsageError otherwise."""
    parts = [p.strip().lower() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    formats = tuple(sorted(set(parts) | ({"md"} if parts else set()),
                           key=lambda p: FORMATS.index(p) if p in FORMATS else len(FORMATS)))
    why = _formats_problem(",".join(formats))
    if why:
        raise UsageError(f"--format {','.join(parts)}: {why}")
    return formats


def _formats_problem(text: str) -> str | None:
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    if not parts or any(p not in FORMATS for p in parts):
        return f"choose any of {','.join(FORMATS)} (the Markdown is always written)"
    return None



def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers and taskset narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def default_workers() -> int:
    return min(4, available_cpus())

