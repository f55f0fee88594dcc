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
MD = "text/markdown"


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

    def __init__(self, tmp: Path, *args: str, token: str | None = None, preexec_fn=None,
                 env: dict | None = None, ready_s: float = 60.0) -> None:
        tmp.mkdir(parents=True, exist_ok=True)
        self.gate, self.batch_log, self.log = tmp / "gate", tmp / "batches", tmp / "server.log"
        self.tmpdir = tmp / "tmpdir"  # the server's TMPDIR: its uploads' folders are in here
        self.tmpdir.mkdir(exist_ok=True)
        env = {**os.environ, "OCRBATCH_TEST_GATE": str(self.gate), "OCRBATCH_TEST_BATCHES": str(self.batch_log),
               "TMPDIR": str(self.tmpdir), **(env or {})}
        env.pop("OCRBATCH_TOKEN", None)
        if token:
            args = (*args, "--token", token)
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve",
                                          "--port", "0", *args], stdout=subprocess.DEVNULL, stderr=err, env=env,
                                         preexec_fn=preexec_fn)
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
        until(lambda: httpx.get(self.url + "/readyz").status_code == 200, "the engine to load", ready_s)

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

    def uploads(self) -> list[Path]:
        """What the server keeps of uploads now: the files and folders under its temporary folder."""
        return sorted(p for p in self.tmpdir.glob("ocrbatch-serve-*/**/*"))

    def raw(self, data: bytes) -> socket.socket:
        """A connection that has sent `data` and stays open."""
        sock = socket.create_connection((self.host, self.port))
        if data:
            sock.sendall(data)
        return sock

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


def test_each_output_format_is_answered_by_accept_and_by_format(server, tmp_path):
    import xml.etree.ElementTree as ET

    import pypdfium2

    from ocrbatch.render import RENDERERS
    from test_layout_textlayer import article_page, write_pdf

    born_digital = write_pdf(tmp_path / "a.pdf", [article_page(), article_page()]).read_bytes()  # line boxes
    for name in ("md", "txt", "hocr", "pdf"):
        media = RENDERERS[name].media
        by_accept = server.convert(born_digital, headers={"Accept": media})
        by_format = server.convert(born_digital, params={"format": name}, headers={"Accept": "application/json"})
        for r in (by_accept, by_format):
            assert r.status_code == 200 and r.headers["content-type"].startswith(media), (name, r.text[:200])
        if name == "pdf":
            doc = pypdfium2.PdfDocument(by_accept.content)
            assert len(doc) == 2 and all("Results of the Study" in doc[i].get_textpage().get_text_range()
                                         for i in range(2))
            continue
        assert by_accept.content == by_format.content, name
        text = by_accept.text
        if name == "hocr":
            root = ET.fromstring(by_accept.content)
            assert len([e for e in root.iter() if e.get("class") == "ocr_page"]) == 2
            text = "\n".join("".join(e.itertext()) for e in root.iter() if e.get("class") == "ocr_line")
        assert text.count("Results of the Study") == 2, name
        if name == "txt":
            assert by_accept.text.count("\f") == 1 and "|" not in by_accept.text
    assert server.convert(born_digital, params={"format": "json"}).json()["pages"][1]["page"] == 2
    refused = server.convert(png("hello"), params={"format": "hocr"})  # the test engine gives no boxes
    assert refused.status_code == 422 and "hocr needs each line's box" in refused.json()["error"]
    text = server.convert(png("hello"), headers={"Accept": "text/plain"})
    assert text.status_code == 200 and text.headers["content-type"].startswith("text/plain")
    assert server.convert(png("hello"), params={"format": "docx"}).status_code == 400


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


# -- admission, slow and surplus clients, uploads, names, the drain, failing engines (issue 19) -----------

def closed_by_server(sock: socket.socket, deadline_s: float = 60.0) -> bytes:
    """What the server sent before closing the connection (raises if it stays open past the bound)."""
    sock.settimeout(deadline_s)
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    sock.close()
    return got


def response_on(sock: socket.socket, deadline_s: float = 60.0) -> bytes:
    """One whole HTTP response read from `sock` (head and Content-Length bytes of body)."""
    sock.settimeout(deadline_s)
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    length = int(re.search(rb"content-length: (\d+)", got, re.I).group(1))
    while len(got.partition(b"\r\n\r\n")[2]) < length:
        got += sock.recv(65536)
    return got


def status(request) -> int | None:
    """The status code of `request()`, or None if the connection was refused or cut."""
    try:
        return request().status_code
    except httpx.HTTPError:
        return None


def head(length: int, accept: str = "application/json", ctype: str = "application/octet-stream") -> bytes:
    return (f"POST /v1/convert HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nAccept: {accept}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {length}\r\n\r\n").encode()


def multipart(filename: bytes, data: bytes) -> tuple[bytes, str]:
    """A multipart body whose file part carries `filename` byte for byte (httpx would clean it up)."""
    boundary = "b0undary7"
    body = (b"--" + boundary.encode() + b"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + filename
            + b"\"\r\nContent-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--" + boundary.encode()
            + b"--\r\n")
    return body, f"multipart/form-data; boundary={boundary}"


