"""The Python API: one Converter, its engine loaded once, pages from many callers sharing batches."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

from conftest import ROOT, draw_page, run_cli, save_pdf
from engines import CrashOnPage, LoadCounter, SlowEngine, TypedConfidence
from ocrbatch import Converter
from ocrbatch.confidence import Confidence
from ocrbatch.errors import EngineLoadError, UsageError

# The fake engine's Markdown for sample_docs/, written by `convert` at 6e60909 (before the Converter).
SAMPLE_DOCS_FAKE = {
    "article-two-column.md": "cb52144d513e6ad4", "invoice.md": "fd3070644710e079",
    "letter-scan.md": "7f059909da918281", "report/page-0001.md": "1fa555095e74545e",
    "report/page-0002.md": "69abeccbdc97034c", "report/page-0003.md": "33385d6c51fb9249",
    "table.md": "58ce34c84203b05a",
}


def digests(out):
    return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            for p in sorted(out.rglob("*.md"))}


def png_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    draw_page(text, size=(300, 400), font_size=20).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def counter(register_engine):
    LoadCounter.loads, LoadCounter.batches = 0, []
    return register_engine(LoadCounter)


def test_cli_output_on_sample_docs_is_what_it_was(tmp_path):
    out = tmp_path / "out"
    r = run_cli("convert", str(ROOT / "sample_docs"), "-o", str(out), "--engine", "fake", "-q")
    assert r.returncode == 0, r.stderr
    assert digests(out) == SAMPLE_DOCS_FAKE


def test_two_converts_load_the_engine_once_and_write_what_the_cli_writes(tmp_path, counter):
    with Converter(engine=counter, max_batch=4) as conv:
        assert not conv.loaded  # lazily: nothing loads before there is work
        first = conv.convert(ROOT / "sample_docs", tmp_path / "a")
        second = conv.convert([str(ROOT / "sample_docs")], tmp_path / "b", pages="1")
        assert conv.loaded
    assert LoadCounter.loads == 1 and not conv.loaded  # closed: unloaded
    with pytest.raises(RuntimeError, match="closed"):
        conv.submit(draw_page("late"))
    assert first.exit_code == 0 and first.counts["ok"] == 7 and second.counts["ok"] == 5
    cli = tmp_path / "cli"
    assert run_cli("convert", str(ROOT / "sample_docs"), "-o", str(cli), "--engine", "fake", "-q").returncode == 0
    assert digests(tmp_path / "a") == digests(cli) == SAMPLE_DOCS_FAKE  # same words: fake and counter share infer


def test_three_threads_submitting_at_once_share_batches_and_every_future_resolves(counter):
    futures: list[Future] = []
    lock = threading.Lock()
    start = threading.Barrier(3)

    def client(k: int) -> None:
        start.wait()
        for i in range(6):
            f = conv.submit(png_bytes(f"client {k} page {i}"), name=f"c{k}-{i}.png")
            with lock:
                futures.append(f)

    with Converter(engine=counter, max_batch=8, max_wait_ms=2000) as conv:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results = [f.result(timeout=60) for f in futures]
    assert len(results) == 18 and all(r.status.value == "ok" for r in results)
    assert sorted(r.ref.label for r in results) == sorted(f"c{k}-{i}.png" for k in range(3) for i in range(6))
    assert sum(LoadCounter.batches) == 18 and len(LoadCounter.batches) < 18  # mean batch > 1
    assert LoadCounter.loads == 1


def test_a_bad_page_fails_only_its_own_future_with_the_cli_line(tmp_path, register_engine):
    register_engine(CrashOnPage)
    pdf = save_pdf(tmp_path / "two.pdf", [draw_page("one"), draw_page("two")])
    with Converter(engine="crash-on-page", max_wait_ms=50) as conv:
        good = conv.submit(png_bytes("fine"), name="fine.png")
        text = conv.submit(b"hello, not an image", name="notes.txt")
        empty = conv.submit(b"")
        poison = conv.submit(draw_page("boom"), name="poison.png")  # the engine raises on this one
        pages = conv.submit(pdf.read_bytes(), pages="2-5", name="two.pdf")
        missing = conv.submit(tmp_path / "nope.png")
        assert good.result(timeout=60).status.value == "ok"
        assert text.result().message == "notes.txt: not a PDF or image: it holds plain text"
        assert empty.result().message == "<bytes>: empty file (0 bytes)"
        assert poison.result(timeout=60).message == "poison.png: RuntimeError: engine exploded on this input"
        assert [f.result(timeout=60).ref.label for f in pages] == ["two.pdf page 2"]
        assert missing.result().status.value == "failed" and "nope.png" in missing.result().message
        assert conv.submit(png_bytes("after"), priority="bulk").result(timeout=60).ok  # it goes on


def test_an_engine_that_cannot_load_fails_the_futures_with_its_error(register_engine):
    from engines import NoLoadEngine

    with Converter(engine=register_engine(NoLoadEngine), max_wait_ms=10) as conv:
        with pytest.raises(EngineLoadError, match="weights not found"):
            conv.submit(draw_page("x")).result(timeout=60)
        with pytest.raises(EngineLoadError, match="weights not found"):
            conv.load()
        assert not conv.loaded


def test_cancelled_pages_that_have_not_started_are_never_run(register_engine):
    SlowEngine.delay_s = 0.05
    with Converter(engine=register_engine(SlowEngine), max_batch=1, max_wait_ms=0) as conv:
        futures = [conv.submit(draw_page(f"p{i}"), priority="bulk", name=f"p{i}.png") for i in range(40)]
        cancelled = conv.cancel(futures[5:])
        done = [f.result(timeout=60) for f in futures[:5]]
        assert cancelled > 0 and all(r.ok for r in done)
    assert conv.stats()["pages"] == 40 - cancelled and conv.stats()["in_flight"] == 0  # cancelled: never run


def test_stream_yields_every_page_and_failed_files(tmp_path, counter):
    (tmp_path / "in").mkdir()
    draw_page("a").save(tmp_path / "in" / "a.png")
    save_pdf(tmp_path / "in" / "b.pdf", [draw_page("b1"), draw_page("b2")])
    (tmp_path / "in" / "c.pdf").write_bytes(b"%PDF-1.4 broken")
    with Converter(engine=counter) as conv:
        results = list(conv.stream(tmp_path / "in"))
        stats = conv.stats()
    got = sorted((Path(r.ref.source.display if r.ref else r.source_display).name, r.ref.page if r.ref else 0,
                  r.status.value) for r in results)
    assert got == [("a.png", 1, "ok"), ("b.pdf", 1, "ok"), ("b.pdf", 2, "ok"), ("c.pdf", 0, "failed")]
    assert stats["loaded"] and stats["pages"] == 3 and stats["queued"] == {"interactive": 0, "bulk": 0}


def test_options_are_checked_when_the_converter_is_made():
    with pytest.raises(UsageError, match="--engine nope: choose .*fake.* or rapidocr"):
        Converter(engine="nope")
    with pytest.raises(UsageError, match="--max-batch"):
        Converter(engine="fake", max_batch=0)
    with pytest.raises(UsageError, match="unknown option"):
        Converter(engine="fake", colour="blue")


def test_options_come_from_the_environment_and_flags_win(tmp_path):
    draw_page("x").save(tmp_path / "x.png")
    env = {"OCRBATCH_ENGINE": "fake", "OCRBATCH_OUTPUT": str(tmp_path / "out"), "OCRBATCH_MAX_BATCH": "2"}
    r = run_cli("convert", str(tmp_path / "x.png"), "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert '"engine": "fake"' in r.stdout and (tmp_path / "out" / "x.md").is_file()
    r = run_cli("convert", str(tmp_path / "x.png"), "-o", str(tmp_path / "o2"), "--engine", "fake",
                env={"OCRBATCH_ENGINE": "nope", "OCRBATCH_MAX_BATCH": "0"})
    assert r.returncode == 2  # the flag won for the engine; the variable's max-batch, refused, is named
    assert r.stderr.strip() == "ocrbatch: error: OCRBATCH_MAX_BATCH='0': must be at least 1"
    conv = Converter.from_env({"OCRBATCH_ENGINE": "fake", "OCRBATCH_MAX_BATCH": "3"}, max_wait_ms=5)
    assert conv.engine == "fake" and conv.stats()["loaded"] is False
    conv.close()
    with pytest.raises(UsageError, match="OCRBATCH_MAX_BATCH"):
        Converter.from_env({"OCRBATCH_MAX_BATCH": "many"})


def test_a_file_changed_between_submits_is_read_afresh_and_an_empty_selection_gives_no_pages(tmp_path, counter):
    path = tmp_path / "doc.pdf"
    with Converter(engine=counter, max_wait_ms=10) as conv:
        save_pdf(path, [draw_page("first version"), draw_page("two")])
        before = [f.result(timeout=60).markdown for f in conv.submit(path, pages="1")]
        save_pdf(path, [draw_page("second version, longer"), draw_page("two")])
        after = [f.result(timeout=60).markdown for f in conv.submit(path, pages="1")]
        assert conv.submit(path, pages="7-") == []
    assert before != after and len(before) == len(after) == 1


# -- close is total (issue 27) ------------------------------------------------------------------------------

def test_close_resolves_every_future_submitting_threads_got_and_the_process_exits_cleanly():
    """scripts/close_stress.py, reduced: 8 threads submit PDFs as bytes, images and paths while close() or
    close(wait=False) is called at random moments; every future is resolved when close returns (refused ones
    with ConverterClosedError, never a bare temporary path), and the process exits 0 (no PDF left open)."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "close_stress.py"), "--rounds", "4",
                        "--per-process", "4", "--json"], capture_output=True, text=True, timeout=300)
    figures = json.loads(p.stdout.splitlines()[-1])
    assert p.returncode == 0 and figures["rounds"] == 4 and figures["futures"] > 0, (figures, p.stderr)
    assert figures["unresolved"] == figures["unclear"] == figures["crashes"] == 0, (figures, p.stderr)


