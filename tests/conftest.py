from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def dev_corpus() -> Path:
    path = SHARED / "bench" / "dev"
    if not path.is_dir():
        pytest.skip("../shared/bench/dev is not beside this checkout")
    return path


def draw_page(text: str, size: tuple[int, int] = (600, 800), font_size: int = 28) -> Image.Image:
    """A white page with `text` (one line per \\n) in Pillow's built-in font."""
    im = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(im)
    f = ImageFont.load_default(size=font_size)
    y = 40
    for line in text.splitlines():
        d.text((40, y), line, font=f, fill="black")
        y += int(font_size * 1.6)
    return im


def save_pdf(path: Path, pages: list[Image.Image]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pages[0].save(path, save_all=True, append_images=pages[1:], resolution=100)
    return path


def run_cli(*args: str, cwd: Path | None = None, stdin: str | bytes | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m ocrbatch ARGS` as a user would (stderr is not a terminal)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "ocrbatch", *args], cwd=cwd, input=stdin,
                          capture_output=True, env=full_env, text=not isinstance(stdin, bytes))


def manifest(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines() if line]


@pytest.fixture
def register_engine():
    """Registers test engines (tests/engines) under their names for in-process runs; gone after the test.
    `register_engine(cls)` returns the name. The one way tests add engines."""
    from ocrbatch.engines import registry

    names: list[str] = []

    def register(cls) -> str:
        registry.register(cls.name, cls)
        names.append(cls.name)
        return cls.name

    yield register
    for name in names:
        registry.unregister(name)


@pytest.fixture
def engine(request, register_engine):
    """The engine named by `request.param` (a class from tests/engines), registered (use with indirect=True)."""
    return register_engine(request.param)


@pytest.fixture(scope="session")
def rapid():
    """The embedded PP-OCR engine with default options, loaded once for every test that reads pages with it."""
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.rapid import RapidOcrEngine

    e = RapidOcrEngine(EngineOptions())
    e.load("cpu")
    yield e
    e.close()


def raw_pdf(objects: list[bytes], trailer: bytes = b"", pad: int = 0) -> bytes:
    """A PDF file of these object bodies (numbered from 1; object 1 the catalog) with a correct xref table;
    `trailer` adds entries to the trailer dictionary (e.g. /Encrypt); `pad` bytes of comment make the file that
    much larger."""
    out = bytearray(b"%PDF-1.4\n" + (b"%" + b"x" * pad + b"\n" if pad else b""))
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, trailer, xref)
    return bytes(out)


@pytest.fixture(autouse=True)
def _ocrbatch_loggers_as_found():
    """The CLI run in-process (CliRunner) sets up the `ocrbatch` loggers for a terminal (own handlers, no
    propagation); put them back after each test, so a later test's caplog sees their records whatever ran first."""
    import logging

    saved = {n: (lg.handlers[:], lg.propagate, lg.level)
             for n in ("ocrbatch", "ocrbatch.files") for lg in [logging.getLogger(n)]}
    yield
    for n, (handlers, propagate, level) in saved.items():
        lg = logging.getLogger(n)
        lg.handlers[:], lg.propagate = handlers, propagate
        lg.setLevel(level)
