"""`ocrbatch serve`, started as a user would (a uvicorn subprocess on a free loopback port) and talked to with
httpx. The `gate` engine (tests/engines) holds batches while a file exists, so that pages can be kept waiting
without depending on timing."""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from conftest import draw_page, raw_pdf, run_cli, save_pdf  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cret"


def until(check, what: str, deadline_s: float = 60.0) -> None:
    """Wait for `check()` to hold (a bound against hanging, not a timing assertion)."""
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def png(text: str) -> bytes:
    buf = io.BytesIO()
    draw_page(text, size=(300, 200), font_size=20).save(buf, "PNG")
    return buf.getvalue()


def pdf(tmp: Path, pages: int) -> bytes:
    return save_pdf(tmp / f"doc{pages}.pdf", [draw_page(f"page {i}", size=(300, 400)) for i in range(1, pages + 1)]
                    ).read_bytes()


def encrypted_pdf() -> bytes:
    """A one-page PDF locked by the standard security handler with a password nobody knows."""
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] >>",
            b"<< /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >>"]
    return raw_pdf(objs, b"/Encrypt 4 0 R /ID [<%s><%s>] " % (b"ab" * 16, b"ab" * 16))


class Server:
    """`ocrbatch serve --port 0 ARGS` in a subprocess (tests/serve_main.py: the CLI plus the test engines)."""

    def __init__(self, tmp: Path, *args: str, token: str | None = None) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.gate, self.batch_log, self.log = tmp / "gate", tmp / "batches", tmp / "server.log"
        env = {**os.environ, "OCRBATCH_TEST_GATE": str(self.gate), "OCRBATCH_TEST_BATCHES": str(self.batch_log)}
        env.pop("OCRBATCH_TOKEN", None)
        if token:
            args = (*args, "--token", token)
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve",
                                          "--port", "0", *args], stdout=subprocess.DEVNULL, stderr=err, env=env)
        found: list[str] = []

        def announced() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited with {self.proc.returncode}: {self.log.read_text()}")
            found[:] = re.findall(r"serving on http://([\d.]+):(\d+)", self.log.read_text())
            return bool(found)

        until(announced, "the server to listen")
        self.host, self.port = found[0][0], int(found[0][1])
        self.url = f"http://{self.host}:{self.port}"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        until(lambda: httpx.get(self.url + "/readyz").status_code == 200, "the engine to load")

    def convert(self, body: bytes, params: dict | None = None, headers: dict | None = None,
                filename: str | None = None) -> httpx.Response:
        headers = {**self.headers, **(headers or {})}
        if filename:
            return httpx.post(self.url + "/v1/convert", params=params, headers=headers, timeout=120,
                              files={"file": (filename, body)})
        return httpx.post(self.url + "/v1/convert", params=params, headers=headers, content=body, timeout=120)

    def metric(self, name: str, **labels: str) -> float:
        text = httpx.get(self.url + "/metrics").text
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == name and s.labels == labels:
                    return s.value
        return 0.0

    def batches(self) -> list[int]:
        return [int(x) for x in self.batch_log.read_text().split()] if self.batch_log.exists() else []

    @contextmanager
    def held(self):
        """Batches wait at the engine until the block ends."""
        self.gate.touch()
        try:
            yield
        finally:
            self.gate.unlink(missing_ok=True)

    def accepting(self) -> bool:
        try:
            socket.create_connection((self.host, self.port), timeout=5).close()
            return True
        except OSError:
            return False

    def stop(self) -> int:
        self.gate.unlink(missing_ok=True)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("serve"), "--engine", "gate", "--max-batch", "8", "--max-wait-ms", "20",
                 "--max-queue", "6", "--max-upload-mb", "1", token=TOKEN)
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def pool():
    with ThreadPoolExecutor(8) as ex:
        yield ex


def test_binds_to_loopback_unless_told(server):
    assert server.host == "127.0.0.1"


def test_an_image_as_multipart_gives_its_page_as_json(server):
    r = server.convert(png("hello"), filename="scan.png")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["name"] == "scan.png" and body["failed"] == 0
    [page] = body["pages"]
    assert page["page"] == 1 and page["status"] == "ok" and page["error"] is None
    assert page["markdown"].startswith("# scan.png, page 1")
    assert page["timings"]["batch_size"] >= 1 and "infer_s" in page["timings"]


