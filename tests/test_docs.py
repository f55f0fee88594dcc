"""The documentation keeps its word: the docs site builds with `mkdocs build --strict` (no broken link or anchor,
no missing page), its generated Options page has every row of config.OPTIONS, every shell example of the README
and of Getting started runs as written against sample_docs/ and exits as it says, and every Python example of
the docs runs as written.

Each checked example has a comment before it, `<!-- check: ... -->` (invisible on the page), saying what to
expect: `exit=N`, `stdout="TEXT"` / `stderr="TEXT"` (in what it prints), `engine=embedded` (else the examples run
with OCRBATCH_ENGINE=fake, as the page says, to stay fast), `fake="TEXT"` (TEXT, the GPU engine's flags, is
replaced by `--engine fake`), `skip="why"` (the set-up commands, which install), `compile-only="why"` (a Python
example that needs a GPU or weights). A shell block without a check comment is a failure, so none is missed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ocrbatch import config

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_AS_WRITTEN = [ROOT / "README.md", DOCS / "getting-started.md"]  # every shell example here is run
EXAMPLE_TIMEOUT_S = 180
LEAVES = {"README.md": ("md/invoice.md", "md/report/page-0001.md", "report.md",  # what the examples say they write
                        "ocrbatch/md/manifest.jsonl", "md-gpu/table.md"),  # the cron line's; the GPU line's (fake)
          "getting-started.md": ("md/manifest.jsonl", ".bash_completions/ocrbatch.sh")}
sys.path.insert(0, str(ROOT / "scripts"))
import reference  # noqa: E402  (scripts/reference.py: the generated pages)


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    text: str
    check: dict[str, str] | None = field(default=None)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, each with the check comment on the line before it."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w+)\s*$", lines[i])
        if not m:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        before = lines[i - 1] if i else ""
        c = re.fullmatch(r"<!-- check: (.*) -->", before.strip())
        check = dict(part.split("=", 1) for part in shlex.split(c.group(1))) if c else None
        found.append(Block(path, i + 1, m.group(1), "\n".join(lines[i + 1:end]) + "\n", check))
        i = end + 1
    return found


def shell_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.lang in ("sh", "bash", "crontab")]


@pytest.fixture
def sandbox(tmp_path):
    """A home folder holding a copy of sample_docs/ (and, for the cron line, a checkout-like ~/ocrbatch with
    .venv/bin/ocrbatch), with `ocrbatch` on PATH: this tree's, run by this Python."""
    home = tmp_path / "home"
    shutil.copytree(ROOT / "sample_docs", home / "sample_docs")
    shutil.copytree(ROOT / "sample_docs", home / "ocrbatch" / "sample_docs")
    wrapper = f'#!/bin/sh\nexec "{sys.executable}" -m ocrbatch "$@"\n'
    for place in (tmp_path / "bin", home / "ocrbatch" / ".venv" / "bin"):
        place.mkdir(parents=True)
        (place / "ocrbatch").write_text(wrapper)
        (place / "ocrbatch").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCRBATCH_")}
    env.update(HOME=str(home), PATH=f"{tmp_path / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}", SHELL="/bin/bash",
               PYTHONPATH=str(ROOT), NO_COLOR="1")
    return home, env


@pytest.fixture
def checkout(sandbox, tmp_path):
    """The sandbox as the checkout after `make run`: its .venv is this Python's virtualenv (a symlink: nothing is
    installed), and `ocrbatch` is on PATH only once that is activated, as the pages say."""
    home, env = sandbox
    venv = Path(sys.prefix)
    if not (venv / "bin" / "activate").is_file():
        pytest.skip("the tests do not run in a virtualenv: no .venv/bin/activate to follow the pages with")
    (home / ".venv").symlink_to(venv)
    bare = [p for p in env["PATH"].split(os.pathsep) if p != str(tmp_path / "bin") and not (Path(p) / "ocrbatch").exists()]
    return home, {**env, "PATH": os.pathsep.join(bare)}


