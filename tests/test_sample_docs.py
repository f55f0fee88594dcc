"""The `make run` promise: the embedded engine converts every page of sample_docs/, offline."""

from pathlib import Path

from conftest import ROOT, manifest, run_cli


def test_embedded_engine_converts_every_sample_page(tmp_path):
    out = tmp_path / "out"
    r = run_cli("convert", str(ROOT / "sample_docs"), "-o", str(out), env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.md"))
    assert written == ["article-two-column.md", "invoice.md", "letter-scan.md", "report/page-0001.md",
                       "report/page-0002.md", "report/page-0003.md", "table.md"]
    assert {rec["status"] for rec in manifest(out)} == {"ok"}
    invoice = (out / "invoice.md").read_text()
    for words in ("INVOICE", "Northwind Paper Supplies", "323.40"):
        assert words in invoice
    page2 = (out / "report" / "page-0002.md").read_text()
    assert "Methods" in page2 and "Page 2 of 3" not in page2  # the page foot is furniture, left out
    assert "slight tilt" in (out / "letter-scan.md").read_text()


def test_sample_docs_stay_small():
    total = sum(p.stat().st_size for p in Path(ROOT / "sample_docs").iterdir())
    assert total < 2_000_000
