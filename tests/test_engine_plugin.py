"""An engine installed as a package of its own (engines/plugin.py): one that registers through the entry-point
group `ocrbatch.engines`, in a package made here (its folder and its dist-info, nothing else), appears in
--engine's choices, brings its option (flag, variable, the Options page), its doctor checks, and converts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, draw_page

PACKAGE = '''
from typing import Sequence

from ocrbatch.engines.base import Engine
from ocrbatch.engines.plugin import ENGINE_FLAG, ENGINE_OPTIONS, EnginePlugin, Finding, Option
from ocrbatch.records import PageImage, PageOutput


class EchoEngine(Engine):
    name = "echo-test"

    def load(self, device: str) -> None:
        pass

    def infer(self, pages: Sequence[PageImage]) -> list:
        return [PageOutput(markdown=f"{self.options.echo_word} page {p.ref.page}\\n") for p in pages]


def checks(found):
    return [Finding("echo-test", True, "echoes, torch seen: " + str("torch" in found))]


ENGINES = EnginePlugin(
    "echo-test", "testengine:EchoEngine", about="echoes a word", title="Echo engine",
    options=(Option("echo_word", "text", "hello", "The word each page says (echo-test).", ENGINE_FLAG,
                    to=ENGINE_OPTIONS),),
    doctor="testengine:checks")
'''


def install(tmp: Path, entry_points: str) -> dict[str, str]:
    """The package `testengine` installed in `tmp` (its folder and its dist-info), and the environment that sees
    it: PYTHONPATH with `tmp` after the worktree."""
    site = tmp / "site"
    (site / "testengine").mkdir(parents=True)
    (site / "testengine" / "__init__.py").write_text(PACKAGE)
    info = site / "testengine-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: testengine\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(site)]), "COLUMNS": "100"}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ocrbatch", *args], capture_output=True, text=True, env=env)


def test_an_engine_installed_as_a_package_brings_its_option_its_checks_and_converts(tmp_path):
    env = install(tmp_path, "[ocrbatch.engines]\necho = testengine:ENGINES\n")
    help_text = run(env, "convert", "--help").stdout
    assert "echo-test" in help_text and "--echo-word" in help_text and "OCRBATCH_ECHO_WORD" in help_text
    assert "Echo engine" in help_text  # its options under its own heading
    draw_page("x").save(tmp_path / "a.png")
    r = run({**env, "OCRBATCH_ECHO_WORD": "bonjour"}, "convert", str(tmp_path / "a.png"), "-o",
            str(tmp_path / "out"), "--engine", "echo-test", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "a.md").read_text() == "bonjour page 1\n"
    bad = run(env, "convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--engine", "echo")
    assert bad.returncode == 2 and "--engine echo: choose" in bad.stderr and "echo-test" in bad.stderr
    doctor = json.loads(run(env, "doctor", "--json").stdout)
    checks = {c["name"]: c for c in doctor["checks"]}
    assert checks["echo-test"] == {"name": "echo-test", "ok": True, "detail": "echoes, torch seen: True"}
    page = subprocess.run([sys.executable, str(ROOT / "scripts" / "reference.py"), "options"], capture_output=True,
                          text=True, env=env, check=True).stdout
    assert "`--echo-word TEXT`" in page and "`OCRBATCH_ECHO_WORD`" in page and "The word each page says" in page


def test_a_broken_plugin_is_left_out_and_doctor_says_why(tmp_path):
    env = install(tmp_path, "[ocrbatch.engines]\necho = testengine:ENGINES\nbroken = testengine:NOTHING\n")
    draw_page("x").save(tmp_path / "a.png")
    r = run(env, "convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--engine", "echo-test")
    assert r.returncode == 0, r.stderr  # the broken one does not stop the others
    checks = json.loads(run(env, "doctor", "--json").stdout)["checks"]
    left_out = [c for c in checks if c["name"].startswith("entry point broken")]
    assert left_out and left_out[0]["ok"] is False and "NOTHING" in left_out[0]["detail"]


def test_builtin_engines_are_found_in_their_folders_without_entry_points():
    """A source tree whose installed metadata is stale (or absent) still has every built-in engine."""
    code = ("import importlib.metadata as m; m.entry_points = lambda **k: []; "
            "from ocrbatch.engines import catalog; from ocrbatch.config import OPTION; "
            "print(','.join(catalog.names()), ','.join(OPTION['backend'].allowed), "
            "'model_size' in OPTION and 'model' in OPTION)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
    assert out == ["deepseek-ocr2,fake,fake-timed,rapidocr", "transformers,vllm", "True"]
