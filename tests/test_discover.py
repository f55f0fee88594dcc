"""Which files a run finds, and where their Markdown goes."""

import os
from pathlib import Path

import pytest

from conftest import draw_page, manifest, run_cli, save_pdf
from ocrbatch.config import PageSelection
from ocrbatch.errors import UsageError


def outputs(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*.md"))


def test_folders_mirror_into_output_one_file_per_page(tmp_path):
    docs = tmp_path / "docs"
    (docs / "receipts").mkdir(parents=True)
    draw_page("a receipt").save(docs / "receipts" / "r1.png")
    save_pdf(docs / "contracts" / "lease.pdf", [draw_page(f"page {i}") for i in range(3)])
    frames = [draw_page(f"frame {i}") for i in range(2)]
    frames[0].save(docs / "fax.tiff", save_all=True, append_images=frames[1:])
    draw_page("single frame").save(docs / "single.tif")
    out = tmp_path / "md"
    r = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert outputs(out) == ["contracts/lease/page-0001.md", "contracts/lease/page-0002.md",
                            "contracts/lease/page-0003.md", "fax/page-0001.md", "fax/page-0002.md",
                            "receipts/r1.md", "single.md"]


def test_kind_comes_from_content_not_name(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    draw_page("png without extension").save(docs / "scan-0001", format="PNG")
    draw_page("jpeg named png").save(docs / "photo.png", format="JPEG")
    (docs / "notes.txt").write_text("just notes, not a document\n")
    (docs / "fake.pdf").write_text("this is text, not a PDF\n")
    out = tmp_path / "md"
    r = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake")
    assert r.returncode == 3, r.stderr  # partial: fake.pdf failed
    assert outputs(out) == ["photo.md", "scan-0001.md"]
    failed = [rec for rec in manifest(out) if rec["status"] == "failed"]
    assert [Path(rec["source"]).name for rec in failed] == ["fake.pdf"]
    assert "fake.pdf" in r.stderr and "plain text" in r.stderr
    assert "notes.txt" not in r.stderr


def test_hidden_entries_symlink_loops_and_the_output_folder_are_skipped(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / ".cache").mkdir()
    draw_page("visible").save(docs / "sub" / "a.png")
    draw_page("hidden").save(docs / ".cache" / "b.png")
    os.symlink(docs, docs / "sub" / "loop")
    out = docs / "md"  # output inside the input folder
    for _ in range(2):  # the second run must not pick up the first run's output
        r = run_cli("convert", str(docs), "-o", str(out), "--engine", "fake")
        assert r.returncode == 0, r.stderr
    assert outputs(out) == ["sub/a.md"]
    assert len(manifest(out)) == 1


def test_stdin_list_mirrors_paths_below_the_current_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    draw_page("one").save(tmp_path / "a" / "x.png")
    draw_page("two").save(tmp_path / "b" / "x.png")
    listing = "./a/x.png\n./b/x.png\n"
    r = run_cli("convert", "-", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=listing)
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "md") == ["a/x.md", "b/x.md"]


def test_stdin_nul_separated_list_like_find_print0(tmp_path):
    draw_page("odd").save(tmp_path / "odd name\nwith newline.png", format="PNG")
    draw_page("plain").save(tmp_path / "plain.png")
    listing = b"./odd name\nwith newline.png\0./plain.png\0"
    r = run_cli("convert", "-", "-0", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=listing)
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "md") == ["odd name\nwith newline.md", "plain.md"]


def test_inputs_that_map_to_the_same_output_are_told_apart(tmp_path):
    draw_page("the png").save(tmp_path / "report.png")
    draw_page("the jpeg").save(tmp_path / "report.jpg")
    save_pdf(tmp_path / "report.pdf", [draw_page("the pdf")])
    out = tmp_path / "md"
    r = run_cli("convert", str(tmp_path / "report.jpg"), str(tmp_path / "report.png"),
                str(tmp_path / "report.pdf"), "-o", str(out), "--engine", "fake")
    assert r.returncode == 0, r.stderr
    assert outputs(out) == ["report.md", "report.pdf/page-0001.md", "report.png.md"]
    assert r.stderr.count("same output name") == 2
    sources = {Path(rec["source"]).name: rec["output"] for rec in manifest(out)}
    assert sources == {"report.jpg": "report.md", "report.png": "report.png.md",
                       "report.pdf": "report.pdf/page-0001.md"}


def test_page_selection(tmp_path):
    save_pdf(tmp_path / "long.pdf", [draw_page(f"page {i}") for i in range(1, 9)])
    out = tmp_path / "md"
    r = run_cli("convert", str(tmp_path / "long.pdf"), "-o", str(out), "--engine", "fake", "--pages", "1-2,5,7-")
    assert r.returncode == 0, r.stderr
    assert outputs(out) == [f"long/page-000{i}.md" for i in (1, 2, 5, 7, 8)]
    assert "page 5" in (out / "long/page-0005.md").read_text()


@pytest.mark.parametrize("text", ["0", "3-1", "a-b", "1,,2"])
def test_bad_page_selection_is_a_usage_error(text):
    with pytest.raises(UsageError):
        PageSelection.parse(text)


def test_page_selection_past_the_end_is_clipped():
    assert PageSelection.parse("2-4,9-").select(5) == [2, 3, 4]


