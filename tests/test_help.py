"""The command line as a person meets it (issue 37): --help in panels at 80 columns, one style for a usage error,
suggestions by similarity, --force-ocr, and completion for zsh and fish."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from ocrbatch import config
from ocrbatch.table import PANELS

from conftest import ROOT, run_cli

HEADINGS = ("Input and output:", "Run control:", "Embedded engine (rapidocr):", "DeepSeek-OCR-2:",
            "Output formats:", "Logging:")


def help_of(*args: str) -> str:
    r = run_cli(*args, env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_convert_help_at_80_columns_cuts_nothing_and_lists_each_option_under_its_heading_with_its_variable():
    text = help_of("convert", "--help")
    assert text == help_of("convert", "-h")
    lines = text.splitlines()
    assert lines[0] == "Usage: ocrbatch convert [OPTIONS] INPUT..."
    assert all(len(line) <= 80 for line in lines) and "…" not in text
    assert [line for line in lines if line.endswith(":") and not line.startswith(" ")] == list(HEADINGS)
    for o in config.options(config.RUN):
        assert o.env in text and o.flag in text, o.flag
    for junk in ("<bool>", "<int>", "<str>", "list[str]", "{inputs}", "BatchCap(", "╭"):
        assert junk not in text, junk
    flat = " ".join(text.split())
    assert "pip install 'ocrbatch[vllm]'" in flat  # no markup eaten
    assert "[choices: auto, openvino, onnxruntime]" not in flat  # named in its text already
    assert "--schedule continuous|static" in flat and "[default: 150] [env: OCRBATCH_DPI]" in flat
    # the descriptions stay in a column a person can read: wrapped lines start at most 30 columns in
    starts = [len(line) - len(line.lstrip()) for line in lines if line.startswith("      ")]
    assert starts and max(starts) <= 30


def test_serve_and_the_root_help_cut_nothing_either():
    serve = help_of("serve", "--help")
    assert "Server:" in serve and "OCRBATCH_TOKEN" in serve and "…" not in serve
    assert all(len(line) <= 80 for line in serve.splitlines())
    root = help_of("-h")
    assert "--show-completion SHELL" in root
    assert not [line for line in root.splitlines() if re.search(r"[\w,;]\.\.\.$", line)]  # no short help cut


def test_every_row_of_the_table_has_a_heading():
    """A row of ocrbatch's own table is placed in table.PANELS (an engine's rows go under its title)."""
    from ocrbatch.engines import catalog

    placed = {name for names in PANELS.values() for name in names}
    own = [o.name for o in config.OPTIONS if catalog.owner(o.name) is None]
    assert sorted(set(own) - placed) == [] and sorted(placed - set(own)) == []


def test_a_bad_value_is_one_line_whether_a_flag_or_a_variable_gives_it(tmp_path):
    args = ("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"))
    for extra, env, line in (
            (["--dpi", "abc"], {}, "--dpi abc: a whole number is needed"),
            ([], {"OCRBATCH_DPI": "abc"}, "OCRBATCH_DPI='abc': a whole number is needed"),
            (["--text-layer", "sometimes"], {}, "--text-layer sometimes: choose auto, off or only"),
            (["--max-batch", "many"], {}, "--max-batch many: a number of pages, or auto is needed"),
            (["--stall-timeout", "x"], {}, "--stall-timeout x: a number is needed")):
        r = run_cli(*args, *extra, env=env)
        assert (r.returncode, r.stderr) == (2, f"ocrbatch: error: {line}\n"), (extra, env, r.stderr)
    r = run_cli(*args, "--json", "--dpi", "abc")  # --json: the error also in its summary on stdout
    assert r.returncode == 2 and json.loads(r.stdout)["error"] == "--dpi abc: a whole number is needed"


def test_a_misspelt_option_suggests_the_nearest_first_on_one_line(tmp_path):
    args = ("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"))
    for wrong, first in (("--engin", "--engine"), ("--workrs", "--workers"), ("--formt", "--format")):
        r = run_cli(*args, wrong, "x")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith(f"ocrbatch: error: no such option {wrong}; did you mean {first} "), r.stderr
    r = run_cli("convert", "-o", str(tmp_path / "out"))
    assert (r.returncode, r.stderr) == (2, "ocrbatch: error: missing argument 'INPUT...' (ocrbatch convert --help)\n")


def test_force_ocr_is_text_layer_off_and_refuses_another_text_layer(tmp_path):
    pdf = str(ROOT / "sample_docs" / "report.pdf")
    r = run_cli("convert", pdf, "-o", str(tmp_path / "out"), "--engine", "fake", "--pages", "1", "--force-ocr")
    assert r.returncode == 0, r.stderr
    record = json.loads((tmp_path / "out" / "manifest.jsonl").read_text().splitlines()[0])
    assert record["options"]["text_layer"] == "off"
    r = run_cli("convert", pdf, "-o", str(tmp_path / "out2"), "--force-ocr", "--text-layer", "only")
    assert (r.returncode, r.stderr) == (2, "ocrbatch: error: --force-ocr is --text-layer off: give one of them\n")
    r = run_cli("convert", pdf, "-o", str(tmp_path / "out3"), "--engine", "fake", "--pages", "1", "--force-ocr",
                env={"OCRBATCH_TEXT_LAYER": "only"})  # the flag wins over the variable, as every flag does
    assert r.returncode == 0, r.stderr


def test_completion_for_zsh_and_fish_or_a_clear_refusal():
    assert help_of("--show-completion", "zsh").startswith("#compdef ocrbatch")
    assert help_of("--show-completion", "fish").startswith("complete --command ocrbatch")
    assert "complete -o default -F _ocrbatch_completion ocrbatch" in help_of("--show-completion", "bash")
    r = run_cli("--show-completion", "tcsh")
    assert (r.returncode, r.stderr) == (2, "ocrbatch: error: no completion for 'tcsh': name one of bash, zsh, fish, "
                                           "powershell\n")
    words = "ocrbatch convert --text-layer o"
    for shell, extra in (("zsh", {}), ("fish", {"_TYPER_COMPLETE_FISH_ACTION": "get-args"})):
        env = {**os.environ, "_OCRBATCH_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_ARGS": words, **extra}
        r = subprocess.run([sys.executable, "-m", "ocrbatch"], env=env, capture_output=True, text=True)
        assert r.returncode == 0 and "off" in r.stdout and "only" in r.stdout and "auto" not in r.stdout, (shell,
                                                                                                         r.stdout)