def test_a_pdf_as_raw_body_with_a_page_selection_as_markdown(server, tmp_path):
    r = server.convert(pdf(tmp_path, 4), params={"pages": "2-3"}, headers={"Accept": "text/markdown"})
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/markdown")
    assert re.findall(r"<!-- page (\d+) -->", r.text) == ["2", "3"]
    assert "page 2\n" in r.text and "page 4" not in r.text


def test_a_pdf_streams_as_ndjson_one_line_per_page_then_done(server, tmp_path):
    import json

    r = server.convert(pdf(tmp_path, 3), params={"priority": "bulk"}, headers={"Accept": "application/x-ndjson"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in r.text.splitlines()]
    assert [x["page"] for x in lines[:-1]] == [1, 2, 3] and all(x["status"] == "ok" for x in lines[:-1])
    assert lines[-1] == {"done": True, "name": "upload", "pages": 3, "failed": 0}


def test_lines_and_boxes_come_with_format_lines_and_each_page_has_its_confidence(server, tmp_path):
    import json

    import jsonschema

    from ocrbatch import pagejson
    from test_layout_textlayer import article_page, write_pdf

    born_digital = write_pdf(tmp_path / "a.pdf", [article_page()]).read_bytes()
    plain = server.convert(born_digital).json()["pages"][0]
    assert plain["confidence"] == {"method": "text-layer", "score": None} and "lines" not in plain
    for how in ({"params": {"format": "lines"}}, {"headers": {"Accept": "application/json; format=lines"}}):
        page = server.convert(born_digital, **how).json()["pages"][0]
        jsonschema.validate(page["lines"], pagejson.SCHEMA)
        assert page["lines"]["lines"][0]["text"] == "Results of the Study" and page["lines"]["dpi"] == 150
        assert page["lines"]["width"] == 1275 and page["lines"]["confidence"]["method"] == "text-layer"
    streamed = server.convert(born_digital, headers={"Accept": "application/x-ndjson; format=lines"})
    first = json.loads(streamed.text.splitlines()[0])
    assert first["lines"]["lines"][0]["text"] == "Results of the Study"
    image = server.convert(png("hello"), params={"format": "lines"}).json()["pages"][0]  # an engine without lines
    assert image["lines"]["lines"] == [] and image["confidence"] is None


def test_unreadable_documents_are_422_with_the_clis_line(server, tmp_path):
    files = {"notes.txt": b"hello, not a document", "damaged.pdf": pdf(tmp_path, 2)[:300],
             "locked.pdf": encrypted_pdf(), "cut.png": png("cut short")[:400]}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    cli = run_cli("convert", *files, "-o", str(tmp_path / "out"), "--engine", "fake", cwd=tmp_path)
    cli_lines = {line.removeprefix("ocrbatch: error: ") for line in cli.stderr.splitlines()}
    for name, data in files.items():
        r = server.convert(data, filename=name)
        assert r.status_code == 422, (name, r.text)
        assert r.json()["error"] in cli_lines, (r.json(), cli_lines)
    assert any("encrypted" in line for line in cli_lines)


def test_bad_parameters_are_400(server):
    assert server.convert(png("x"), params={"priority": "urgent"}).status_code == 400
    r = server.convert(png("x"), params={"pages": "three"})
    assert r.status_code == 400 and "pages" in r.json()["error"]
    no_file = httpx.post(server.url + "/v1/convert", headers=server.headers, files={"upload": ("a.png", png("x"))})
    assert no_file.status_code == 400 and "'file'" in no_file.json()["error"]


def test_an_upload_over_the_limit_is_413_declared_or_streamed(server):
    big = b"\0" * (1024 * 1024 + 1)
    assert server.convert(big).status_code == 413
    chunked = httpx.post(server.url + "/v1/convert", headers=server.headers, timeout=60,
                         content=iter([big[:600_000], big[600_000:]]))
    assert chunked.status_code == 413
    assert server.convert(png("small")).status_code == 200


def test_a_token_is_needed_for_v1_but_not_for_health_or_metrics(server):
    r = httpx.post(server.url + "/v1/convert", content=png("x"))
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(server.url + "/v1/convert", content=png("x"), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert httpx.get(server.url + "/healthz").json() == {"status": "alive"}
    assert httpx.get(server.url + "/metrics").status_code == 200


def test_concurrent_requests_share_one_batch(server, pool):
    with server.held():
        n0 = len(server.batches())
        first = pool.submit(server.convert, png("first"))
        until(lambda: len(server.batches()) == n0 + 1, "the first batch to start")
        others = [pool.submit(server.convert, png(f"client {k}")) for k in range(5)]
        until(lambda: server.metric("ocrbatch_queue_depth", lane="interactive") == 5, "five pages waiting")
    assert first.result().status_code == 200
    sizes = [f.result().json()["pages"][0]["timings"]["batch_size"] for f in others]
    assert sizes == [5] * 5
    assert server.batches()[n0:] == [1, 5]


def test_a_full_queue_is_503_with_retry_after_and_the_held_work_finishes(server, pool, tmp_path):
    with server.held():
        held = pool.submit(server.convert, pdf(tmp_path, 6), {"priority": "bulk"})
        until(lambda: server.metric("ocrbatch_queue_used") == 6, "six pages held")
        r = server.convert(png("one more"))
        assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1
        assert "max-queue" in r.json()["error"]
    done = held.result()
    assert done.status_code == 200 and [p["status"] for p in done.json()["pages"]] == ["ok"] * 6
    assert server.metric("ocrbatch_http_rejected_total", reason="queue_full") >= 1


@pytest.mark.parametrize("accept", ["application/json", "application/x-ndjson"])
def test_a_client_that_disconnects_frees_its_pages(server, pool, tmp_path, accept):
    body = pdf(tmp_path, 4)
    with server.held():
        n0 = len(server.batches())
        blocker = pool.submit(server.convert, png("blocker"))
        until(lambda: len(server.batches()) == n0 + 1, "the blocker's batch to start")
        cancelled0 = server.metric("ocrbatch_http_pages_total", status="cancelled")
        sock = socket.create_connection((server.host, server.port))
        head = (f"POST /v1/convert HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nAccept: {accept}\r\n"
                f"Content-Type: application/pdf\r\nContent-Length: {len(body)}\r\n\r\n")
        sock.sendall(head.encode() + body)
        until(lambda: server.metric("ocrbatch_queue_depth", lane="interactive") == 4, "its four pages queued")
        sock.close()
        until(lambda: server.metric("ocrbatch_http_pages_total", status="cancelled") == cancelled0 + 4,
              "four pages cancelled")
        assert server.metric("ocrbatch_queue_used") == 1  # only the blocker holds a slot
    assert blocker.result().status_code == 200
    pages0 = server.metric("ocrbatch_engine_pages_total")
    after = server.convert(png("after"))
    assert after.json()["pages"][0]["timings"]["batch_size"] == 1  # the cancelled pages did not join it
    assert server.metric("ocrbatch_engine_pages_total") == pages0 + 1
    assert server.metric("ocrbatch_http_requests_total", route="/v1/convert", status="499") >= 1


def test_many_pages_enter_the_queue_a_window_at_a_time(server, tmp_path):
    """A PDF longer than --max-queue (6 here) is converted: its pages take slots as earlier ones finish."""
    r = server.convert(pdf(tmp_path, 20), params={"priority": "bulk"}, headers={"Accept": "application/x-ndjson"})
    lines = r.text.splitlines()
    assert r.status_code == 200 and len(lines) == 21 and '"failed": 0' in lines[-1]
    assert server.metric("ocrbatch_queue_used") == 0


def test_metrics_parse_as_prometheus_text_with_ocrbatch_names(server):
    server.convert(png("for metrics"))
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(server.url + "/metrics").text)}
    assert all(name.startswith("ocrbatch_") for name in families)
    assert families["ocrbatch_http_requests"].type == "counter"
    assert families["ocrbatch_http_request_duration_seconds"].type == "histogram"
    assert families["ocrbatch_page_batch_size"].type == "histogram"
    assert {s.labels["lane"] for s in families["ocrbatch_queue_depth"].samples} == {"interactive", "bulk"}
    assert server.metric("ocrbatch_ready") == 1
    assert server.metric("ocrbatch_engine_batches_total") >= 1
    assert server.metric("ocrbatch_http_request_duration_seconds_count", priority="interactive") >= 1
    assert server.metric("ocrbatch_http_requests_total", route="/v1/convert", status="200") >= 1