def test_a_page_selection_that_names_none_of_a_files_pages_says_so_per_file(tmp_path):
    save_pdf(tmp_path / "ten.pdf", [draw_page(f"page {i}") for i in range(1, 11)])
    out = tmp_path / "md"
    r = run_cli("convert", str(tmp_path / "ten.pdf"), "-o", str(out), "--engine", "fake", "--pages", "15")
    assert r.returncode == 3, r.stderr
    (line,) = [line for line in r.stderr.splitlines() if "ten.pdf" in line]
    assert "--pages 15 selects none of its 10 pages" in line
    assert [(rec["page"], rec["status"]) for rec in manifest(out)] == [(None, "failed")]

    images = tmp_path / "images"
    images.mkdir()
    draw_page("one").save(images / "one.png")
    draw_page("two").save(images / "two.png")
    save_pdf(images / "three.pdf", [draw_page(f"page {i}") for i in range(1, 4)])
    r = run_cli("convert", str(images), "-o", str(tmp_path / "md2"), "--engine", "fake", "--pages", "2-3")
    assert r.returncode == 3, r.stderr
    assert outputs(tmp_path / "md2") == ["three/page-0002.md", "three/page-0003.md"]
    for name in ("one.png", "two.png"):
        (line,) = [line for line in r.stderr.splitlines() if name in line]
        assert line.endswith(f"{name}: --pages 2-3 selects none of its 1 page")


STYLES = ("folder", "relative", "absolute", "stdin", "symlink")


def _convert_in_style(style: str, home: Path) -> tuple[list[str], str | None]:
    """The arguments (and stdin) that name docs/sub/report.pdf the way `style` does, run from `home`."""
    return {"folder": (["docs"], None), "relative": (["docs/sub/report.pdf"], None),
            "absolute": ([str(home / "docs" / "sub" / "report.pdf")], None),
            "stdin": (["-"], "docs/sub/report.pdf\n"), "symlink": (["link.pdf"], None)}[style]


@pytest.mark.parametrize("first,second", [(a, b) for a in STYLES for b in STYLES if a != b])
def test_one_source_has_one_output_however_it_is_named(tmp_path, first, second):
    """A walk, a relative or absolute path, a stdin list, a symlink: one file, one output and one record per page;
    a second run that names it another way skips it (the name an output was first written under stays)."""
    save_pdf(tmp_path / "docs" / "sub" / "report.pdf", [draw_page(f"page {i}") for i in range(3)])
    os.symlink(tmp_path / "docs" / "sub" / "report.pdf", tmp_path / "link.pdf")
    args, stdin = _convert_in_style(first, tmp_path)
    r = run_cli("convert", *args, "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=stdin)
    assert r.returncode == 0, r.stderr
    written = outputs(tmp_path / "md")
    assert len(written) == 3
    args, stdin = _convert_in_style(second, tmp_path)
    r = run_cli("convert", *args, "-o", "md", "--engine", "fake", "--json", cwd=tmp_path, stdin=stdin)
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "md") == written
    assert [(rec["output"], rec["status"]) for rec in manifest(tmp_path / "md")] == [(w, "skipped") for w in written]
    assert "same output name" not in r.stderr  # nothing else maps there: no rename to warn of


# -- stdin: a list of paths, or one document ----------------------------------------------------------------

def test_a_pdf_on_stdin_is_one_document_named_stdin(tmp_path):
    pdf = save_pdf(tmp_path / "scan.pdf", [draw_page(f"page {i}") for i in range(2)]).read_bytes()
    r = run_cli("convert", "-", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=pdf)
    assert r.returncode == 0, r.stderr
    assert outputs(tmp_path / "md") == ["stdin/page-0001.md", "stdin/page-0002.md"]
    assert [rec["status"] for rec in manifest(tmp_path / "md")] == ["ok", "ok"]
    assert sorted(os.listdir(tmp_path / "md")) == ["manifest.jsonl", "stdin"]  # the spooled copy went with the run
    again = run_cli("convert", "-", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=pdf)
    assert again.returncode == 0 and outputs(tmp_path / "md") == ["stdin/page-0001.md", "stdin/page-0002.md"]


def test_a_png_on_stdin_is_one_document_also_to_stdout(tmp_path):
    buf = tmp_path / "scan.png"
    draw_page("a scan piped in").save(buf)
    r = run_cli("convert", "-", "-o", "-", "--engine", "fake", cwd=tmp_path, stdin=buf.read_bytes())
    assert r.returncode == 0, r.stderr.decode()
    assert b"stdin" in r.stdout and b"no such file" not in r.stderr
    r = run_cli("convert", "-", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=buf.read_bytes())
    assert r.returncode == 0 and outputs(tmp_path / "md") == ["stdin.md"]


@pytest.mark.parametrize("data", [bytes(range(256)) * 40, b"good.png\n" + b"\x00\x01\x02garbage\n" * 300],
                         ids=["binary", "a-list-then-binary"])
def test_binary_on_stdin_that_is_no_document_is_one_line_and_exit_2(tmp_path, data):
    draw_page("listed").save(tmp_path / "good.png")
    r = run_cli("convert", "-", "-o", "md", "--engine", "fake", cwd=tmp_path, stdin=data)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert len(err.splitlines()) == 1 and "stdin" in err and "binary" in err, err
    assert not (tmp_path / "md").exists() or outputs(tmp_path / "md") == []
