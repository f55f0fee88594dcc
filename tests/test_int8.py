"""The int8 recognizers' cache (engines/int8.py): built once from the wheel's model, a damaged or half-written
file rebuilt and never loaded, two processes building at once ending with the same file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from ocrbatch.engines import int8, ppocr, runtimes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tiny_rec() -> Path:
    return ppocr.model_dir() / ppocr.MODELS["tiny"][1]


@pytest.fixture(scope="module")
def built(tmp_path_factory, tiny_rec):
    """The tiny recognizer's int8 copy, really quantized (about 20 s), in a cache of its own."""
    folder = tmp_path_factory.mktemp("int8-cache")
    path, fresh = int8.int8_model(tiny_rec, folder)
    return folder, path, fresh


def test_built_once_from_the_wheels_model_and_it_reads(built, tiny_rec):
    folder, path, fresh = built
    assert fresh and path.parent == folder and int8.is_valid(path)
    assert int8.file_sha256(tiny_rec)[:int8.HASH_CHARS] in path.name  # keyed by the source model
    stamp = path.stat().st_mtime_ns
    again, fresh_again = int8.int8_model(tiny_rec, folder)
    assert again == path and not fresh_again and path.stat().st_mtime_ns == stamp  # not built a second time
    line = int8.calibration_lines(1)[0]
    dictionary = ppocr.model_dir() / ppocr.MODELS["tiny"][2]
    text, score = ppocr.Recognizer(runtimes.OnnxRuntimeModel(path), dictionary)([line])[0]
    assert text.strip() and 0 < score <= 1


def _copy_build(calls: list):
    """A stand-in quantizer that copies the source (the cache's rules do not depend on what is built)."""
    def build(source: Path, dest: Path) -> None:
        calls.append(dest)
        dest.write_bytes(source.read_bytes())
    return build


@pytest.mark.parametrize("damage", ["truncated", "half-written, no sidecar", "sidecar of another file"])
def test_a_damaged_or_half_written_cache_file_is_rebuilt_never_loaded(tmp_path, tiny_rec, damage):
    calls: list = []
    path, _ = int8.int8_model(tiny_rec, tmp_path, build=_copy_build(calls))
    sidecar = path.with_suffix(".json")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif damage == "half-written, no sidecar":
        sidecar.unlink()
        path.write_bytes(path.read_bytes()[:5000])
    else:
        sidecar.write_text('{"sha256": "' + "0" * 64 + '"}')
    assert not int8.is_valid(path)
    again, fresh = int8.int8_model(tiny_rec, tmp_path, build=_copy_build(calls))
    assert fresh and again == path and len(calls) == 2 and int8.is_valid(path)
    assert path.read_bytes() == tiny_rec.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left behind


def test_the_engine_refuses_to_run_a_damaged_file_it_did_not_check(tmp_path, tiny_rec, monkeypatch):
    """The engine goes through int8_model, which checks: a damaged file in the cache is rebuilt first."""
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.rapid import RapidOcrEngine

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list = []
    path, _ = int8.int8_model(tiny_rec, build=_copy_build(calls))  # a valid "int8" file (the float copy)
    assert path.parent == tmp_path / "ocrbatch" / "int8"
    path.write_bytes(b"not a model")  # damaged after it was built
    monkeypatch.setattr(int8, "quantize_recognizer", _copy_build(calls))
    from ocrbatch.engines.rapid import PROFILES, Profile

    monkeypatch.setitem(PROFILES, "tiny", Profile("tiny", "tiny", "small"))  # the wheel's tiny reads first
    engine = RapidOcrEngine(EngineOptions(model_size="tiny", reread_below=0.0, int8=True))
    engine.load("cpu")
    engine.close()
    assert len(calls) == 2 and int8.is_valid(path) and engine.variant == "int8"
    assert engine.identity().endswith("-int8")


BUILD_IN_A_PROCESS = """
import sys, time
from pathlib import Path
from ocrbatch.engines import int8

def slow_build(source, dest):
    dest.write_bytes(source.read_bytes()[: len(source.read_bytes()) // 2])
    time.sleep(1.0)  # a long build: the other process arrives while this one is at it
    with open(dest, "ab") as fh:
        fh.write(source.read_bytes()[len(source.read_bytes()) // 2:] + sys.argv[3].encode())

path, fresh = int8.int8_model(Path(sys.argv[1]), Path(sys.argv[2]), build=slow_build)
print(path, fresh)
"""


def test_two_processes_building_at_once_both_end_with_the_same_file(tmp_path, tiny_rec):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", BUILD_IN_A_PROCESS, str(tiny_rec), str(tmp_path), tag],
                              stdout=subprocess.PIPE, text=True, env=env) for tag in ("first", "second")]
    answers = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    paths = {a[0] for a in answers}
    assert len(paths) == 1 and sorted(a[1] for a in answers) == ["False", "True"]  # one built, one waited
    path = Path(paths.pop())
    assert int8.is_valid(path) and path.read_bytes().endswith((b"first", b"second"))


def test_doctor_says_which_recognizers_run_and_why():
    from ocrbatch.engines.rapidocr.doctor import check_int8

    plain = check_int8({})
    assert plain.data["variant"] == "float32" and "opt-in" in plain.detail
    asked = check_int8({"OCRBATCH_INT8": "1"})
    assert asked.data["variant"] == "int8" and "OCRBATCH_INT8" in asked.detail