def test_sigterm_stops_accepting_finishes_the_request_in_flight_and_exits_0(tmp_path, pool):
    srv = Server(tmp_path, "--engine", "gate", "--drain-s", "60")
    try:
        with srv.held():
            in_flight = pool.submit(srv.convert, png("in flight"))
            until(lambda: srv.batches() == [1], "its batch to start")
            srv.proc.send_signal(signal.SIGTERM)
            until(lambda: not srv.accepting(), "the server to stop accepting")
            assert srv.proc.poll() is None  # still finishing the request
        r = in_flight.result()
        assert r.status_code == 200 and r.json()["pages"][0]["status"] == "ok"
        assert srv.proc.wait(60) == 0
    finally:
        srv.stop()


def test_the_engine_options_of_convert_reach_the_server(server, tmp_path):
    from test_layout_textlayer import report_with_furniture

    doc = report_with_furniture(tmp_path / "report.pdf").read_bytes()
    r = server.convert(doc, params={"pages": "2"})  # read from its text layer: furniture left out by default
    assert r.status_code == 200, r.text
    assert "beta four ends" in r.json()["pages"][0]["markdown"] and "Page 2 of 2" not in r.text
    kept = Server(tmp_path / "kept", "--engine", "fake", "--keep-furniture")
    try:
        assert "Page 2 of 2" in kept.convert(doc, params={"pages": "2"}).json()["pages"][0]["markdown"]
    finally:
        kept.stop()
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve", "--port", "0",
                        "--model-size", "huge"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--model-size" in p.stderr


