"""The mutation tables (scripts/mutation_check.py) stay in step with the code: each mutation's text occurs
exactly once in its file, so `make mutants` applies every one of them (a stale one would be skipped as
"stale" there; here it is a failed test in `make test`, where a change to the code is first run)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import mutation_check  # noqa: E402

MUTATIONS = [m for table in mutation_check.TABLES.values() for m in table]


def test_every_mutation_applies_to_the_code_as_it_is():
    stale = [f"{m.name}: {(ROOT / m.file).read_text(encoding='utf-8').count(m.old)} matches in {m.file}"
             for m in MUTATIONS if (ROOT / m.file).read_text(encoding="utf-8").count(m.old) != 1]
    assert len(MUTATIONS) >= 100 and not stale, stale
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)  # names are how -k picks them


def test_every_test_a_mutation_names_is_there():
    """A test renamed leaves its mutations naming nothing: `make mutants` would run no test and call it an
    error, long after the rename. Each named file exists and defines each named test (and a -k pattern, if any,
    is left to pytest)."""
    import re

    missing = []
    for m in MUTATIONS:
        args = iter(m.tests)
        for test in args:
            if test in ("-k", "-m"):  # a pytest option: its value is a pattern, not a test
                next(args, None)
            if test.startswith("-"):
                continue
            path, _, name = test.partition("::")
            if not (ROOT / path).exists():
                missing.append(f"{m.name}: {path}")
            elif name and not re.search(rf"^(async )?def {re.escape(name.split('[')[0])}\(",
                                        (ROOT / path).read_text(encoding="utf-8"), re.M):
                missing.append(f"{m.name}: {test}")
    assert not missing, missing


def test_every_mutant_is_python_that_compiles():
    """A mutation that leaves a syntax error breaks every import, not the promise it names: its tests error out
    instead of failing (make mutants counts it an error), and it shows nothing about them."""
    broken = []
    for m in MUTATIONS:
        if m.file.endswith(".py"):
            text = (ROOT / m.file).read_text(encoding="utf-8").replace(m.old, m.new, 1)
            try:
                compile(text, m.file, "exec")
            except SyntaxError as exc:
                broken.append(f"{m.name}: {exc}")
    assert not broken, broken