def test_a_burst_is_admitted_up_to_max_queue_and_the_rest_is_503_at_once(server):
    """20 simultaneous one-page requests against --max-queue 6: six are admitted, fourteen are refused while
    the six are still held at the engine (at once, not after waiting), and the six then finish."""
    until(lambda: server.metric("ocrbatch_queue_used") == 0, "earlier requests to end")
    refused0 = server.metric("ocrbatch_http_rejected_total", reason="queue_full")
    body = png("burst")
    with ThreadPoolExecutor(20) as many, server.held():
        futures = [many.submit(server.convert, body) for _ in range(20)]
        until(lambda: sum(f.done() for f in futures) == 14, "fourteen answers")
        refused = [f.result() for f in futures if f.done()]
        assert {r.status_code for r in refused} == {503}
        assert all(int(r.headers["Retry-After"]) >= 1 and "max-queue" in r.json()["error"] for r in refused)
        assert server.metric("ocrbatch_queue_used") == 6
        assert server.metric("ocrbatch_http_requests_in_progress") == 6
    assert [f.result().status_code for f in futures].count(200) == 6
    assert server.metric("ocrbatch_http_rejected_total", reason="queue_full") == refused0 + 14


def test_a_request_waiting_for_slots_is_counted_and_keeps_newcomers_out(server, tmp_path, pool):
    """A 20-page PDF fills the six slots and waits for more: /metrics shows it waiting, and a new request is
    refused rather than queued behind it."""
    with server.held():
        long = pool.submit(server.convert, pdf(tmp_path, 20), {"priority": "bulk"})
        until(lambda: server.metric("ocrbatch_queue_waiting") == 1, "the PDF to wait for slots")
        assert server.metric("ocrbatch_queue_used") == 6
        assert server.convert(png("newcomer")).status_code == 503
    r = long.result()
    assert r.status_code == 200 and len(r.json()["pages"]) == 20
    assert server.metric("ocrbatch_queue_waiting") == 0 and server.metric("ocrbatch_queue_used") == 0


def test_client_file_names_are_made_safe_never_a_500_never_a_folder_left(server):
    names = {b"a\x00b.png": "ab.png", b"x" * 300 + b".png": "x" * 196 + ".png",
             b"../../etc/passwd": "passwd", b"..\\..\\evil.png": "evil.png", b"line\nbreak.png": "linebreak.png",
             "\u202egnp.exe".encode(): "gnp.exe", b"..": "upload", b"": "upload", b"   ": "upload",
             ("\u00e9" * 150 + ".png").encode(): "\u00e9" * 98 + ".png", b"\xff\xfe.png": "\u00ff\u00fe.png"}
    for raw, expected in names.items():
        body, ctype = multipart(raw, png("named"))
        r = httpx.post(server.url + "/v1/convert", content=body, timeout=60,
                       headers={**server.headers, "Content-Type": ctype})
        assert r.status_code == 200, (raw, r.status_code, r.text)
        assert r.json()["name"] == expected, raw
    until(lambda: server.uploads() == [], "the upload folders to be removed")


def test_the_safe_name_rules():
    from ocrbatch.serve.upload import MAX_NAME_BYTES, safe_name

    assert safe_name("scan.png") == "scan.png" and safe_name(None) == "upload"
    assert safe_name("C:\\Users\\me\\scan 1.pdf") == "scan 1.pdf"
    assert safe_name("bad\x00\x1b[31m\x7f\u200b.tif") == "bad[31m.tif"
    assert safe_name("\udcff.png") == ".png"
    long = safe_name("\u4e2d" * 100 + ".jpeg")  # 300 bytes of UTF-8: cut on a character, suffix kept
    assert long.endswith(".jpeg") and len(long.encode()) <= MAX_NAME_BYTES and "\ufffd" not in long
    assert len(safe_name("y" * 400 + "." + "z" * 40).encode()) == MAX_NAME_BYTES  # not a suffix: cut too


def test_a_client_that_disconnects_mid_upload_is_one_line_and_a_499(server):
    before = server.log.read_text()
    gone0 = server.metric("ocrbatch_http_requests_total", route="/v1/convert", status="499")
    sock = server.raw(head(1_000_000) + b"%PDF-1.4\n" + b"\0" * 5000)
    until(lambda: server.metric("ocrbatch_queue_used") == 1, "the request to be admitted")
    sock.close()
    until(lambda: server.metric("ocrbatch_http_requests_total", route="/v1/convert", status="499") == gone0 + 1,
          "the 499 to be counted")
    new = server.log.read_text()[len(before):]
    assert len(new.splitlines()) == 1 and "went away" in new and "Traceback" not in new, new
    until(lambda: server.uploads() == [] and server.metric("ocrbatch_queue_used") == 0, "the upload to be freed")


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    """A server with short header and body deadlines."""
    srv = Server(tmp_path_factory.mktemp("strict"), "--engine", "fake", "--header-timeout-s", "1",
                 "--body-timeout-s", "1")
    yield srv
    assert srv.stop() == 0