def test_an_engine_that_cannot_load_stops_the_server_with_exit_5(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve", "--port", "0",
                        "--engine", "no-load"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 5, p.stderr
    assert "weights not found" in p.stderr


def test_help_imports_no_server_or_torch():
    code = ("import sys; from ocrbatch.cli import app; import typer.testing as t; "
            "r = t.CliRunner().invoke(app, ['serve', '--help']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('starlette', 'uvicorn', 'torch', 'prometheus_client') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_deepseek_pages_of_concurrent_requests_decode_continuously_as_they_would_alone(tmp_path, pool):
    """The tiny random DeepSeek-OCR-2 served with continuous decoding (the default): pages of concurrent
    requests share the running rows, each page's Markdown what the engine gives it alone."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not hasattr(transformers, "DeepseekOcr2ForConditionalGeneration"):
        pytest.skip("transformers has no DeepSeek-OCR-2 model")
    from ocrbatch.config import EngineOptions
    from ocrbatch.engines.deepseek_ocr2.engine import DeepseekOcr2Engine
    from test_deepseek_ocr2 import page_image
    from tiny_deepseek import build

    threads = torch.get_num_threads()
    model = build(tmp_path / "model")
    paths = []
    for i, size in enumerate([(700, 500), (1400, 700), (620, 877)]):
        paths.append(tmp_path / f"p{i}.png")
        draw_page(f"Page {i}\n" + "words " * (2 + i), size=size).save(paths[-1])
    args = ["--engine", "deepseek-ocr2", "--model", str(model), "--devices", "cpu", "--max-new-tokens", "12",
            "--threads", "1", "--max-wait-ms", "20"]
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve", "--port", "0", *args,
                        "--schedule", "sideways"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "--schedule sideways: choose continuous or static" in p.stderr
    srv = Server(tmp_path / "srv", *args)
    try:
        served = list(pool.map(lambda path: srv.convert(path.read_bytes(), filename=path.name), paths))
    finally:
        assert srv.stop() == 0
    engine = DeepseekOcr2Engine(EngineOptions(model=str(model), max_new_tokens=12, threads=1))
    engine.load("cpu")
    try:
        for path, r in zip(paths, served):
            assert r.status_code == 200, r.text
            page = r.json()["pages"][0]
            alone = engine.infer([page_image(path)])[0]
            assert (page["markdown"], page["status"]) == (alone.markdown, alone.status.value), path.name
    finally:
        engine.close()
        torch.set_num_threads(threads)
