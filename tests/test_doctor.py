"""`ocrbatch doctor`: local facts only, every engine with its reason, exit 0 when the embedded engine works."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from ocrbatch import doctor
from ocrbatch.doctor import Finding
from ocrbatch.engines.deepseek_ocr2.doctor import check_cached_model
from ocrbatch.engines.rapidocr import doctor as rapidocr_doctor
from test_ui_resources import fake_pynvml

MODEL = "deepseek-community/DeepSeek-OCR-2"


def snapshot_dir(cache: Path, model: str, rev: str = "abc123") -> Path:
    snap = cache / ("models--" + model.replace("/", "--")) / "snapshots" / rev
    snap.mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    return snap


def test_doctor_json_reports_the_install_and_exits_0(tmp_path):
    cache = tmp_path / "hub"
    (snapshot_dir(cache, MODEL) / "model.safetensors").write_bytes(b"weights")
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    env.pop("OCRBATCH_RUNTIME", None)  # the automatic choice below (a suite run with it set forces a runtime)
    r = subprocess.run([sys.executable, "-m", "ocrbatch", "doctor", "--json"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    checks = {c["name"]: c for c in doc["checks"] if c["name"] != "model"}
    assert doc["ok"] is True
    assert checks["python"]["version"] == platform.python_version()
    assert checks["rapidocr"]["ok"] is True and "works" in checks["rapidocr"]["detail"]
    # which heads run (--script): by default Latin heads read and read again, the full head other scripts' lines
    assert checks["rapidocr"]["heads"] == ("doc reads every line, small-latin unsure ones again, small those of "
                                           "other scripts")
    assert checks["rapidocr"]["heads"] in checks["rapidocr"]["detail"]
    assert checks["fake"]["ok"] is True
    assert isinstance(checks["deepseek-ocr2"]["ok"], bool) and checks["deepseek-ocr2"]["detail"]
    backends = checks["deepseek-ocr2 backends"]  # which --backend loads here, and why not
    assert ("vllm" in backends["available"]) is (backends["vllm"] is None)
    if importlib.util.find_spec("vllm") is None:
        assert "vLLM is not installed" in backends["vllm"] and "ocrbatch[vllm]" in backends["detail"]
    assert "CPUExecutionProvider" in checks["onnxruntime"]["providers"]
    runtime = checks["rapidocr runtime"]  # what runs the recognizers, and why
    assert runtime["runtime"] == ("openvino" if runtime["amx"] and runtime["openvino"] else "onnxruntime")
    assert runtime["detail"].startswith(f"recognizers on {runtime['runtime']}")
    variant = checks["rapidocr recognizers"]  # which recognizers run, and why
    assert variant["variant"] == "float32" and "int8 is opt-in (--int8)" in variant["detail"]
    assert isinstance(checks["flash-attn"]["installed"], bool)
    assert checks["ray"]["installed"] is (importlib.util.find_spec("ray") is not None)
    assert "installed" in checks["torch"] and isinstance(checks["gpus"]["devices"], list)
    models = {c["model"]: c for c in doc["checks"] if c["name"] == "model"}
    assert models[MODEL]["cached"] is True and models[MODEL]["path"].startswith(str(cache))


def test_cached_model_complete_partial_and_absent(tmp_path):
    assert check_cached_model(MODEL, tmp_path).ok is False  # absent
    snap = snapshot_dir(tmp_path, MODEL)
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
    (snap / "model.safetensors.index.json").write_text(json.dumps(index))
    (snap / "model-00001-of-00002.safetensors").write_bytes(b"1")
    (snap / "model-00002-of-00002.safetensors").symlink_to(tmp_path / "blob-never-downloaded")
    partial = check_cached_model(MODEL, tmp_path)
    assert partial.ok is False and "partly" in partial.detail and "00002" in partial.detail
    (tmp_path / "blob-never-downloaded").write_bytes(b"2")
    done = check_cached_model(MODEL, tmp_path)
    assert done.ok is True and done.data["path"] == str(snap)


def test_gpus_come_from_nvml_and_a_missing_driver_is_not_an_error(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(gpus=1))
    found = doctor.check_gpus()
    assert "driver 570.1" in found.detail and "Fake GPU 0, 80.0 GiB" in found.detail
    assert found.data["devices"][0]["memory_total_mib"] == 80 * 1024
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=9))
    none = doctor.check_gpus()
    assert none.ok is None and none.detail.startswith("none found")


def test_exit_code_follows_the_embedded_engine(monkeypatch, capsys):
    works = [Finding("python", None, "3.x"), Finding("rapidocr", True, "works")]
    broken = [Finding("python", None, "3.x"), Finding("rapidocr", False, "does not work: no onnxruntime")]
    monkeypatch.setattr(doctor, "findings", lambda: works)
    assert doctor.main(as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    monkeypatch.setattr(doctor, "findings", lambda: broken)
    assert doctor.main() == 5
    assert "not ready" in capsys.readouterr().out


def test_table_shows_each_check_with_its_verdict():
    console = Console(record=True, file=io.StringIO(), width=120)
    doctor.render([Finding("rapidocr", True, "works: converted a test page"),
                   Finding("deepseek-ocr2", False, "needs torch and transformers"),
                   Finding("flash-attn", None, "not installed")], console)
    text = console.export_text()
    rows = {line.split()[1]: line.split()[0] for line in text.splitlines() if len(line.split()) > 2}
    assert rows["rapidocr"] == "ok" and rows["deepseek-ocr2"] == "no" and rows["flash-attn"] == "·"
    assert "needs torch and transformers" in text


def test_help_never_imports_torch():
    code = ("import sys; from ocrbatch.cli import app; import typer.testing as t; "
            "assert t.CliRunner().invoke(app, ['--help']).exit_code == 0; "
            "assert t.CliRunner().invoke(app, ['doctor', '--help']).exit_code == 0; "
            "print('torch' in sys.modules, 'transformers' in sys.modules, 'pynvml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_on_a_cpu_with_amx_and_no_openvino_doctor_recommends_the_extra(monkeypatch):
    """OpenVINO is an extra (about 180 MB, of use only with AMX): auto falls back to onnxruntime without it,
    and doctor says to install it where it would help, and only there."""
    monkeypatch.setitem(sys.modules, "openvino", None)  # as in a plain install
    for amx in (True, False):
        monkeypatch.setattr(rapidocr_doctor, "_cpu_has", lambda flag, amx=amx: amx and flag == "amx_bf16")
        found = rapidocr_doctor.check_runtime({})
        assert found.data["runtime"] == "onnxruntime" and found.data["openvino"] is False
        assert ("ocrbatch[openvino]" in found.detail) is amx, found.detail
