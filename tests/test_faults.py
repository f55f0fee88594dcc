"""The fault-injection harness: an engine made to raise (or hang) at a call chosen by a seed, run through each
path a page can take — `convert` with static batches and with continuous decoding (the tiny random
DeepSeek-OCR-2 model: mechanics, not OCR), `Converter.submit`, `serve`, and `--ray` with the fake engine and with
continuous decoding on an actor. For every seed:

- the run ends within a bound (a hang only through the stall watchdog);
- each page has exactly one record (one result, one future resolved once);
- a page failed only with the injected error (the pages the fault did not touch are ok);
- the exit code is the documented one: 0 all ok, 3 some failed, 5 the engine could not load, 8 stalled.

`make test` runs one seed per fault point of each path (OCRBATCH_FAULT_SEEDS sets how many per path); `make faults` runs 200 and more (hangs
among them) and prints the tally (scripts/fault_harness.py).
"""

from __future__ import annotations

import collections
import os
import threading
import time
import zlib
from pathlib import Path

import pytest

from conftest import draw_page, manifest
from engines.faults import POINTS_CONTINUOUS, POINTS_PLAIN, POINTS_STATIC, Fault, faulty
from ocrbatch.config import EngineOptions, RunConfig
from ocrbatch.engines import registry
from ocrbatch.engines.fake import FakeEngine
from ocrbatch.errors import ExitCode, OcrbatchError
from ocrbatch.pipeline.run import run

SEEDS = int(os.environ.get("OCRBATCH_FAULT_SEEDS", "0"))  # per path; 0: one per fault point of the path
HANGS = os.environ.get("OCRBATCH_FAULT_HANGS") == "1"  # hangs among the seeds too (20 s each: make faults)
BOUND_S = 120.0  # no seed's run may take longer (the stall timeout below is 20 s)
STALL_S = 20.0  # far above a page's time here, even on a loaded 2-core machine
TALLY: collections.Counter = collections.Counter()  # "path: what" -> count; scripts/fault_harness.py prints it


