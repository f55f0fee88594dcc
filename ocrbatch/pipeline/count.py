"""The run's pages counted ahead of discovery, so that its total (and so its ETA) is known in its first seconds.

Discovery hands pages to the decoders through a bounded queue: it stays a few hundred pages ahead of them, and
the total is known only when it reaches the last file. The counter walks the same inputs on a thread of its
own and counts each file's pages the way discovery probes them (a PDF's page count from its page tree, under
the PDFium lock; a TIFF's, GIF's or WebP's frames; one for any other image), rendering nothing. A file that
cannot be read, or of which --pages selects nothing, counts one, as it will have one failed record. Paths read from stdin cannot be read twice:
with `-` among the inputs the total stays open until discovery ends.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Iterable

from ..config import PageSelection, Shard
from . import discover

log = logging.getLogger("ocrbatch")


class PageCounter:
    def __init__(self, inputs: Iterable[str], pages: PageSelection | None, skip_dirs: Iterable[Path],
                 shard: Shard | None = None) -> None:
        self.inputs, self.pages, self.skip_dirs, self.shard = tuple(inputs), pages, tuple(skip_dirs), shard
        self._total: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def total(self) -> int | None:
        """Every page the run will record (skipped ones too), once counted; None until then."""
        return self._total

    def start(self) -> None:
        if "-" in self.inputs:
            return
        self._thread = threading.Thread(target=self._count, name="count", daemon=True)
        self._thread.start()

    def wait(self) -> None:
        """Until the count is done (or given up)."""
        if self._thread is not None:
            self._thread.join()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _count(self) -> None:
        n = 0
        try:
            for cand in discover.iter_candidates(self.inputs, None, False, self.skip_dirs,
                                                 discover.Discovery(quiet=True)):
                if self._stop.is_set():
                    return
                if not discover.in_shard(cand, self.shard):  # --shard: this part's files only
                    continue
                if not isinstance(cand, discover.Candidate):
                    n += 1  # a failed file: one record
                    continue
                try:
                    probed = discover.probe_file(cand)
                    count = probed.count
                    chosen = len(self.pages.select(count)) if self.pages else count
                    # the pages a damaged PDF claims and lacks: one record
                    chosen += probed.missing(cand.display, cand.path, self.pages) is not None
                    n += chosen or 1  # a selection that names none of its pages fails the file: one record
                except Exception:  # noqa: BLE001 - discovery records it as one failed file
                    n += 1
        except Exception:  # noqa: BLE001 - a count is a nicety: without it the total comes with discovery
            log.debug("counting pages ahead failed", exc_info=True)
            return
        self._total = n