def test_leaving_a_with_block_by_an_exception_with_pdf_bytes_in_flight_exits_cleanly(tmp_path):
    """`with Converter():` whose block raises closes with wait=False: its PDFs (given as bytes) must not be
    left open to the interpreter's exit, where pdfium would crash the process."""
    pdf = save_pdf(tmp_path / "d.pdf", [draw_page(f"page {i}", size=(200, 260)) for i in range(6)])
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from ocrbatch import Converter\n"
              f"data = open({str(pdf)!r}, 'rb').read()\n"
              "futures = []\n"
              "try:\n"
              "    with Converter(engine='fake', max_batch=2) as conv:\n"
              "        for _ in range(20):\n"
              "            futures += conv.submit(data)\n"
              "        raise KeyError('the caller failed')\n"
              "except KeyError:\n"
              "    pass\n"
              "print(sum(not f.done() for f in futures), len(futures))\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "still open" not in p.stderr, p.stderr
    assert p.stdout.split() == ["0", "120"]


def test_a_page_read_after_its_pdfs_are_closed_reopens_nothing(tmp_path):
    from ocrbatch.errors import DecodeError
    from ocrbatch.pipeline.decode import PdfCache

    pdf = save_pdf(tmp_path / "d.pdf", [draw_page("one", size=(200, 260))])
    cache = PdfCache(size=1)
    assert cache.render(pdf, 0, 72).size[0] > 0
    cache.close()
    with pytest.raises(DecodeError, match="closed"):
        cache.render(pdf, 0, 72)