class Tally:
    """One path's counts in TALLY."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __getitem__(self, key: str) -> int:
        return TALLY[f"{self.path}: {key}"]

    def __setitem__(self, key: str, value: int) -> None:
        TALLY[f"{self.path}: {key}"] = value


@pytest.fixture(scope="module", autouse=True)
def tally_file():
    """With OCRBATCH_FAULT_TALLY set (scripts/fault_harness.py), the tally is written there at the end."""
    yield
    if os.environ.get("OCRBATCH_FAULT_TALLY"):
        import json

        Path(os.environ["OCRBATCH_FAULT_TALLY"]).write_text(json.dumps(dict(TALLY), indent=1))


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> list[Path]:
    """Six small pages (no crops for DeepSeek-OCR-2: cheap on a CPU), one of them a two-page PDF."""
    from conftest import save_pdf

    folder = tmp_path_factory.mktemp("fault-pages")
    paths = []
    for i in range(4):
        path = folder / f"page{i}.png"
        draw_page(f"Page {i}\n" + "words " * (i + 1), size=(640, 480)).save(path)
        paths.append(path)
    save_pdf(folder / "doc.pdf", [draw_page(f"PDF page {n}", size=(640, 480)) for n in (1, 2)])
    return paths + [folder / "doc.pdf"]


EXPECTED_PAGES = 6
# A random model rarely ends a page by itself: every page gets exactly 3 tokens ("truncated", exit 3, as a page
# at the token limit is), and none is retried.
TOKENS = dict(max_new_tokens=3, min_new_tokens=3)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
        pytest.skip("transformers has no DeepSeek-OCR-2 model")
    from tiny_deepseek import build

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield build(tmp_path_factory.mktemp("fault-model") / "model")
    torch.set_num_threads(threads)


def _registered(base: type, fault: Fault) -> tuple[str, type]:
    cls = faulty(base, fault, name=f"faulty-{id(fault)}")
    registry.register(cls.name, cls)
    return cls.name, cls


def _convert(base: type, fault: Fault, pages: list[Path], out: Path, stall_s: float = STALL_S,
             **config) -> tuple[int, list[dict], float]:
    """One seed through `run` (what `convert` does): (exit code, manifest records, seconds)."""
    name, cls = _registered(base, fault)
    t0 = time.monotonic()
    try:
        summary = run(RunConfig(inputs=tuple(map(str, pages)), output=out, engine=name, workers=2,
                                stall_timeout=stall_s, **config))
        code = int(summary.exit_code)
    except OcrbatchError as exc:
        code = int(exc.exit_code)
    finally:
        cls.tripwire.release_hangs()
        registry.unregister(name)
    records = manifest(out) if (out / "manifest.jsonl").exists() else []
    return code, records, time.monotonic() - t0


def check_run(path: str, fault: Fault, code: int, records: list[dict], seconds: float, tripped: int) -> None:
    """What every seed of a convert path must show."""
    tally = Tally(path)
    tally["seeds"] += 1
    assert seconds < BOUND_S, f"{fault}: took {seconds:.0f} s"
    keys = [(Path(r["source"]).name, r["page"]) for r in records]
    dupes = [k for k, n in collections.Counter(keys).items() if n > 1]
    assert not dupes, f"{fault}: pages with more than one record: {dupes}"
    by_status = collections.Counter(r["status"] for r in records)
    failed = [r for r in records if r["status"] == "failed"]
    done = by_status["ok"] + by_status["truncated"]
    if fault.at == "load" and tripped:
        assert code == ExitCode.ENGINE_LOAD, (fault, code, records)
        assert not by_status["ok"] and not by_status["truncated"], fault
        tally["exit 5"] += 1
        return
    tally["pages"] += len(records)
    if fault.kind == "hang" and tripped:
        assert code == ExitCode.STALLED, (fault, code, records)
        assert any("stalled" in r["error"] for r in failed), (fault, records)
        assert all("stalled" in r["error"] or "injected" in r["error"] for r in failed), (fault, failed)
        tally["exit 8"] += 1
        tally["stalled pages"] += sum("stalled" in r["error"] for r in failed)
        return
    assert len(records) == EXPECTED_PAGES, f"{fault}: {len(records)} records: {records}"
    assert all("injected" in r["error"] for r in failed), (fault, failed)
    assert done + len(failed) == EXPECTED_PAGES, (fault, by_status)
    if not fault.sticky:  # one call failed: at most the one page it was about
        assert len(failed) <= 1, (fault, failed)
    assert code == (ExitCode.PARTIAL if failed or by_status["truncated"] else ExitCode.OK), (fault, code, by_status)
    tally["lost pages"] += EXPECTED_PAGES - len(records)  # asserted 0 above: counted for the tally's sake
    tally[f"exit {code}"] += 1
    tally["failed pages"] += len(failed)


def _seeds(path: str, points: tuple[str, ...]) -> list[int]:
    """Seeds whose faults cover every point of the path (Fault.from_seed: point = seed mod points)."""
    n = SEEDS or len(points)
    base = zlib.crc32(path.encode()) % 10_000 * len(points)
    return [base + i for i in range(n)]


@pytest.mark.parametrize("seed", _seeds("static", POINTS_STATIC))
def test_convert_with_static_batches_keeps_every_page_once(seed, pages, tiny_model, tmp_path):
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine

    fault = Fault.from_seed(seed, POINTS_STATIC, hangs=HANGS)
    code, records, seconds = _convert(DeepseekOcr2Engine, fault, pages, tmp_path / "out", devices="cpu",
                                      max_batch=3, engine_options=EngineOptions(
                                          model=tiny_model, **TOKENS, schedule="static"))
    check_run("convert static", fault, code, records, seconds, tripped=_tripped(fault, records, code))


@pytest.mark.parametrize("seed", _seeds("continuous", POINTS_CONTINUOUS))
def test_convert_with_continuous_decoding_keeps_every_page_once(seed, pages, tiny_model, tmp_path):
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine

    fault = Fault.from_seed(seed, POINTS_CONTINUOUS, hangs=HANGS)
    code, records, seconds = _convert(DeepseekOcr2Engine, fault, pages, tmp_path / "out", devices="cpu",
                                      max_batch=3, engine_options=EngineOptions(
                                          model=tiny_model, **TOKENS, schedule="continuous"))
    check_run("convert continuous", fault, code, records, seconds, tripped=_tripped(fault, records, code))


def _tripped(fault: Fault, records: list[dict], code: int) -> int:
    """Whether the fault went off (a call it names may never come: a page count below `nth`)."""
    if fault.at == "load":
        return int(code == ExitCode.ENGINE_LOAD)
    if fault.kind == "hang":
        return int(code == ExitCode.STALLED)
    return 1


@pytest.mark.parametrize("seed", _seeds("converter", POINTS_PLAIN))
def test_converter_submit_resolves_every_future_once(seed, pages, tmp_path):
    from ocrbatch import Converter

    fault = Fault.from_seed(seed, POINTS_PLAIN)
    name, cls = _registered(FakeEngine, fault)
    resolved: collections.Counter = collections.Counter()
    try:
        with Converter(engine=name, max_batch=2, workers=2, max_wait_ms=20) as conv:
            futures = []
            for path in pages:
                got = conv.submit(path, priority="bulk" if path.suffix == ".pdf" else "interactive")
                futures += got if isinstance(got, list) else [got]
            for i, f in enumerate(futures):
                f.add_done_callback(lambda _f, i=i: resolved.update([i]))
            outcomes = [_outcome(f) for f in futures]
    finally:
        registry.unregister(name)
    tally = Tally("converter")
    tally["seeds"] += 1
    assert len(futures) == EXPECTED_PAGES and all(resolved[i] == 1 for i in range(len(futures))), resolved
    if fault.at == "load":  # the pages of the batch that met it fail with it; a later batch loads again
        assert "engine" in outcomes and set(outcomes) <= {"engine", "ok"}, outcomes
        assert fault.sticky or "ok" in outcomes or len(futures) <= 2, outcomes
        tally["exit 5"] += 1
        return
    assert all(o in ("ok", "injected") for o in outcomes), (fault, outcomes)
    if not fault.sticky:
        assert outcomes.count("injected") <= 1, (fault, outcomes)
    tally["pages"] += len(outcomes)
    tally["failed pages"] += outcomes.count("injected")


def _outcome(future) -> str:
    from ocrbatch.errors import EngineLoadError

    try:
        result = future.result(timeout=BOUND_S)
    except EngineLoadError:
        return "engine"
    if result.ok:
        return "ok"
    return "injected" if "injected" in (result.error or "") else f"other: {result.error}"


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    import logging

    import engines
    from ocrbatch.pipeline.cluster import LOCAL_SYSTEM_CONFIG

    ray.cloudpickle.register_pickle_by_value(engines)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR,
             _system_config=LOCAL_SYSTEM_CONFIG)  # as --ray local starts it
    yield
    ray.shutdown()


@pytest.mark.parametrize("seed", _seeds("ray", POINTS_PLAIN))
def test_ray_keeps_every_page_once(seed, pages, ray_cluster, tmp_path):
    fault = Fault.from_seed(seed, POINTS_PLAIN)
    code, records, seconds = _convert(FakeEngine, fault, pages, tmp_path / "out", ray="auto", ray_workers=1,
                                      max_batch=2)
    check_run("ray local", fault, code, records, seconds, tripped=_tripped(fault, records, code))


def _ray_continuous_seeds() -> list[int]:
    """`make test`: the three points inside continuous decoding (each Ray run starts its actor and loads the
    model: slow on 2 cores); more seeds (make faults) cover every point."""
    seeds = _seeds("ray continuous", POINTS_CONTINUOUS)
    if SEEDS:
        return seeds
    return [s for s in seeds if POINTS_CONTINUOUS[s % len(POINTS_CONTINUOUS)] in ("prefill", "join", "step")]


@pytest.mark.parametrize("seed", _ray_continuous_seeds())
def test_ray_with_continuous_decoding_keeps_every_page_once(seed, pages, tiny_model, ray_cluster, tmp_path):
    """The actor runs the local infer worker (continuous decoding, its ledger and watchdog): a fault inside
    decoding touches only its pages there too. One actor: the fault's call count is that process's."""
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine

    fault = Fault.from_seed(seed, POINTS_CONTINUOUS, hangs=HANGS)
    # One torch thread, as the local paths run (tiny_model): an actor's team of 2 on the 2 shared cores took twice
    # as long beside 2 busy processes
    code, records, seconds = _convert(DeepseekOcr2Engine, fault, pages, tmp_path / "out", devices="cpu",
                                      max_batch=3, ray="auto", ray_workers=1, engine_options=EngineOptions(
                                          model=tiny_model, **TOKENS, schedule="continuous", threads=1))
    check_run("ray continuous", fault, code, records, seconds, tripped=_tripped(fault, records, code))


def test_an_engine_stuck_on_the_last_pages_of_a_ray_run_still_ends_it_as_stalled(pages, tiny_model, ray_cluster,
                                                                                 tmp_path):
    """The actor's device watchdog fails the pages of an engine stuck making its output, and they stream back as
    the run's last results: the run ends at once, and must still end as stalled (exit 8), not as a run whose
    pages merely failed (make faults found it: seed 20959 ended with exit 3)."""
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine

    fault = Fault(at="output", nth=1, kind="hang", sticky=False)
    code, records, seconds = _convert(DeepseekOcr2Engine, fault, pages, tmp_path / "out", devices="cpu",
                                      max_batch=3, ray="auto", ray_workers=1, engine_options=EngineOptions(
                                          model=tiny_model, **TOKENS, schedule="continuous", threads=1))
    assert code == ExitCode.STALLED, (code, records)
    check_run("ray continuous", fault, code, records, seconds, tripped=_tripped(fault, records, code))


def test_a_stall_no_look_has_seen_when_a_ray_run_ends_still_ends_it_as_stalled(pages, ray_cluster, tmp_path,
                                                                              monkeypatch):
    """The run looks once more as it ends: the actor's watchdog failed a stuck batch's page and said so, that was
    the run's last result, and the driver's watchdog thread has not looked since (here it never does): the run
    still ends as stalled (exit 8), not as a run whose page merely failed."""
    from ocrbatch.pipeline.watchdog import Watchdog

    monkeypatch.setattr(Watchdog, "_run", lambda self: self._closing.wait())  # the driver's; the actor's looks
    fault = Fault(at="infer", nth=1, kind="hang", sticky=False)
    code, records, seconds = _convert(FakeEngine, fault, pages[:1], tmp_path / "out", stall_s=4, ray="auto",
                                      ray_workers=1)  # one page: its failure is the run's last result
    assert code == ExitCode.STALLED, (code, records)
    assert [r["status"] for r in records] == ["failed"] and "stalled" in records[0]["error"], records
    assert seconds < BOUND_S


def test_a_hung_engine_is_failed_by_the_watchdog_with_a_whole_manifest(pages, tmp_path):
    """Every page waits behind a batch that never returns: the pages in flight fail as stalled, exit 8."""
    fault = Fault(at="infer", nth=1, kind="hang")
    code, records, seconds = _convert(FakeEngine, fault, pages, tmp_path / "out", stall_s=2, max_batch=2)
    assert code == ExitCode.STALLED
    assert records and all(r["status"] == "failed" and "stalled" in r["error"] for r in records), records
    assert len({(r["source"], r["page"]) for r in records}) == len(records)
    again_code, again, _ = _convert(FakeEngine, Fault(at="infer", nth=99, kind="plain"), pages, tmp_path / "out")
    assert again_code == ExitCode.OK and sum(r["status"] == "ok" for r in again) == EXPECTED_PAGES  # a rerun retries


def test_threads_left_by_a_hang_do_not_keep_the_process(pages, tmp_path):
    """The stuck thread is let go after the run; the run itself did not wait for it."""
    before = threading.active_count()
    fault = Fault(at="infer", nth=1, kind="hang")
    code, _, seconds = _convert(FakeEngine, fault, pages, tmp_path / "out", stall_s=2, max_batch=6)
    assert code == ExitCode.STALLED and seconds < BOUND_S
    deadline = time.monotonic() + 10
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before + 1  # the sampler may still be stopping


def test_a_converter_whose_engine_hangs_answers_its_callers_and_says_which_device_stalled(pages):
    """No watching run here (the Python API, or serve): the device watchdog fails the stuck pages itself."""
    from concurrent.futures import wait

    from ocrbatch import Converter

    name, cls = _registered(FakeEngine, Fault(at="infer", nth=1, kind="hang"))
    try:
        with Converter(engine=name, max_batch=2, workers=1, stall_timeout=2) as conv:
            futures = [conv.submit(pages[0]), conv.submit(pages[1])]
            done, pending = wait(futures, timeout=BOUND_S)
            stalled = conv.stats()["stalled"]
            cls.tripwire.release_hangs()
    finally:
        registry.unregister(name)
    assert not pending
    results = [f.result() for f in futures]
    assert all(r.status.value == "failed" and "stalled" in r.error for r in results if r.status.value != "ok")
    assert any(r.status.value == "failed" for r in results) and stalled == ["cpu"]
    # the watchdog's reason for a device: the engine stuck there, not a decode thread
    assert all("no page finished on cpu in 2 s" in r.error for r in results if r.status.value != "ok"), results


def test_a_page_stuck_in_decode_stops_the_run_with_its_reason_and_the_others_are_converted(pages, tmp_path):
    """A `convert` whose page hangs on a decode thread (reading or preparing it): no device holds it, only the
    run's own watch sees it (pages in flight, none finished for --stall-timeout). The other pages are written,
    the stuck one gets one record saying why, and the run stops with exit 8."""
    fault = Fault(at="prepare", nth=1, kind="hang")
    code, records, seconds = _convert(FakeEngine, fault, pages, tmp_path / "out", stall_s=3, max_batch=2)
    assert code == ExitCode.STALLED and seconds < BOUND_S
    assert len({(r["source"], r["page"]) for r in records}) == len(records) == EXPECTED_PAGES, records
    failed = [r for r in records if r["status"] == "failed"]
    assert len(failed) == 1, records
    assert failed[0]["error"].startswith("stalled: no page finished in 3 s (--stall-timeout)"), failed


@pytest.mark.parametrize("seed", _seeds("serve", POINTS_PLAIN))
def test_serve_answers_every_page_of_every_request_once(seed, pages, tmp_path):
    """`ocrbatch serve` (a subprocess, as a user runs it) with the fake engine tripping the seed's fault, the
    pages sent as concurrent requests: each page gets exactly one answer, a failed one by the injected error;
    a fault at load ends the server with exit 5. A hang (make faults) in a batch fails its pages as stalled
    (the device watchdog) and stops the server (exit 8), the requests queued behind it answered 503; one that
    never reaches a batch (a hang in prepare, on a decode thread) is answered as stalled by the Converter's
    decode watchdog while the server goes on (a later stop: exit 0), or, if the run ends first, by the drain
    (503)."""
    import dataclasses
    import json
    import signal
    from concurrent.futures import ThreadPoolExecutor

    serve = pytest.importorskip("test_serve")
    fault = Fault.from_seed(seed, POINTS_PLAIN, hangs=HANGS)
    env = {"OCRBATCH_TEST_FAULT": json.dumps(dataclasses.asdict(fault))}
    args = ("--engine", "faulty", "--max-batch", "2", "--max-wait-ms", "20", "--workers", "2", "--drain-s", "1",
            "--stall-timeout", "4")
    tally = Tally("serve")
    tally["seeds"] += 1
    if fault.at == "load":
        p = serve.serve_exit(*args, env=env)
        assert p.returncode == ExitCode.ENGINE_LOAD and "injected" in p.stderr, (fault, p.stderr)
        tally["exit 5"] += 1
        return
    srv = serve.Server(tmp_path / "srv", *args, env=env)
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(len(pages)) as ex:
            sent = [(path, ex.submit(srv.convert, path.read_bytes(), filename=path.name)) for path in pages]
            signalled = False
            if fault.kind == "hang":  # the watchdog, or else (a hang before any batch) the drain, ends it
                end = time.monotonic() + 15  # the watchdog's 4 s, its rounds, a loaded machine
                while not all(f.done() for _, f in sent) and srv.proc.poll() is None and time.monotonic() < end:
                    time.sleep(0.05)
                if srv.proc.poll() is None and not all(f.done() for _, f in sent):
                    srv.proc.send_signal(signal.SIGTERM)
                    signalled = True
            answers = [(path, f.result()) for path, f in sent]
        outcomes = [o for path, r in answers for o in _served(path, r)]
        assert len(outcomes) == EXPECTED_PAGES, (fault, outcomes)
        assert set(outcomes) <= {"ok", "injected", "stalled", "decode-stalled", "drained"}, (fault, outcomes)
        if fault.kind == "hang":  # a stuck decode thread is the decode watchdog's; a stuck batch the device's
            assert "decode-stalled" not in outcomes or fault.at == "prepare", (fault, outcomes)
        else:
            assert {"stalled", "decode-stalled", "drained"}.isdisjoint(outcomes), (fault, outcomes)
            assert srv.metric("ocrbatch_queue_used") == 0, (fault, outcomes)
            assert srv.metric("ocrbatch_pages_in_flight") == 0, fault
            if not fault.sticky:
                assert outcomes.count("injected") <= 1, (fault, outcomes)
        code = srv.stop()
        assert code == (ExitCode.STALLED if "stalled" in outcomes and not signalled else 0), (fault, code, outcomes)
        assert time.monotonic() - t0 < BOUND_S, fault
        log = srv.log.read_text()
        assert "Traceback" not in log, (fault, log)
    finally:
        srv.stop()
    tally["pages"] += len(outcomes)
    tally["failed pages"] += outcomes.count("injected")
    tally["stalled pages"] += outcomes.count("stalled") + outcomes.count("decode-stalled")
    tally["drained pages"] += outcomes.count("drained")
    tally[f"exit {code}"] += 1


def _served(path: Path, r) -> list[str]:
    """Each page's outcome in one answer of the server: ok, injected, stalled (failed by the device watchdog),
    decode-stalled (by the Converter's decode watchdog) or drained (503: the server stopping ended the request)."""
    body = r.json()
    if r.status_code == 503:
        assert "--drain-s" in body["error"] or "stuck" in body["error"], body
        return ["drained"] * (2 if path.suffix == ".pdf" else 1)
    entries = body.get("pages") or [{"status": "failed", "error": body["error"]}]
    return ["ok" if e["status"] in ("ok", "truncated") else "injected" if "injected" in (e["error"] or "")
            else "decode-stalled" if "stalled: reading or preparing" in (e["error"] or "")
            else "stalled" if "stalled" in (e["error"] or "") else f"other: {e['error']}" for e in entries]


def test_a_page_stuck_in_prepare_is_answered_and_closing_does_not_wait_for_it(pages):
    """A hang on a Converter's decode thread (reading or preparing the page) never reaches a device: the decode
    watchdog answers it, and leaving the `with` block does not wait for the stuck thread."""
    from concurrent.futures import wait

    from ocrbatch import Converter

    name, cls = _registered(FakeEngine, Fault(at="prepare", nth=1, kind="hang"))
    t0 = time.monotonic()
    try:
        with Converter(engine=name, max_batch=2, workers=2, stall_timeout=2) as conv:
            futures = [conv.submit(p) for p in pages[:3]]
            done, pending = wait(futures, timeout=BOUND_S)
    finally:
        cls.tripwire.release_hangs()
        registry.unregister(name)
    assert not pending and time.monotonic() - t0 < BOUND_S
    results = [f.result() for f in futures]
    assert sorted(r.status.value for r in results) == ["failed", "ok", "ok"]
    assert next(r.error for r in results if r.status.value == "failed") == \
        "stalled: reading or preparing the page took over 2 s (stall_timeout)"
