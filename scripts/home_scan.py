#!/usr/bin/env python3
"""The Home page's picture: the top of sample_docs/invoice.png beside the Markdown ocrbatch makes of it.

    python scripts/home_scan.py docs/home-scan.png

Writes the crop (half size, grey, a small PNG) to the path given, converts the crop at full size with the
embedded engine (`ocrbatch convert CROP -o -`) and prints that Markdown, for docs/index.md.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
CROP = (0, 0, 1240, 960)  # the invoice's head, its addresses and its table of items (A4 at 150 dpi)


def main(dest: Path) -> int:
    with Image.open(ROOT / "sample_docs" / "invoice.png") as im:
        crop = im.convert("L").crop(CROP)
    small = crop.resize((crop.width // 2, crop.height // 2), Image.LANCZOS)
    small.save(dest, optimize=True)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "invoice.png"
        crop.save(full)
        r = subprocess.run([sys.executable, "-m", "ocrbatch", "convert", str(full), "-o", "-", "-q",
                            "--engine", "rapidocr"], capture_output=True, text=True, cwd=ROOT)
    sys.stdout.write(r.stdout)
    print(f"{dest}: {dest.stat().st_size // 1024} KB", file=sys.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