def test_an_empty_image_is_a_page_too_small_not_a_crash():
    from PIL import Image

    with Converter(engine="rapidocr") as conv:
        for size in ((0, 0), (1, 50), (50, 0)):
            result = conv.submit(Image.new("RGB", size)).result(timeout=60)
            assert result.status.value == "failed" and "page is too small" in result.message, result.message


def test_a_page_cancelled_while_it_was_read_lands_exactly_once():
    """A page whose caller went away while it was being read (a text-layer page, or one that failed to decode,
    is answered by the decode thread): no result goes to the cancelled future, but the page is counted off the
    converter's pages in flight, once, whatever else answers it later (serve's pages_in_flight, issue 27)."""
    from ocrbatch.pipeline.lanes import FutureReply
    from ocrbatch.records import PageResult, Status

    landed: list[int] = []
    future: Future = Future()
    reply = FutureReply(future, "interactive", done=lambda: landed.append(1))
    assert future.cancel()
    reply.deliver(PageResult(ref=None, status=Status.OK, markdown="late"))
    assert landed == [1]
    reply.fail(RuntimeError("and again"))  # close() answering what is left, say
    assert landed == [1] and future.cancelled()


def test_a_page_refused_as_the_converter_closes_says_so_not_a_temporary_path(tmp_path):
    """bytes spilled to the converter's temporary folder, then close() removes it before the page is read:
    the future fails with ConverterClosedError, never with the temporary file's path as its error."""
    from ocrbatch.errors import ConverterClosedError

    conv = Converter(engine="fake")
    conv.check()
    conv.close()
    gone = tmp_path / "ocrbatch-api-x" / "tmp1234"  # as _spill names them; removed with the folder
    future = conv._submit_file(gone, "<bytes>", None, "interactive")
    with pytest.raises(ConverterClosedError, match="closed"):
        future.result(timeout=10)


def test_a_page_taken_as_close_runs_is_answered_or_refused_never_left():
    """close() comes in the middle of a submit (after its checks, before its page is queued): the page's future
    is resolved at once, not queued behind the decode pools' end where nothing would ever run it."""
    from PIL import Image

    from ocrbatch.errors import ConverterClosedError

    conv = Converter(engine="fake")
    conv.check()
    local, calls = conv._executor, []

    def close_meanwhile():  # submit's checks, then the page's: the second is where close() comes in between
        svc = local()
        calls.append(1)
        if len(calls) == 2:
            conv.close()
        return svc

    conv._executor = close_meanwhile
    future = conv.submit(Image.new("RGB", (40, 40), "white"))
    with pytest.raises(ConverterClosedError):
        future.result(timeout=30)


