"""The run's total is counted ahead of discovery: a large job shows its total (and then an ETA) while its
first pages are still in the engine, not only once discovery reaches the last file."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from ocrbatch.config import PageSelection, RunConfig
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.pipeline.run import run
from ocrbatch.ui import plain

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from early_total import make_files  # noqa: E402  (the script's folder of files, made the same way here)

FILES = 1500


class GateEngine(FakeEngine):
    """The fake engine, holding every batch until `gate` opens."""

    name = "gate"
    gate = threading.Event()

    def infer(self, pages):
        self.gate.wait(120)
        return super().infer(pages)


@pytest.fixture(scope="module")
def big_folder(tmp_path_factory) -> tuple[Path, list[int]]:
    """1,500 small files in 15 folders: PDFs of 1-3 pages, 3-frame TIFFs, PNGs, and a damaged PDF; and the page
    count of each readable file."""
    root = tmp_path_factory.mktemp("many")
    counts = make_files(root, FILES - 1, size=(40, 40))
    (root / "box000" / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj\n")  # one failed record
    return root, counts


def _watch_until_known(snapshots: list, done: threading.Event) -> None:
    while not done.is_set():
        snap = snapshots[0]()
        snapshots.append(snap)
        if not snap.discovering:
            return
        time.sleep(0.05)


def test_a_large_job_knows_its_total_while_its_first_pages_are_in_the_engine(big_folder, register_engine, tmp_path):
    root, counts = big_folder
    pages = None
    total = sum(counts) + 1  # the damaged file: one record
    register_engine(GateEngine)
    GateEngine.gate.clear()
    snapshots: list = []
    done = threading.Event()
    known: list = []

    def watch(snapshot) -> None:
        snapshots.append(snapshot)
        threading.Thread(target=lambda: known.append(_watch_until_known(snapshots, done)), daemon=True).start()

    def release() -> None:
        deadline = time.monotonic() + 60  # a guard against hanging, not a timing assertion
        while not known and time.monotonic() < deadline:
            time.sleep(0.05)
        GateEngine.gate.set()

    opener = threading.Thread(target=release, daemon=True)
    opener.start()
    config = RunConfig(inputs=(str(root),), output=tmp_path / "out", engine="gate", workers=2, pages=pages)
    summary = run(config, watch=watch)
    done.set()
    opener.join()
    first_known = next(s for s in snapshots[1:] if not s.discovering)
    assert first_known.pages_total == total == summary.pages_total
    # Known while the engine held its first batch: nothing had finished but skips and the damaged file.
    assert first_known.done.get("ok", 0) == 0 and first_known.finished <= 1
    assert plain.figures(first_known)["pages"] in (f"0/{total}", f"1/{total}")  # no "+": the total is known
    assert summary.counts["failed"] == 1 and summary.counts["ok"] == total - 1


def test_the_count_follows_the_page_selection_and_skips_the_output_folder(tmp_path):
    from ocrbatch.pipeline.count import PageCounter

    page = Image.new("RGB", (40, 40), "white")
    (tmp_path / "in" / "out").mkdir(parents=True)
    page.save(tmp_path / "in" / "five.pdf", save_all=True, append_images=[page] * 4)
    page.save(tmp_path / "in" / "three.tif", save_all=True, append_images=[page] * 2)
    page.save(tmp_path / "in" / "one.png")
    page.save(tmp_path / "in" / "out" / "old.png")  # the output folder inside the input: not counted
    (tmp_path / "in" / "notes.txt").write_text("not a document")
    for selection, want in ((None, 9), ("2-", 7), ("1,4-", 5)):  # 2-: one.png has no page 2, a failed file
        counter = PageCounter([str(tmp_path / "in")], PageSelection.parse(selection) if selection else None,
                              [tmp_path / "in" / "out"])
        counter.start()
        counter.wait()
        assert counter.total == want, selection
    assert PageCounter(["-"], None, []).total is None  # stdin is not read twice
