"""A manifest append that the file system cuts short (a full disk, a file size limit) leaves no half line:
the line is taken back off and the error raised, so every later reader sees only whole records."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT

CHILD = textwrap.dedent("""
    import resource, signal, sys
    from pathlib import Path, PurePosixPath
    from ocrbatch.errors import OutputWriteError
    from ocrbatch.manifest import Manifest
    from ocrbatch.records import Kind, PageRef, PageResult, Source, Status

    out = Path(sys.argv[1])
    manifest = Manifest(out, "fake")
    src = Source(Path("/docs/report.pdf"), "report.pdf", Kind.PDF, PurePosixPath("report"), 1, 1, 500, True)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))  # the 5th or so line crosses it, part-way
    for page in range(1, 500):
        try:
            manifest.record(PageResult(ref=PageRef(src, page), status=Status.OK), "fake")
        except OutputWriteError as exc:
            print("stopped at page", page, exc)
            break
    """)


def test_a_line_the_disk_cut_short_is_taken_back(tmp_path):
    r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert "stopped at page" in r.stdout, r.stderr
    data = (tmp_path / "manifest.jsonl").read_bytes()
    assert 0 < len(data) <= 1000 and data.endswith(b"\n")  # only whole lines, as many as fitted