def test_a_page_says_how_sure_its_engine_was_when_the_engine_types_it_and_text_layer_pages_say_so(tmp_path,
                                                                                                 register_engine):
    from test_layout_textlayer import article_page, write_pdf

    register_engine(TypedConfidence)
    pdf = write_pdf(tmp_path / "article.pdf", [article_page()])
    with Converter(engine="typed-confidence", max_wait_ms=50) as conv:
        scan = conv.submit(png_bytes("scan"), name="scan.png").result(timeout=60)
        layer = conv.submit(pdf, pages="1")[0].result(timeout=60)
    assert scan.confidence == TypedConfidence.SURE and "confidence" not in scan.info
    assert layer.confidence == Confidence("text-layer", None)
    assert layer.info["confidence"] == {"method": "text-layer", "score": None}  # the manifest's copy, as before


class _Held(SlowEngine):
    """Holds each batch until `gate` is set: pages wait at the engine, so callbacks added meanwhile run on the
    converter's device thread when they finish."""

    name = "held"
    gate = threading.Event()
    delay_s = 0.0

    def infer(self, pages):
        assert self.gate.wait(120), "the test never opened the gate"
        return super().infer(pages)


def test_close_from_a_done_callback_returns_and_every_future_resolves(register_engine):
    """Issue 39 B10: nine futures whose done-callback calls close(). The callback runs on the device thread that
    finished the page; close() there must not wait for that thread (nor for the lock answering the page): it
    returns, the pages in flight still finish, and a close() from the caller's thread waits for all of it."""
    from concurrent.futures import wait

    from PIL import Image

    _Held.gate = threading.Event()
    conv = Converter(engine=register_engine(_Held), max_batch=4, max_wait_ms=5)
    futures = [conv.submit(Image.new("RGB", (64, 48), "white"), name=f"p{i}") for i in range(9)]
    returned: list[str] = []
    for f in futures:
        f.add_done_callback(lambda _: (conv.close(), returned.append(threading.current_thread().name)))
    _Held.gate.set()
    done, left = wait(futures, timeout=60)
    assert not left, f"{len(left)} of 9 futures never resolved"
    conv.close()  # from here: waits for the finish the callback started
    assert all(f.result().ok for f in futures)  # close() waits for pages in flight: each has its result
    assert len(returned) == 9 and any(n.startswith("infer") for n in returned), returned


_FORKED = """
import os, sys, time
sys.path.insert(0, {root!r})
from PIL import Image
from ocrbatch import Converter
from ocrbatch.errors import ConverterClosedError

conv = Converter(engine="fake", max_batch=2)
page = Image.new("RGB", (64, 48), "white")
assert conv.submit(page).result(timeout=60).ok  # its decode and device threads are running
pid = os.fork()
if pid == 0:
    code = 9
    try:
        conv.submit(page).result(timeout=15)  # without the check: queued for threads the child does not have
        code = 2
    except ConverterClosedError as exc:
        code = 0 if "forked" in str(exc) else 3
    except TimeoutError:
        code = 4
    except BaseException:
        code = 5
    conv.close()  # marks the child's copy closed; waits for nothing
    os._exit(code)
deadline = time.monotonic() + 60
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("child hung")
        sys.exit(1)
    time.sleep(0.05)
print("child", os.waitstatus_to_exitcode(status))
print("parent", conv.submit(page).result(timeout=60).ok)  # the parent's converter is untouched
conv.close()
"""


def test_a_converter_used_in_a_forked_child_says_so_at_once_and_the_parent_goes_on():
    """Issue 39 B9: a child forked from a process with a working Converter calls submit(): a clear
    ConverterClosedError, never a future that waits for decode threads the child does not have; close() in the
    child returns; the parent's converter still converts. Forked in a subprocess, waited for with a bound."""
    p = subprocess.run([sys.executable, "-c", _FORKED.format(root=str(ROOT))], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["child", "0", "parent", "True"], (p.stdout, p.stderr)


def test_a_futures_callbacks_run_outside_the_lock_that_settles_its_answer():
    """Issue 39 B10, at the reply: a done-callback that answers the page again (as close() does for the pages it
    finds left) runs while no lock of the reply is held; it neither deadlocks nor wins (one answer)."""
    from ocrbatch.pipeline.lanes import FutureReply, answering
    from ocrbatch.records import PageResult, Status

    future: Future = Future()
    landed: list[int] = []
    reply = FutureReply(future, "interactive", done=lambda: landed.append(1))
    seen: list[bool] = []

    def again(_: Future) -> None:
        seen.append(answering())
        reply.fail(RuntimeError("close() answering what is left"))

    future.add_done_callback(again)
    t = threading.Thread(target=reply.deliver, args=(PageResult(ref=None, status=Status.OK, markdown="x"),),
                         daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the callback waited for the reply's own lock"
    assert future.result().markdown == "x" and landed == [1] and seen == [True]
    assert not answering()  # only inside the callbacks