def test_slow_headers_and_silent_connections_are_cut_and_counted(strict):
    cut0 = strict.metric("ocrbatch_http_cut_total", reason="header_timeout")
    half = strict.raw(b"POST /v1/convert HTTP/1.1\r\nHost: x\r\nContent-Le")
    silent = strict.raw(b"")
    assert httpx.get(strict.url + "/healthz").status_code == 200  # meanwhile
    assert closed_by_server(half) == b"" and closed_by_server(silent) == b""
    until(lambda: strict.metric("ocrbatch_http_cut_total", reason="header_timeout") >= cut0 + 2, "two cuts")
    kept = httpx.Client()  # a kept-alive connection used again after its deadline would have passed
    assert kept.get(strict.url + "/healthz").status_code == 200
    assert kept.post(strict.url + "/v1/convert", content=png("slowly but surely")).status_code == 200
    kept.close()


def test_a_stalled_body_is_408_and_its_slot_and_upload_are_freed(strict):
    cut0 = strict.metric("ocrbatch_http_cut_total", reason="body_timeout")
    sock = strict.raw(head(100_000).replace(f"Authorization: Bearer {TOKEN}\r\n".encode(), b"") + b"\x89PNG" * 10)
    answer = closed_by_server(sock)
    assert answer.startswith(b"HTTP/1.1 408 ") and b"--body-timeout-s" in answer
    assert strict.metric("ocrbatch_http_cut_total", reason="body_timeout") == cut0 + 1
    assert strict.metric("ocrbatch_queue_used") == 0 and strict.uploads() == []
    assert "Traceback" not in strict.log.read_text()