def one_shell(examples: list[Block], said: Path) -> str:
    """One bash script that runs `examples` in page order, as a user types them into one shell: the set-up's
    lines but `make` (which installs: the checkout fixture stands for what it made) in the shell itself, so
    that activating .venv holds for what follows; each example in a subshell of it, its stdout, stderr and exit
    code kept under `said` as N.out, N.err and N.rc (N.M for the Mth entry of a crontab, run by sh from the home
    folder, as cron does)."""
    script = []
    for n, block in enumerate(examples):
        check = block.check or {}
        text = block.text
        if "skip" in check:
            script += [line for line in text.splitlines() if line.strip() and not line.startswith(("make ", "#"))]
            continue
        if "fake" in check:
            assert check["fake"] in text, f"{block.where}: the check's fake= text is not in the example"
            text = text.replace(check["fake"], "--engine fake")
        engine = "" if check.get("engine") == "embedded" else "export OCRBATCH_ENGINE=fake\n"
        if block.lang == "crontab":  # each entry's command
            commands = [line.split(None, 5)[5] for line in text.splitlines() if line.strip() and not line.startswith("#")]
            runs = [(f"{n}.{m}", f'cd "$HOME" && {engine}exec sh -c {shlex.quote(c)}') for m, c in enumerate(commands)]
        else:
            runs = [(f"{n}", f"{engine}set -e -o pipefail\n{text}")]
        for name, body in runs:
            out = shlex.quote(str(said / name))
            script.append(f"(\n{body}\n) >{out}.out 2>{out}.err </dev/null; echo $? >{out}.rc")
    return "\n".join(script) + "\n"


@pytest.mark.parametrize("path", RUN_AS_WRITTEN, ids=lambda p: p.name)
def test_every_shell_example_runs_as_written_and_exits_as_documented(path, checkout, tmp_path):
    """The page's shell blocks, in order, in one shell, from its set-up on (activating .venv as it says)."""
    home, env = checkout
    examples = shell_blocks(path)
    assert examples, f"{path.name} has no shell example"
    for block in examples:
        assert block.check is not None, f"{block.where}: a shell example without a <!-- check: ... --> comment"
        if "skip" in block.check:
            assert block.check["skip"] and all(line.startswith(("make ", "#", ". .venv/bin/activate"))
                                               for line in block.text.splitlines() if line.strip()), \
                f"{block.where}: a set-up block holds only make (not run: it installs) and the activation"
    said = tmp_path / "said"
    said.mkdir()
    r = subprocess.run(["bash", "-c", one_shell(examples, said)], cwd=home, env=env, capture_output=True, text=True,
                       timeout=EXAMPLE_TIMEOUT_S * len(examples))
    assert r.returncode == 0 and not r.stderr, r.stderr  # the set-up's lines themselves
    for n, block in enumerate(examples):
        for rc in sorted(said.glob(f"{n}.rc")) + sorted(said.glob(f"{n}.*.rc")):
            out, err = rc.with_suffix(".out").read_text(), rc.with_suffix(".err").read_text()
            where = f"{block.where}\n{block.text}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}"
            assert int(rc.read_text()) == int(block.check.get("exit", "0")), where
            assert block.check.get("stdout", "") in out, where
            assert block.check.get("stderr", "") in err, where
    for name in LEAVES.get(path.name, ()):
        assert (home / name).is_file(), f"{path.name}'s examples did not leave {name}"


def python_blocks() -> list[Block]:
    return [b for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))] for b in blocks(path) if b.lang == "python"]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_every_python_example_runs_as_written(block, sandbox):
    home, env = sandbox
    compile(block.text, block.where, "exec")
    if block.check and "compile-only" in block.check:
        return  # it says why (a GPU, weights): compiled is what can be checked here
    r = subprocess.run([sys.executable, "-c", block.text], cwd=home, env=env, capture_output=True, text=True,
                       timeout=EXAMPLE_TIMEOUT_S)
    assert r.returncode == 0, f"{block.where}\n{r.stderr[-3000:]}"


def test_every_shell_example_of_the_docs_is_valid_shell():
    for path in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for block in shell_blocks(path):
            if block.lang == "crontab":
                continue
            r = subprocess.run(["bash", "-n", "-c", block.text], capture_output=True, text=True)
            assert r.returncode == 0, f"{block.where}: {r.stderr}"


