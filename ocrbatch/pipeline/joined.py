"""A document's pages as one Markdown text, for `convert --join` (OUT/…/NAME.md), `convert -o -` (stdout) and
serve's `text/markdown` answer, with the same separators:

    <!-- page 1 -->

    page 1's Markdown

    <!-- page 2 -->

    page 2's Markdown

A page that failed is `<!-- page 3: failed: why -->`. On stdout, when the run has several documents, each
starts with `<!-- document: scans/report.pdf -->`.
"""

from __future__ import annotations

from typing import Iterable


def page_part(page: int, markdown: str | None, failure: str | None = None, separated: bool = True) -> str:
    """One page's part: its separator (when `separated`, i.e. the document has pages) and its Markdown."""
    if markdown is None:
        return f"<!-- page {page}: failed: {comment(failure or 'failed')} -->\n"
    body = markdown if markdown.endswith("\n") or not markdown else markdown + "\n"
    return (f"<!-- page {page} -->\n\n" if separated else "") + body


def document(parts: Iterable[tuple[int, str | None, str | None]], separated: bool = True) -> str:
    """The pages (page, Markdown or None, failure or None), in order, joined."""
    return "\n".join(page_part(page, md, why, separated) for page, md, why in parts)


def document_header(name: str) -> str:
    return f"<!-- document: {comment(name)} -->\n\n"


def comment(text: str) -> str:
    """Text safe inside an HTML comment, on one line."""
    return " ".join(text.replace("--", "- -").split())
