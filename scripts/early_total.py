#!/usr/bin/env python3
"""How soon a large job shows its total and an ETA: generates N small files (PDFs of 1-3 pages, 3-frame TIFFs,
PNGs) and runs `ocrbatch convert --no-progress --log-every 1` on them with the GPU-like `fake-timed` engine
(100 ms per batch + 10 ms per page), printing each progress line with the seconds since the start, until the
first line that has both a total (no "+") and an ETA, then stops the run (SIGTERM).

    python scripts/early_total.py            # 1,500 files
    python scripts/early_total.py 5000
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent


def make_files(root: Path, n: int, size: tuple[int, int] = (400, 560)) -> list[int]:
    """N small blank files in folders of 100: PDFs of 1-3 pages, 3-frame TIFFs and PNGs in turn; each one's
    page count (tests/test_early_total.py makes its folder here too)."""
    page = Image.new("RGB", size, "white")
    counts = []
    for i in range(n):
        folder = root / f"box{i // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        if i % 3 == 0:
            k = 1 + (i // 3) % 3
            page.save(folder / f"d{i}.pdf", save_all=True, append_images=[page] * (k - 1))
        elif i % 3 == 1:
            k = 3
            page.save(folder / f"t{i}.tif", save_all=True, append_images=[page] * 2)
        else:
            k = 1
            page.save(folder / f"p{i}.png")
        counts.append(k)
    return counts


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv else 1500
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "in"
        pages = sum(make_files(root, n))
        print(f"{n} files, {pages} pages")
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "ocrbatch", "convert", str(root), "-o", str(Path(tmp) / "out"),
                                 "--engine", "fake-timed", "--no-progress", "--log-every", "1"],
                                cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            for line in proc.stderr:
                if " ocrbatch: progress " not in line:
                    continue
                total = re.search(r"pages=(\S+)", line).group(1)
                eta = re.search(r"eta=(\S+)", line).group(1)
                print(f"{time.monotonic() - t0:5.1f} s  pages={total} eta={eta}")
                if "+" not in total and eta != "?":
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