def test_the_site_builds_strictly_with_the_generated_pages(tmp_path):
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                       capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    options = (site / "options" / "index.html").read_text()
    commands = (site / "commands" / "index.html").read_text()
    for o in config.OPTIONS:
        assert o.env in options, o.env
    assert "ocrbatch throughput" in commands and "--install-completion" in commands
    assert "Converter" in (site / "python" / "index.html").read_text()


def test_the_options_page_has_every_row_of_the_table_once_where_it_applies():
    page = reference.options_page()
    convert, serve = page.split("\n## convert\n", 1)[1].split("\n## serve\n", 1)
    for o in config.OPTIONS:
        assert page.count(f"`{o.env}`") == 1, o.env  # written once
        if config.RUN in o.scope:
            assert f"`{o.flag}" in convert and o.help.split()[0] in convert, o.flag
        elif config.SERVE in o.scope:
            assert f"`{o.flag}" in serve, o.flag
        if config.ENGINE in o.scope and o.scope != {config.ENGINE}:
            row = next(line for line in page.splitlines() if f"`{o.env}`" in line)
            assert row.endswith("Converter |"), row


def test_every_script_says_what_it_is_and_something_runs_it():
    """scripts/ keeps only what the Makefile, the tests or the docs run (or another such script imports)."""
    import ast

    runners = "\n".join(p.read_text() for p in [ROOT / "Makefile", *(ROOT / "tests").rglob("*.py"),
                                                  *DOCS.glob("*.md"), *(ROOT / "scripts").glob("*")] if p.is_file())
    for script in sorted((ROOT / "scripts").iterdir()):
        if script.suffix not in (".py", ".sh"):
            continue
        text = script.read_text()
        said = ast.get_docstring(ast.parse(text)) if script.suffix == ".py" else text.split("\n", 2)[1].lstrip("# ")
        assert said and said.strip(), f"{script.name} says nothing of what it is"
        mentions = runners.replace(text, "").count(script.stem)
        assert mentions, f"{script.name}: neither the Makefile nor the tests nor the docs run it"


def test_shell_completion_offers_commands_and_an_options_values():
    env = {**os.environ, "_OCRBATCH_COMPLETE": "complete_bash", "COMP_CWORD": "3",
           "COMP_WORDS": "ocrbatch convert --text-layer o"}
    r = subprocess.run([sys.executable, "-m", "ocrbatch"], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.split() == ["off", "only"], r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-m", "ocrbatch"], capture_output=True, text=True,
                       env={**env, "COMP_CWORD": "1", "COMP_WORDS": "ocrbatch th"})
    assert r.stdout.split() == ["throughput"], r.stdout + r.stderr  # not the hidden old name, bench


def test_the_man_page_comes_from_the_same_table(tmp_path):
    """`make man` after `make run` alone: no click package (typer 0.29 carries its own; only the docs extra,
    through mkdocs, brings one)."""
    out = tmp_path / "ocrbatch.1"
    as_installed = ("import runpy, sys; sys.modules['click'] = None; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')")
    r = subprocess.run([sys.executable, "-c", as_installed, str(ROOT / "scripts" / "reference.py"), "man", str(out)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith(".TH OCRBATCH 1")
    for o in config.options(config.RUN):
        assert o.flag.replace("-", "\\-") in text and o.env in text.replace("\\-", "-"), o.flag


def test_the_home_page_says_how_to_install_and_shows_a_scan_beside_its_markdown():
    home = (DOCS / "index.md").read_text()
    install = next(b for b in shell_blocks(DOCS / "index.md"))
    assert "pipx install ." in install.text and "ocrbatch convert" in install.text
    assert "make run" in install.text and ". .venv/bin/activate" in install.text
    picture = re.search(r"!\[[^\]]+\]\(([^)]+\.png)\)", home)
    assert picture and (DOCS / picture.group(1)).stat().st_size < 150_000  # a small picture, not a screenshot
    assert "```markdown" in home


def test_code_in_table_cells_may_wrap_so_that_tables_fit_their_column():
    css = (DOCS / "stylesheets" / "extra.css").read_text()
    rule = re.search(r"table:not\(\[class\]\) code \{([^}]*)\}", css)
    assert rule and "nowrap" not in rule.group(1) and "overflow-wrap" in rule.group(1)
