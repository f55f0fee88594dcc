"""Tests that can fail: each named mutation breaks one promise of the code on purpose, in a copy of the
working tree, and runs the tests that guard it. A mutation no test notices ("survived") is a promise no test
keeps; the script exits 1 if any survives.

    python scripts/mutation_check.py                 every mutation (about half an hour on 2 cores)
    python scripts/mutation_check.py -k ledger       the mutations whose name contains "ledger"
    python scripts/mutation_check.py --list          their names and what each breaks

A mutation is (name, file, the text it replaces, the text it puts there, the tests to run, why). Its text must
occur exactly once in the file: when the code changes under it, the script says "stale" (exit 1), so the table
is kept up to date with the code. Each run is in a fresh copy of the tracked and untracked files (never the
working tree itself), with PYTHONPATH pointing at the copy so subprocesses import the mutated code too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    breaks: str  # the promise it breaks, in a few words
    timeout: float | None = None  # seconds its tests may take (a mutation that hangs them is killed by it)


RELIABILITY = [
    Mutation("atomic-write-plain", "ocrbatch/atomic.py",
             "    fd, tmp = temporary(path)\n    try:\n        with os.fdopen(fd, \"wb\") as fh:",
             "    fd, tmp = temporary(path)\n    os.close(fd); discard(tmp); fd = os.open(path, os.O_WRONLY | os.O_CREAT"
             " | os.O_TRUNC, 0o644); tmp = str(path)\n    try:\n        with os.fdopen(fd, \"wb\") as fh:",
             ("tests/test_convert.py", "tests/test_reliability.py"),
             "a page file is written in place, not whole-or-nothing"),
    Mutation("lock-off", "ocrbatch/pipeline/lock.py",
             "    def acquire(self) -> \"OutputLock\":\n",
             "    def acquire(self) -> \"OutputLock\":\n        return self\n",
             ("tests/test_reliability.py",), "two runs can write one output folder"),
    Mutation("cut-line-guard-off", "ocrbatch/manifest.py",
             "                os.ftruncate(self._fd, start)  # never leave half a line\n",
             "                pass\n", ("tests/test_manifest_append.py",),
             "a failed manifest append leaves half a line"),
    Mutation("oom-split-off", "ocrbatch/pipeline/infer.py",
             "            if len(pages) > 1:\n                log.debug(\"batch of %d failed (%s); splitting\"",
             "            if False:\n                log.debug(\"batch of %d failed (%s); splitting\"",
             ("tests/test_infer.py", "tests/test_reliability.py"),
             "a failed batch fails every page instead of the one at fault"),
    Mutation("oom-cap-kept", "ocrbatch/pipeline/infer.py",
             "                    cap = self.controller.on_out_of_memory(len(pages))",
             "                    cap = self.controller.cap", ("tests/test_infer.py",),
             "an out-of-memory error does not lower the batch cap"),
    Mutation("watchdog-off", "ocrbatch/pipeline/watchdog.py",
             "        return math.inf if stuck else self.ledger.stalled_for(now)", "        return 0.0",
             ("tests/test_faults.py::test_a_hung_engine_is_failed_by_the_watchdog_with_a_whole_manifest",
              "tests/test_faults.py::test_a_page_stuck_in_decode_stops_the_run_with_its_reason_and_the_others_are_"
              "converted"), "a stuck engine (or decoder) hangs the run forever", timeout=120),
    Mutation("device-watchdog-off", "ocrbatch/pipeline/infer.py",
             "                watchdog.watch(_StuckDevice(device, worker, self.stalled))", "                pass",
             ("tests/test_faults.py::test_a_converter_whose_engine_hangs_answers_its_callers_and_says_which_"
              "device_stalled",), "a stuck engine leaves a Converter's (a server's) callers waiting forever",
             timeout=120),
    Mutation("decode-watchdog-off", "ocrbatch/pipeline/executor.py",
             "            task = self.watchdog.watch(task)", "            pass",
             ("tests/test_faults.py::test_a_page_stuck_in_prepare_is_answered_and_closing_does_not_wait_for_it",),
             "a page stuck in a Converter's decode thread leaves its caller waiting forever", timeout=120),
    Mutation("watchdog-checks-nothing", "ocrbatch/pipeline/watchdog.py",
             "            stuck = [t for t in things if t.stalled_for(now) > self.timeout]\n", "            stuck = []\n",
             ("tests/test_watchdog.py",
              "tests/test_faults.py::test_a_page_stuck_in_prepare_is_answered_and_closing_does_not_wait_for_it"),
             "the one watchdog looks at nothing: every stuck page (decode, device, run) waits forever", timeout=120),
    Mutation("run-end-skips-last-look", "ocrbatch/pipeline/run.py",
             "            self.service.watchdog.check()  # a last look", "            pass  # a last look",
             ("tests/test_faults.py::test_a_stall_no_look_has_seen_when_a_ray_run_ends_still_ends_it_as_stalled",),
             "a device stuck as a run's last pages come back ends it as a run with failed pages (exit 3), not stalled",
             timeout=120),
    Mutation("watchdog-gives-up-twice", "ocrbatch/pipeline/watchdog.py",
             "        if self._end():\n            self._give_up(why)", "        if True:\n            self._give_up(why)",
             ("tests/test_watchdog.py",), "a page stuck on its decode thread is given up again at each look"),
    Mutation("run-stall-reason-dropped", "ocrbatch/pipeline/ledger.py",
             "            why = f\"stalled: {stopping}\"", "            why = \"stalled\"",
             ("tests/test_faults.py::test_a_page_stuck_in_decode_stops_the_run_with_its_reason_and_the_others_are_"
              "converted",), "a page a stalled run cut short says \"stalled\", not that nothing finished for how long",
             timeout=120),
    Mutation("device-stall-reason-generic", "ocrbatch/pipeline/infer.py",
             "        return f\"stalled: no page finished on {self.device} in {timeout:.0f} s (--stall-timeout); the "
             "engine is stuck\"", "        return \"stalled\"",
             ("tests/test_faults.py::test_a_converter_whose_engine_hangs_answers_its_callers_and_says_which_"
              "device_stalled",), "a page a stuck device gave up does not say which device or for how long",
             timeout=120),
    Mutation("ledger-close-out-off", "ocrbatch/pipeline/ledger.py",
             "        left = self.close_out(why)\n", "        left = []\n",
             ("tests/test_faults.py::test_a_hung_engine_is_failed_by_the_watchdog_with_a_whole_manifest",
              "tests/test_reliability.py"),
             "pages cut short get no record"),
    Mutation("ledger-duplicates-written", "ocrbatch/pipeline/ledger.py",
             "            if ref in self._answered:\n                self.duplicates += 1\n                return False",
             "            if ref in self._answered:\n                self.duplicates += 1", ("tests/test_ledger.py",),
             "a page's second result is written too"),
    Mutation("worker-second-result-sent", "ocrbatch/pipeline/infer.py",
             "            answered = self.ledger.pop(id(page), None) is None\n",
             "            answered = self.ledger.pop(id(page), None) is None and False\n", ("tests/test_ledger.py",),
             "a worker sends a page two results"),
    Mutation("worker-held-pages-dropped", "ocrbatch/pipeline/infer.py",
             "            worker.fail_held(exc)\n", "            worker.ledger.clear()\n",
             ("tests/test_ledger.py",), "pages in hand when the worker's loop breaks get no result"),
    Mutation("prefill-group-unheld", "ocrbatch/engines/deepseek_ocr2/continuous.py",
             "        rows += [*self.prefilling, *self.waiting]\n", "        rows += [*self.waiting]\n",
             ("tests/test_deepseek_continuous.py::test_pages_whose_step_raised_are_all_given_back_by_abandon",),
             "pages whose prefill raised are in none of the decoder's holders"),
    Mutation("join-leaves-before-joining", "ocrbatch/engines/deepseek_ocr2/continuous.py",
             "        if self.running is None:\n            self.running = joining\n        else:\n"
             "            self.running.extend(joining)\n        if n == len(ready):\n            self.ready = None\n"
             "        else:\n            ready.select(list(range(n, len(ready))))\n",
             "        if n == len(ready):\n            self.ready = None\n        else:\n"
             "            ready.select(list(range(n, len(ready))))\n        if self.running is None:\n"
             "            self.running = joining\n        else:\n            self.running.extend(joining)\n",
             ("tests/test_deepseek_continuous.py::test_pages_whose_step_raised_are_all_given_back_by_abandon",),
             "rows joining the running ones are in neither holder while they move"),
    Mutation("recover-decoder-only", "ocrbatch/pipeline/streaming.py",
             "        pages = self.worker.holding\n",
             "        pages = self.worker.holding if False else []\n",
             ("tests/test_faults.py::test_convert_with_continuous_decoding_keeps_every_page_once",),
             "after a failed decoding step the pages in hand are not rerun"),
    Mutation("tokens-untyped", "ocrbatch/pipeline/infer.py", "(o.tokens if o.tokens is not None else 1) + 1", "2",
             ("tests/test_infer.py::test_the_throughput_controller_counts_the_tokens_each_page_says_it_generated",),
             "the throughput controller counts pages, not the tokens they took (tokens/s wrong, the cap mis-set)"),
    Mutation("confidence-untyped", "ocrbatch/pipeline/infer.py",
             "lines=out.lines, confidence=out.confidence, record=out.record))", "lines=out.lines, record=out.record))",
             ("tests/test_converter.py::test_a_page_says_how_sure_its_engine_was_when_the_engine_types_it_and_text_"
              "layer_pages_say_so",),
             "a page's result (page JSON, serve) loses the confidence an engine gave only as its typed field"),
    Mutation("review-count-unsaid", "ocrbatch/ui/reporter.py",
             "if summary.review_below is not None else {}", "if False else {}",
             ("tests/test_outputs.py::test_the_plain_finished_line_counts_the_review_list_only_with_review_below",),
             "the plain `finished` line (the summary off a terminal) does not say how many pages need a look"),
    Mutation("load-error-unwrapped", "ocrbatch/pipeline/infer.py",
             "                except OcrbatchError:\n                    raise\n                except Exception as exc:"
             "  # noqa: BLE001 - whatever the engine raised, it cannot run: exit 5",
             "                except BaseException:\n                    raise\n                except Exception as exc:"
             "  # noqa: BLE001 - whatever the engine raised, it cannot run: exit 5",
             ("tests/test_faults.py::test_convert_with_static_batches_keeps_every_page_once",),
             "an engine that raises while loading is an internal error (exit 1), not exit 5"),
    Mutation("ray-results-unchecked", "ocrbatch/pipeline/ray_tasks.py",
             "        return [r for r in self.refs if r not in self.answered]\n", "        return []\n",
             ("tests/test_ledger.py",), "a Ray task that returns too few results loses pages"),
]

# Other areas add their tables here (layout stages and rules: see LAYOUT below, when present).
TABLES = {"reliability": RELIABILITY}
try:  # the layout stages' mutations live beside their tests
    sys.path.insert(0, str(ROOT / "scripts"))
    from mutations_layout import LAYOUT  # type: ignore[import-not-found]

    TABLES["layout"] = LAYOUT
except ImportError:
    pass
try:  # the convert command's: scripts/mutations_convert.py
    from mutations_convert import CONVERT  # type: ignore[import-not-found]

    TABLES["convert"] = CONVERT
except ImportError:
    pass
try:  # the embedded engine's cascade and int8 cache (scripts/mutations_engine.py)
    from mutations_engine import ENGINE  # type: ignore[import-not-found]

    TABLES["engine"] = ENGINE
except ImportError:
    pass
try:  # the server's (scripts/mutations_serve.py)
    from mutations_serve import SERVE  # type: ignore[import-not-found]

    TABLES["serve"] = SERVE
except ImportError:
    pass
try:  # the output formats' (scripts/mutations_render.py)
    from mutations_render import RENDER  # type: ignore[import-not-found]

    TABLES["render"] = RENDER
except ImportError:
    pass


def copy_tree(dest: Path) -> None:
    """The tracked and untracked-not-ignored files of the working tree, as they are now, into `dest`."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = ROOT / rel
        if not src.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


