"""The executor seam (pipeline/executor.py): where pages run, behind the same calls here and on a Ray cluster.

- the one batching-window policy (pipeline/batcher.py `window`), as `Converter.stream` and a server use it;
- the one decode intake answers each page exactly once, whatever raises where;
- the contract: the same pages through the seam locally and on a local Ray cluster give the same records.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path, PurePosixPath

import pytest

from ocrbatch import Converter
from ocrbatch.errors import EngineLoadError
from ocrbatch.pipeline import decode
from ocrbatch.pipeline.batcher import window
from ocrbatch.pipeline.executor import Intake, Job
from ocrbatch.records import Kind, PageRef, Source

from conftest import draw_page, manifest, save_pdf


def test_the_window_is_two_batches_per_device_and_twice_that_when_rows_join_continuously():
    assert window(8) == 16 and window(8, devices=3) == 48 and window(8, 1, streams=True) == 32
    assert window(1, 1) == 2 and window(1, 1, streams=True) == 4  # the Ray driver's tasks per actor
    from ocrbatch.config import MAX_BATCH_START
    from ocrbatch.serve.config import ServeConfig

    assert ServeConfig().window == 2 * MAX_BATCH_START  # a server's request: one caller among many


def test_stream_keeps_its_window_of_pages_in_flight_and_yields_each_page_once(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(10):
        draw_page(f"Note {i}", (300, 200)).save(folder / f"note{i}.png")
    with Converter(engine="fake", max_batch=2, devices="cpu", workers=2) as conv:
        enqueue, out, seen, most = conv._enqueue, [], [], [0]

        def counted(*args, **kwargs):  # pages submitted and not yet yielded, at each submit
            future = enqueue(*args, **kwargs)
            out.append(future)
            most[0] = max(most[0], len(out) - len(seen))
            return future

        conv._enqueue = counted
        for result in conv.stream(folder):
            seen.append(result.ref.source.path.name)
    assert sorted(seen) == sorted(f"note{i}.png" for i in range(10)) and len(out) == 10
    assert most[0] == 4  # two batches of two on its one device: the policy, not a window of its own


class _Reply:
    """Counts every answer a page gets (the invariant: exactly one)."""

    lane = "bulk"

    def __init__(self, wanted: bool = True) -> None:
        self.answers: list[str] = []
        self._wanted = wanted
        self.done = threading.Event()

    def wanted(self) -> bool:
        return self._wanted

    def start(self) -> bool:
        if not self._wanted:
            self._answer("dropped")
        return self._wanted

    def deliver(self, result) -> None:
        self._answer(result.status.value)

    def fail(self, exc) -> None:
        self._answer(type(exc).__name__)

    def _answer(self, what: str) -> None:
        self.answers.append(what)
        self.done.set()


class _Front:
    """A front whose prepare raises what it is given for one page."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.raises = raises

    def prepare(self, page):
        if self.raises is not None:
            raise self.raises
        return page


def _ref(path: Path) -> PageRef:
    st = path.stat()
    return PageRef(Source(path, path.name, Kind.PNG, PurePosixPath(path.stem), st.st_size, st.st_mtime_ns, 1, False),
                   1)


@pytest.mark.parametrize("case", ["unreadable", "prepare-fails", "engine-cannot-load", "unwanted", "to-the-lanes"])
def test_the_intake_answers_each_page_exactly_once_whatever_raises(tmp_path, case):
    good, bad = tmp_path / "good.png", tmp_path / "bad.png"
    draw_page("Hello", (300, 200)).save(good)
    bad.write_bytes(b"not an image at all")
    raises = {"prepare-fails": ValueError("no"), "engine-cannot-load": EngineLoadError("no weights")}.get(case)
    put: list = []
    intake = Intake(1, decode.DecodeSettings(dpi=150), _Front(raises), put.append, watchdog=None)
    reply = _Reply(wanted=case != "unwanted")
    pdfs = decode.PdfCache(1)
    try:
        intake.submit(Job(_ref(bad if case == "unreadable" else good), reply, pdfs=pdfs), block=True)
        intake.close(wait=True)
    finally:
        pdfs.close()
    if case == "to-the-lanes":  # handed on: its answer is the device's to give
        assert len(put) == 1 and put[0].reply is reply and reply.answers == []
        return
    expected = {"unreadable": "failed", "prepare-fails": "failed", "engine-cannot-load": "EngineLoadError",
                "unwanted": "dropped"}[case]
    assert reply.answers == [expected] and put == []