@pytest.fixture(scope="module")
def roomy(tmp_path_factory):
    """A server taking large uploads, with few connections, started with a low soft open-file limit and a
    file size limit of 32 MB (its writes past it fail as on a full disk)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(soft, 256)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        resource.setrlimit(resource.RLIMIT_FSIZE, (32 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    srv = Server(tmp_path_factory.mktemp("roomy"), "--engine", "fake", "--max-upload-mb", "64",
                 "--max-connections", "4", "--header-timeout-s", "300", "--body-timeout-s", "300",
                 preexec_fn=limits)
    srv.hard_nofile = hard
    yield srv
    assert srv.stop() == 0


def test_an_upload_is_written_to_disk_as_it_arrives_and_removed_after(roomy):
    """The body goes to a file while it is still arriving (it is never held whole in memory), and the file
    is gone once the request is answered."""
    sock = roomy.raw(head(24 * 1024 * 1024))
    try:
        sock.sendall(b"\x01" * (20 * 1024 * 1024))  # 20 MB of 24, then a pause
        files = lambda: [p for p in roomy.uploads() if p.is_file()]  # noqa: E731
        until(lambda: any(p.stat().st_size >= 16 * 1024 * 1024 for p in files()), "16 MB on disk")
        sock.sendall(b"\x01" * (4 * 1024 * 1024))
        answer = response_on(sock)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 422 ") and b"not a PDF or image" in answer, answer[:300]
    until(lambda: roomy.uploads() == [], "the upload to be removed")


def test_an_upload_that_cannot_be_stored_is_503_with_one_line_and_nothing_left(roomy):
    before = roomy.log.read_text()
    r = httpx.post(roomy.url + "/v1/convert", content=b"\x02" * (40 << 20), timeout=120)
    assert r.status_code == 503 and "cannot store the upload" in r.json()["error"] and "Retry-After" in r.headers
    new = roomy.log.read_text()[len(before):]
    assert len(new.splitlines()) == 1 and "cannot store an upload" in new, new
    until(lambda: roomy.uploads() == [], "the partial upload to be removed")
    assert roomy.metric("ocrbatch_http_rejected_total", reason="storage") == 1


def test_past_max_connections_only_health_is_answered_and_the_open_file_limit_is_raised(roomy):
    """--max-connections 4: four idle connections, and only /healthz (and /readyz, /metrics) is answered on a
    fifth. Past 16 more, a new connection takes the place of the oldest one still without its headers, or,
    when every connection is past its headers, of the oldest one idle or still sending its body. The server never runs out of files: it
    raised its soft open-file limit (started at 256) to the hard one."""
    from ocrbatch.serve.guard import HEALTH_ROOM

    limits = Path(f"/proc/{roomy.proc.pid}/limits")
    if limits.exists():
        row = next(line for line in limits.read_text().splitlines() if line.startswith("Max open files"))
        assert row.split()[3] == str(roomy.hard_nofile)
    full = 4 + HEALTH_ROOM
    socks: list[socket.socket] = []
    try:
        socks += [roomy.raw(b"") for _ in range(4)]
        until(lambda: roomy.metric("ocrbatch_http_connections") >= 5, "four idle connections and this one")
        assert httpx.get(roomy.url + "/healthz").status_code == 200
        r = httpx.post(roomy.url + "/v1/convert", content=png("one too many"))
        assert r.status_code == 503 and "--max-connections" in r.json()["error"] and "Retry-After" in r.headers
        socks += [roomy.raw(b"") for _ in range(full - 5)]
        until(lambda: roomy.metric("ocrbatch_http_connections") >= full, "all but one of the room")
        socks.append(roomy.raw(b""))  # the room is full of connections without headers
        assert status(lambda: httpx.get(roomy.url + "/healthz")) == 200  # in the place of the oldest:
        assert closed_by_server(socks.pop(0)) == b""
        cut = roomy.metric("ocrbatch_http_cut_total", reason="connection_limit")
        assert cut >= 1
        for s in socks:
            s.close()
        socks = [roomy.raw(head(10_000)) for _ in range(4)]  # admitted, their bodies awaited
        until(lambda: roomy.metric("ocrbatch_http_requests_in_progress") == 4, "four uploads admitted")
        socks += [roomy.raw(head(10_000)) for _ in range(full - 4)]  # refused (503), their bodies not read
        assert all(b" 503 " in response_on(s).split(b"\r\n")[0] for s in socks[4:])
        # Every connection is past its headers now (four holding partial bodies, the refused ones kept alive
        # for a few seconds): a health check still gets in, in the place of the oldest of them (issue 27).
        assert status(lambda: httpx.get(roomy.url + "/healthz")) == 200
    finally:
        for s in socks:
            s.close()
    until(lambda: status(lambda: httpx.post(roomy.url + "/v1/convert", content=png("room again"))) == 200,
          "room again")  # once the server has seen the connections close
    assert roomy.metric("ocrbatch_http_cut_total", reason="connection_limit") >= cut + 1


def serve_exit(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / "tests" / "serve_main.py"), "serve", "--port", "0", *args],
                          capture_output=True, text=True, timeout=120, env=full)


def test_an_empty_token_is_a_usage_error_not_authentication_off():
    p = serve_exit("--engine", "fake", env={"OCRBATCH_TOKEN": ""})
    assert p.returncode == 2 and "OCRBATCH_TOKEN is set but empty" in p.stderr, p.stderr
    p = serve_exit("--engine", "fake", "--token", "")
    assert p.returncode == 2 and "--token" in p.stderr and "empty" in p.stderr, p.stderr


def test_a_configuration_the_engine_cannot_use_ends_the_server_at_start():
    p = serve_exit("--engine", "deepseek-ocr2")
    assert p.returncode == 2 and "needs --model" in p.stderr and "serving on" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr  # said before the server starts: no traceback of it
    p = serve_exit("--engine", "crash-on-load")
    assert p.returncode == 5 and "illegal memory access" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_drain_past_drain_s_ends_answers_with_503_and_streams_with_an_error_line(tmp_path, pool):
    """SIGTERM with --drain-s 1 while the engine holds its batch (the gate): the plain answer is 503, the
    stream ends with an error line, and the process exits 0 even though the engine never finishes."""
    import json

    srv = Server(tmp_path, "--engine", "gate", "--drain-s", "1", "--max-wait-ms", "20")
    try:
        with srv.held():
            plain = pool.submit(srv.convert, png("plain"))
            streamed = pool.submit(srv.convert, pdf(tmp_path, 3), None, {"Accept": "application/x-ndjson"})
            until(lambda: sum(srv.batches()) >= 1, "a batch to start")
            until(lambda: srv.metric("ocrbatch_pages_in_flight") == 4, "every page submitted")
            srv.proc.send_signal(signal.SIGTERM)
            r = plain.result()
            assert r.status_code == 503 and "--drain-s 1" in r.json()["error"]
            s = streamed.result()
            lines = [json.loads(line) for line in s.text.splitlines()]
            assert s.status_code == 200 and lines[-1]["done"] is False and "--drain-s 1" in lines[-1]["error"]
            assert srv.proc.wait(60) == 0  # the engine still stuck in its batch: the process does not wait
        log = srv.log.read_text()
        assert "Traceback" not in log and "CancelledError" not in log, log
        assert "did not finish its batch" in log
    finally:
        srv.stop()


def test_a_failing_engine_gives_every_page_exactly_one_failed_result_and_nothing_hangs(tmp_path):
    """crash-on-page raises for any batch holding a page of a file named "poison": concurrent requests,
    poisoned and clean, sharing batches, each get exactly one result per page, the clean pages ok."""
    import json

    srv = Server(tmp_path, "--engine", "crash-on-page", "--max-batch", "8", "--max-wait-ms", "50")
    try:
        jobs = {"poison.pdf": pdf(tmp_path, 3), "clean.pdf": pdf(tmp_path, 4), "poison.png": png("p"),
                **{f"clean{k}.png": png(f"c{k}") for k in range(4)}}
        with ThreadPoolExecutor(len(jobs) + 1) as ex:
            answers = {name: ex.submit(srv.convert, data, filename=name) for name, data in jobs.items()}
            streamed = ex.submit(lambda: httpx.post(srv.url + "/v1/convert", timeout=120,
                                                    headers={"Accept": "application/x-ndjson"},
                                                    files={"file": ("poison-stream.pdf", pdf(tmp_path, 5))}))
            answers = {name: f.result() for name, f in answers.items()}
            lines = [json.loads(line) for line in streamed.result().text.splitlines()]
        for name, r in answers.items():
            if name.endswith(".pdf"):
                pages = r.json()["pages"]
                assert [p["page"] for p in pages] == list(range(1, 1 + (3 if "poison" in name else 4)))
                statuses = {p["status"] for p in pages}
            else:
                statuses = {"failed" if r.status_code == 500 else r.json()["pages"][0]["status"]}
            assert statuses == ({"failed"} if "poison" in name else {"ok"}), (name, r.text)
            assert r.status_code == (500 if "poison" in name else 200), name
        assert "engine exploded" in answers["poison.png"].json()["error"]
        assert [x["page"] for x in lines[:-1]] == [1, 2, 3, 4, 5] and {x["status"] for x in lines[:-1]} == {"failed"}
        assert lines[-1] == {"done": True, "name": "poison-stream.pdf", "pages": 5, "failed": 5}
        assert srv.metric("ocrbatch_queue_used") == 0 and srv.metric("ocrbatch_pages_in_flight") == 0
    finally:
        assert srv.stop() == 0


# -- the slot policy itself (limits.py): pure bookkeeping, driven step by step ---------------------------

def _steps(coro_fn):
    """Run `coro_fn(tick)` on a fresh loop; `await tick()` lets every ready task run."""
    import asyncio

    async def tick():
        for _ in range(5):
            await asyncio.sleep(0)

    return asyncio.run(coro_fn(tick))


def test_admission_takes_a_slot_in_one_step_and_a_ticket_keeps_one_while_open():
    from ocrbatch.serve.limits import PageSlots

    slots = PageSlots(2)
    a, b = slots.admit(), slots.admit()
    assert a and b and slots.admit() is None and slots.used == 2
    assert a.try_take() and not a.try_take()  # its own slot; none free beyond
    a.give(1)  # its page done, more to come: the ticket keeps the slot
    assert slots.used == 2 and slots.admit() is None
    a.close()
    assert slots.used == 1 and slots.admit() is not None


def test_a_waiting_request_gets_its_own_slot_back_when_its_last_page_ends_no_deadlock():
    import asyncio

    from ocrbatch.serve.limits import PageSlots

    async def scenario(tick):
        slots = PageSlots(2)
        a, b = slots.admit(), slots.admit()
        assert a.try_take() and b.try_take()
        wanting = asyncio.ensure_future(a.take())  # a second page of a: no slot free
        await tick()
        assert not wanting.done() and slots.waiting == 1 and slots.admit() is None
        b.give(1)  # b's page ends; b keeps its slot for its next page
        await tick()
        assert not wanting.done()
        a.give(1)  # a's own page ends: its kept slot serves its waiting page
        await tick()
        assert wanting.done() and slots.waiting == 0 and (a.held, a.busy) == (1, 1)
        b.close()  # b is done: its kept slot is free
        a.close()  # a has nothing left to submit: it holds only its running page's slot
        assert slots.used == 1
        a.give(1)
        assert slots.used == 0
    _steps(scenario)


def test_freed_slots_go_to_the_longest_waiting_request_and_a_cancelled_wait_leaves_no_trace():
    import asyncio

    from ocrbatch.serve.limits import PageSlots

    async def scenario(tick):
        slots = PageSlots(3)
        a, b, c = slots.admit(), slots.admit(), slots.admit()
        for t in (a, b, c):
            assert t.try_take()
        first, second = asyncio.ensure_future(b.take()), asyncio.ensure_future(c.take())
        await tick()
        assert slots.waiting == 2
        a.close()
        a.give(1)  # a is done: its slot goes to b, which waited first
        await tick()
        assert first.done() and not second.done() and slots.used == 3
        second.cancel()
        await tick()
        assert slots.waiting == 0 and (c.held, c.busy) == (1, 1)
        for t in (b, c):
            t.close()
            t.give(t.busy)
        assert slots.used == 0
    _steps(scenario)


def test_an_engine_stuck_on_every_device_fails_its_pages_and_stops_the_server_with_exit_8(tmp_path, pool):
    """The gate never opens: after --stall-timeout the page in the stuck batch fails as stalled (500), the
    request queued behind it is answered 503 rather than left waiting, and the server stops with exit 8 (to
    be restarted) although the engine is still stuck."""
    srv = Server(tmp_path, "--engine", "gate", "--stall-timeout", "3", "--max-wait-ms", "20")
    try:
        with srv.held():
            first = pool.submit(srv.convert, png("stuck"))
            until(lambda: srv.batches() == [1], "its batch to start")
            behind = pool.submit(srv.convert, png("behind it"))
            until(lambda: srv.metric("ocrbatch_http_requests_in_progress") == 2, "the second request admitted")
            r = first.result()
            assert r.status_code == 500 and "stalled" in r.json()["error"], r.text
            r = behind.result()
            assert r.status_code == 503 and "stuck on cpu" in r.json()["error"], r.text
            assert srv.proc.wait(60) == 8
        log = srv.log.read_text()
        assert "stuck on cpu" in log and "Traceback" not in log, log
    finally:
        srv.stop()


def test_an_engine_that_reports_its_kv_cache_has_it_in_metrics():
    """vLLM's KV-cache usage (per device, 0..1) is a gauge beside the queue's; engines without one show none."""
    from types import SimpleNamespace

    from ocrbatch.serve.metrics import ServerMetrics

    def stats(workers):
        return lambda: {"loaded": True, "queued": {"interactive": 0, "bulk": 0}, "in_flight": 0, "batches": 2,
                        "pages": 4, "mean_batch": 2.0, "workers": workers}

    slots, guard = SimpleNamespace(used=0, capacity=8, waiting=0), SimpleNamespace(open=1, limit=100)
    vllm = ServerMetrics(stats([{"device": "cuda:0", "kv_cache_pct": 37.5}]), slots, guard, lambda: 0)
    families = {f.name: f for f in text_string_to_metric_families(vllm.render().decode())}
    (sample,) = families["ocrbatch_kv_cache_usage_ratio"].samples
    assert sample.labels == {"device": "cuda:0"} and sample.value == 0.375
    plain = ServerMetrics(stats([{"device": "cpu", "kv_cache_pct": None}]), slots, guard, lambda: 0)
    assert "ocrbatch_kv_cache_usage_ratio" not in plain.render().decode()


# -- a server that runs for months (issue 27) ---------------------------------------------------------------

def test_a_slot_freed_as_its_waiting_request_is_cancelled_goes_on_to_others():
    """A request waiting for a slot is cancelled (its client left) and, before its task runs again, a slot is
    freed: the slot must not be counted for the request that left (it would be held for good)."""
    import asyncio

    from ocrbatch.serve.limits import PageSlots

    async def scenario(tick):
        slots = PageSlots(2)
        a, b = slots.admit(), slots.admit()
        assert a.try_take() and b.try_take()
        wanting = asyncio.ensure_future(a.take())
        await tick()
        assert slots.waiting == 1
        wanting.cancel()  # the client left; its task has not run since
        b.close()
        b.give(1)  # b's page ends: its slot is freed at this very moment
        await tick()
        assert wanting.cancelled()
        a.close()
        a.give(a.busy)  # a's running page ends too
        assert slots.used == 0 and slots.waiting == 0 and slots.admit() is not None
    _steps(scenario)


def test_clients_leaving_mid_stream_leave_no_slot_and_no_page_in_flight(tmp_path):
    """--max-queue 2 --max-batch 1: streamed and whole requests of several pages whose clients leave after a
    line, or before any, many times over; once all have ended, no slot is held and no page is in flight."""
    from test_layout_textlayer import article_page, write_pdf

    srv = Server(tmp_path / "srv", "--engine", "fake", "--max-queue", "2", "--max-batch", "1", "--max-wait-ms", "0")
    try:
        scanned = pdf(tmp_path, 5)
        texty = write_pdf(tmp_path / "text.pdf", [article_page()] * 5).read_bytes()  # answered by decode threads
        for i in range(24):
            body = texty if i % 2 else scanned
            accept = "application/x-ndjson" if i % 3 else "application/json"
            sock = srv.raw(head(len(body), accept=accept).replace(f"Authorization: Bearer {TOKEN}\r\n".encode(),
                                                                   b"") + body)
            if i % 4:
                sock.settimeout(60)
                sock.recv(200)  # an answer's first bytes (a 503 when the slots are taken: fine too)
            sock.close()
        until(lambda: srv.metric("ocrbatch_http_requests_in_progress") == 0, "every request to end")
        until(lambda: srv.metric("ocrbatch_queue_used") == 0 and srv.metric("ocrbatch_pages_in_flight") == 0,
              "every slot and page to be released")
        ok = srv.convert(png("still serving"))
        assert ok.status_code == 200
    finally:
        assert srv.stop() == 0


def test_a_trickled_body_is_cut_at_the_whole_bodys_deadline(strict):
    """A byte every half second never pauses for --body-timeout-s (1 s here), yet the whole body is far
    slower than the minimum rate: it is cut (408) and its slot freed, not held for hours."""
    sock = strict.raw(head(100_000).replace(f"Authorization: Bearer {TOKEN}\r\n".encode(), b"") + b"%PDF")
    sock.settimeout(0.5)
    answer = b""
    for _ in range(240):  # two minutes at most: the bound of the test, not a timing assertion
        try:
            sock.sendall(b"\0")
            answer += sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if answer:
            break
    else:  # still trickling after two minutes: the server never cut it (its end is a pause, cut as one)
        pytest.fail("a body trickled in for two minutes and was never cut")
    try:  # the rest of the answer, up to the server's close
        sock.settimeout(60)
        while chunk := sock.recv(65536):
            answer += chunk
    except OSError:
        pass
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"--body-timeout-s" in answer, answer[:200]
    until(lambda: strict.metric("ocrbatch_queue_used") == 0, "its slot to be freed")


def test_settings_a_server_cannot_use_are_refused_at_start():
    from ocrbatch import config
    from ocrbatch.errors import UsageError
    from ocrbatch.serve.config import ServeConfig

    p = serve_exit("--engine", "fake", "--max-upload-mb", "inf")
    assert p.returncode == 2 and "--max-upload-mb" in p.stderr and "serving on" not in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    for given in ({"max_upload_mb": 1e308}, {"max_upload_mb": float("nan")}, {"host": ""}, {"host": " "}):
        # in-process: a server never listens on every interface, even when the check is broken on purpose
        with pytest.raises(UsageError, match=next(iter(given)).replace("_", "-")):
            config.settle(config.SERVE, given)
        with pytest.raises(UsageError):
            ServeConfig(**given)


def test_drain_s_nan_inf_or_negative_is_refused_with_one_line():
    """Issue 39: `--drain-s nan` was accepted (nan passes every comparison) and inf is no deadline: each is a
    usage error naming the flag, in the one-line style, from the flag and from its variable."""
    from ocrbatch import config
    from ocrbatch.errors import UsageError

    for value in ("nan", "inf", "-1"):
        p = serve_exit("--engine", "fake", "--drain-s", value)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("ocrbatch: error: --drain-s "), p.stderr
        assert "serving on" not in p.stderr and "Traceback" not in p.stderr
    p = serve_exit("--engine", "fake", env={"OCRBATCH_DRAIN_S": "NaN"})
    assert p.returncode == 2 and "OCRBATCH_DRAIN_S='NaN': must be a finite number" in p.stderr, p.stderr
    for bad in (float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--drain-s .*finite"):
            config.settle(config.SERVE, {"drain_s": bad})


def test_accept_is_read_by_the_http_rules(server):
    md = {"Accept": "text/markdown"}
    assert server.convert(png("x"), headers={"Accept": "TEXT/MARKDOWN"}).headers["content-type"].startswith(MD)
    assert server.convert(png("x"), headers=md).headers["content-type"].startswith(MD)
    r = server.convert(png("x"), headers={"Accept": "application/x-ndjson;q=0, application/json"})
    assert r.headers["content-type"] == "application/json" and r.json()["pages"][0]["status"] == "ok"
    r = server.convert(png("x"), headers={"Accept": "text/markdown;q=0.5, application/json;q=0.9"})
    assert r.headers["content-type"] == "application/json"
    assert server.convert(png("x"), headers={"Accept": "text/markdown;q=0"}).status_code == 406
    assert server.convert(png("x"), headers={"Accept": "image/png"}).status_code == 406
    r = server.convert(png("x"), params={"format": "xml"})
    assert r.status_code == 400 and "format" in r.json()["error"]
    assert server.convert(png("x"), headers={"Accept": "*/*"}).headers["content-type"] == "application/json"


def test_a_non_ascii_token_matches_what_curl_sends(tmp_path):
    token = "pässwörd-✓"
    srv = Server(tmp_path / "tok", "--engine", "fake", token=token)
    try:
        right = {"Authorization": b"Bearer " + token.encode("utf-8")}  # curl sends the bytes it was given
        assert httpx.post(srv.url + "/v1/convert", content=png("x"), headers=right, timeout=60).status_code == 200
        wrong = {"Authorization": b"Bearer " + "passwörd-✓".encode("utf-8")}
        assert httpx.post(srv.url + "/v1/convert", content=png("x"), headers=wrong, timeout=60).status_code == 401
    finally:
        assert srv.stop() == 0


def test_a_submit_that_ends_after_its_client_left_gives_back_every_slot_it_took():
    """The client leaves while its pages' submit runs on a thread, and the upload is removed under that
    submit: it returns one failed result for a chunk of two pages. Both slots the chunk took come back."""
    import asyncio
    import threading
    from concurrent.futures import Future

    from ocrbatch.serve.limits import PageSlots
    from ocrbatch.serve.pages import convert_pages

    under_way, release = threading.Event(), threading.Event()

    class Conv:
        def submit(self, path, priority, pages, name):
            under_way.set()
            release.wait(60)
            future: Future = Future()
            future.set_result(None)  # the file was gone: one result for the whole chunk
            return future

        def cancel(self, futures):
            return sum(f.cancel() for f in futures)

    async def scenario() -> int:
        slots = PageSlots(4)
        ticket = slots.admit()
        pages = convert_pages(Conv(), ticket, Path("gone.pdf"), "gone.pdf", [1, 2, 3], "interactive", 2,
                              lambda n: None)
        step = asyncio.ensure_future(anext(pages))
        while not under_way.is_set():
            await asyncio.sleep(0.01)
        assert slots.used == 2  # the request's slot and one more: a chunk of two pages
        step.cancel()  # the client left
        await asyncio.gather(step, return_exceptions=True)
        release.set()
        for _ in range(3000):  # bounded: the late submit's callback comes on the loop
            if slots.used == 0:
                break
            await asyncio.sleep(0.01)
        return slots.used

    assert asyncio.run(scenario()) == 0


class _Pages:
    """A Converter as convert_pages sees it: submit() returns one future per page asked for, finished at once
    (`done`: pages finish faster than a submit) or left for the test; it remembers what was submitted and
    cancelled."""

    def __init__(self, done: bool) -> None:
        import threading

        self.done, self.lock = done, threading.Lock()
        self.submitted: list[int] = []
        self.futures: list = []
        self.cancelled = 0

    def submit(self, path, priority, pages, name):
        from concurrent.futures import Future

        from ocrbatch.records import PageResult, Status

        out = []
        for p in map(int, pages.split(",")):
            f: Future = Future()
            if self.done:
                f.set_result(PageResult(ref=None, status=Status.OK, markdown=f"page {p}"))
            out.append(f)
        with self.lock:
            self.submitted += map(int, pages.split(","))
            self.futures += out
        return out

    def cancel(self, futures):
        n = sum(f.cancel() for f in futures)
        self.cancelled += n
        return n


def test_a_long_requests_results_come_between_its_submits_not_after_the_last():
    """Issue 39 B8: pages that finish faster than a submit (a 3,000-frame TIFF) were held back until the last
    page was submitted (page 1, then nothing for 40 s). Here every page is done when its submit returns and
    the slots let a submit take 3 pages of a window of 4: the first result comes after one submit, before the
    last page is submitted; then every page comes once, in order, and every slot is back."""
    import asyncio

    from ocrbatch.serve.limits import PageSlots
    from ocrbatch.serve.pages import convert_pages

    conv = _Pages(done=True)

    async def scenario():
        slots = PageSlots(3)
        pages = convert_pages(conv, slots.admit(), Path("long.tif"), "long.tif", list(range(1, 31)), "bulk", 4,
                              lambda n: None)
        page, result = await anext(pages)
        first_seen = list(conv.submitted)
        rest = [p async for p, _ in pages]
        return page, result, first_seen, rest, slots.used

    page, result, first_seen, rest, used = asyncio.run(scenario())
    assert page == 1 and result.markdown == "page 1"
    assert 30 not in first_seen and len(first_seen) <= 4, first_seen  # one submit's pages, not the whole request
    assert [1, *rest] == list(range(1, 31)) and used == 0


def test_a_client_leaving_mid_stream_frees_its_pages_within_one_window():
    """Issue 39 B8: the stream closed after its first results (the client gone): the request's pages not
    finished are cancelled at once, at most a window of them had been submitted past what was sent, and every
    slot is back. Counted, not timed."""
    import asyncio

    from ocrbatch.serve.limits import PageSlots
    from ocrbatch.serve.pages import convert_pages

    conv = _Pages(done=False)
    window = 4

    async def scenario():
        slots = PageSlots(8)
        pages = convert_pages(conv, slots.admit(), Path("long.tif"), "long.tif", list(range(1, 1001)), "bulk",
                              window, lambda n: None)
        step = asyncio.ensure_future(anext(pages))
        for _ in range(200):  # bounded: the first submit lands on the loop
            await asyncio.sleep(0.01)
            if conv.futures:
                break
        conv.futures[0].set_result("page 1")  # page 1 finishes
        got = [await step]
        await pages.aclose()  # the client left
        for _ in range(5):  # the cancelled pages' slots come back on the loop
            await asyncio.sleep(0)
        return got, slots.used

    got, used = asyncio.run(scenario())
    assert [p for p, _ in got] == [1] and used == 0
    assert len(conv.submitted) <= 1 + window, conv.submitted  # what was sent, and at most a window beyond
    assert conv.cancelled == len(conv.submitted) - 1 and all(f.done() for f in conv.futures)


def test_a_stream_whose_last_page_comes_as_its_client_leaves_leaves_no_unretrieved_task_error():
    """Issue 39 (the soak's log): the pages ran out (StopAsyncIteration) in the same turn as the client left;
    that end was never looked at, and asyncio logged "Task exception was never retrieved" for it."""
    import asyncio
    import gc
    from types import SimpleNamespace

    from ocrbatch.serve.answer import Job

    class Metric:
        def labels(self, *a):
            return self

        def inc(self, *a):
            pass

        observe = inc

    async def nothing():
        return
        yield  # an async generator with no pages left

    async def receive():
        return {"type": "http.disconnect"}

    async def scenario():
        errors: list[str] = []
        asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: errors.append(ctx["message"]))
        state = SimpleNamespace(drained=asyncio.Event(), metrics=SimpleNamespace(pages=Metric(), requests=Metric(),
                                latency=Metric(), page_batch=Metric()), active=1, drain_message=lambda: "")
        upload = SimpleNamespace(name="x.pdf", remove=lambda: None)
        job = Job(state, SimpleNamespace(receive=receive), nothing(), SimpleNamespace(close=lambda: None), upload,
                  True, "interactive", 0.0)
        lines = [line async for line in job.ndjson()]
        gc.collect()
        await asyncio.sleep(0)
        return lines, errors, state.active

    lines, errors, active = asyncio.run(scenario())
    assert active == 0 and not any("never retrieved" in e for e in errors), errors


def test_a_client_that_stops_reading_a_stream_is_taken_as_gone_after_the_stall_bound(tmp_path):
    """Issue 39: a client that can no longer say it left (a peer dead without closing) stops taking bytes; its
    stream stalls at the first line the buffers cannot hold. After SEND_STALL_S (1 s here) without room the
    stream ends, its pages are cancelled and its slots freed, with one line in the log and no traceback."""
    srv = Server(tmp_path / "srv", "--engine", "big-pages", "--max-queue", "4", "--max-batch", "2",
                 "--max-wait-ms", "0", env={"OCRBATCH_TEST_SEND_STALL_S": "1"})
    try:
        body = pdf(tmp_path, 40)  # 40 pages of 256 KB of Markdown each: 10 MB, more than the buffers hold
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((srv.host, srv.port))
        sock.sendall(head(len(body), accept="application/x-ndjson").replace(
            f"Authorization: Bearer {TOKEN}\r\n".encode(), b"") + body)  # and never read
        until(lambda: srv.metric("ocrbatch_http_requests_total", route="/v1/convert", status="499") >= 1,
              "the stalled stream to be ended", 120)
        until(lambda: srv.metric("ocrbatch_queue_used") == 0 and srv.metric("ocrbatch_pages_in_flight") == 0,
              "its slots and pages to be freed")
        log = srv.log.read_text()
        assert "the client took no bytes for 1 s; taken as gone (499)" in log and "Traceback" not in log, log
        assert "without completing response" not in log, log  # dropped as a client gone, not left to close
        assert srv.metric("ocrbatch_engine_pages_total") < 40  # it stopped short of converting every page
        sock.close()
        assert srv.convert(png("still serving")).status_code == 200
    finally:
        assert srv.stop() == 0