def apply(m: Mutation, tree: Path) -> str | None:
    """Apply `m` in `tree`; None when done, else why not ("stale")."""
    path = tree / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        return f"stale: its text occurs {n} times in {m.file}"
    path.write_text(text.replace(m.old, m.new))
    return None


def run_one(m: Mutation, python: str, timeout: float) -> tuple[str, float, str]:
    """(outcome, seconds, detail): killed (a test failed), survived (all passed), stale or error."""
    with tempfile.TemporaryDirectory(prefix="ocrbatch-mutant-") as tmp:
        tree = Path(tmp) / ROOT.name
        copy_tree(tree)
        shared = ROOT.parent / "shared"
        if shared.exists():
            (Path(tmp) / "shared").symlink_to(shared)
        why = apply(m, tree)
        if why is not None:
            return "stale", 0.0, why
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
        t0 = time.monotonic()
        try:
            proc = subprocess.run([python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
                                  cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "killed", time.monotonic() - t0, f"the tests ran past {timeout:.0f} s (a hang counts)"
        seconds = time.monotonic() - t0
        tail = (proc.stdout.strip().splitlines() or [""])[-1]
        if proc.returncode == 0:
            return "survived", seconds, tail
        if proc.returncode == 1:
            failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
            return "killed", seconds, (failed[0][7:] if failed else tail)[:110]
        return "error", seconds, f"pytest exit {proc.returncode}: {tail}"[:110]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only mutations whose name contains this")
    ap.add_argument("--table", choices=sorted(TABLES), help="only this table")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per mutation's tests (past it: killed)")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    chosen = [(t, m) for t, ms in TABLES.items() if not args.table or t == args.table for m in ms
              if args.k in m.name]
    if args.list:
        for table, m in chosen:
            print(f"{table:12} {m.name:32} {m.breaks}")
        return 0
    print(f"{'table':12} {'mutation':32} {'outcome':9} {'secs':>5}  detail")
    bad = 0
    for table, m in chosen:
        outcome, seconds, detail = run_one(m, args.python, m.timeout or args.timeout)
        bad += outcome != "killed"
        print(f"{table:12} {m.name:32} {outcome:9} {seconds:5.0f}  {detail}", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} killed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