class _Hanging(_Front):
    """A front whose prepare hangs on its first page until `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.first = True

    def prepare(self, page):
        if self.first:
            self.first = False
            self.release.wait(60)
        return page


def test_the_intake_calls_back_once_the_pages_it_took_are_handed_on_a_stuck_one_answered_counts(tmp_path):
    """What `expire` waits on: pages still being decoded reach the lanes first. A page stuck on its thread,
    answered as stalled by the watchdog, is no longer waited for (else a later run's last pages would wait out
    their batching window)."""
    from ocrbatch.pipeline.watchdog import Watchdog

    first, second = tmp_path / "first.png", tmp_path / "second.png"
    for path in (first, second):
        draw_page("Hello", (300, 200)).save(path)
    put: list = []
    front = _Hanging()
    watchdog = Watchdog(0.5)
    intake = Intake(1, decode.DecodeSettings(dpi=150), front, put.append, watchdog=watchdog)
    stuck, other = _Reply(), _Reply()
    called = threading.Event()
    pdfs = decode.PdfCache(1)
    try:
        intake.submit(Job(_ref(first), stuck, pdfs=pdfs, watched=True))
        intake.submit(Job(_ref(second), other, pdfs=pdfs, watched=True))
        intake.after_taken(called.set)
        assert stuck.done.wait(30) and stuck.answers == ["failed"]  # stalled: answered by the watchdog
        assert called.wait(30) and len(put) == 1 and put[0].reply is other  # the other page reached the lanes
        later = threading.Event()
        intake.after_taken(later.set)
        assert later.is_set()  # nothing is being read (the stuck page was answered): at once
    finally:
        front.release.set()
        intake.close(wait=False)
        watchdog.close()
        pdfs.close()


# -- the contract: the same pages here and on a local Ray cluster -------------------------------------------------

VOLATILE = {"timings", "finished_at"}  # when and how fast: never the same twice


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    from ocrbatch.pipeline.cluster import LOCAL_SYSTEM_CONFIG

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _system_config=LOCAL_SYSTEM_CONFIG)  # as --ray local starts it
    yield
    ray.shutdown()


def _pages(root: Path) -> Path:
    from test_layout_textlayer import report_with_furniture

    (root / "scans").mkdir(parents=True)
    draw_page("Invoice 2041\nTotal due 310.00", (700, 400)).save(root / "scans" / "invoice.png")
    draw_page("Minutes of the meeting", (700, 400)).save(root / "minutes.jpg")
    save_pdf(root / "report.pdf", [draw_page(f"Report page {n}\nNothing to add", (700, 400)) for n in (1, 2, 3)])
    report_with_furniture(root / "layered.pdf")  # text-layer pages: read while decoding
    draw_page("Cut short", (700, 400)).save(root / "cut.png")
    data = (root / "cut.png").read_bytes()
    (root / "cut.png").write_bytes(data[:len(data) // 2])  # its header whole, its pixels cut: fails as it is read
    return root


def _streamed(result) -> dict:
    return {"label": result.ref.label, "status": result.status.value, "markdown": result.markdown,
            "error": result.error, "info": result.info}


def test_the_same_pages_through_the_executor_here_and_on_ray_give_the_same_records(ray_cluster, tmp_path):
    """Converter.convert (a run: its records), Converter.stream and Converter.submit, each through the executor
    seam: the local one, then the Ray one (refs in tasks, actors reading and converting them)."""
    docs = _pages(tmp_path / "docs")
    got = {}
    for where, options in (("local", {}), ("ray", {"ray": "auto", "ray_workers": 2})):
        out = tmp_path / where
        with Converter(engine="fake", max_batch=2, **options) as conv:
            summary = conv.convert([str(docs)], out)
            workers = conv._svc().executor.devices if where == "ray" else None
            streamed = sorted((_streamed(r) for r in conv.stream(docs)), key=lambda r: r["label"])
            image = conv.submit(draw_page("Given as an image", (500, 300)), name="given.png").result(timeout=300)
            if where == "ray":  # one set of actors, the converter's, started by convert and kept for the rest
                assert workers is not None and conv._svc().executor.devices is workers
        records = sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in manifest(out)),
                         key=lambda r: (r["source"], r["page"] or 0))
        for r in records:
            r["source"] = Path(r["source"]).relative_to(docs).as_posix()
        got[where] = (summary.counts, records, streamed, (image.status.value, image.markdown))
    assert got["ray"] == got["local"]
    counts, records, streamed, image = got["local"]
    assert counts["ok"] == 7 and counts["failed"] == 1 and len(records) == len(streamed) == 8
    assert {r["status"] for r in streamed} == {"ok", "failed"} and image[0] == "ok"
    assert any(r["info"].get("path") == "text-layer" for r in streamed)  # read while decoding, on the actors too
