"""Output keys: where each source's Markdown goes (`OUT/KEY.md`, or `OUT/KEY/page-0001.md` ...).

A source's key is its path relative to its input root, less the extension (`a/report.png` → `a/report`).
Two sources that would write the same file are told apart (`report.png.md`, then `report-2.md` ...); so is one
whose name an earlier run's record holds (the manifest, a NameBook): a name stays with the source it was
first written for, and a source gets back the key it had, however it is named this time (found in a walk of
another folder, listed on stdin relative to another folder, reached through a symlink: a source is its resolved
path, and its key follows it). Names are compared case-insensitively, since
some file systems are. A key whose file names would be over the file system's limit is shortened
(records.fit_key: engines name their figure files with it too): cut, with a hash of the whole.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Iterator, NamedTuple, Protocol

from ..errors import DecodeError
from ..manifest import NAME as MANIFEST_NAME, output_stem
from ..records import NAME_MAX, PAGE_DIGITS, fit_key, page_digits, page_output
from .lock import NAME as LOCK_NAME

__all__ = ["NAME_MAX", "Claim", "KeyClaims", "NameBook", "composed", "fit_key", "name_max", "natural_key"]

# Names of the output folder's own files, as output_names spells a key's: no input's key may take them (an
# input named manifest.jsonl.pdf would need a folder where the manifest is).
RESERVED = frozenset({f"stem:{MANIFEST_NAME}", f"stem:{LOCK_NAME}"})
_FOUR_DIGITS = re.compile(r"/page-\d{4}\.md$")  # a page file of an earlier run, numbered 4 digits wide
MAX_SUFFIX = 1000  # report-2 ... report-999: then the source fails ("too many inputs map to the same name")


class Claim(NamedTuple):
    """A source's output key; `full_key`: the key it was shortened from (None: it was not); `kept`: an earlier
    run gave it this key when it was named another way (not a rename to tell of)."""

    key: PurePosixPath
    full_key: PurePosixPath | None
    kept: bool = False


class NameBook(Protocol):
    """Output names earlier runs gave (the manifest), as output_names spells them (casefolded)."""

    def held(self, source: str) -> set[str]: ...  # the output files the records of `source` name, as written

    def holder(self, name: str) -> str | None: ...  # the source whose record holds `name`


def name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system of `folder` takes."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, AttributeError):
        return NAME_MAX


def composed(rel: PurePosixPath) -> PurePosixPath:
    """`rel` in Unicode's composed form (NFC), as output keys are."""
    return PurePosixPath(unicodedata.normalize("NFC", rel.as_posix()))


def natural_key(rel: PurePosixPath) -> PurePosixPath:
    """The key a source gets when nothing stands in its way: its relative path less the extension."""
    return rel.with_suffix("") if rel.suffix else rel


class KeyClaims:
    """Keys taken so far in this run, and those `book` says earlier runs gave; one claim per source."""

    def __init__(self, book: NameBook | None = None, name_max: int = NAME_MAX) -> None:
        self._taken: set[str] = set(RESERVED)
        self.book = book
        self.name_max = name_max

    def digits(self, source: str, page_count: int) -> int:
        """The width of page numbers in `source`'s file names (records.page_digits): wider than 4 only for a
        document over 9,999 pages, and then only when no earlier run wrote its pages 4 digits wide (a rerun
        keeps the names it finds: its pages are not redone under new names)."""
        digits = page_digits(page_count)
        if digits > PAGE_DIGITS and self.book is not None and any(
                _FOUR_DIGITS.search(n) for n in self.book.held(source)):
            return PAGE_DIGITS
        return digits

    def claim(self, rel: PurePosixPath, source: str, multipage: bool,
              page_count: int, digits: int = PAGE_DIGITS) -> Claim:
        """The key for `source` (found at `rel`). Raises DecodeError when every choice is taken. Keys are in
        Unicode's composed form (NFC): `café` typed composed or decomposed (as macOS names it) gives one output
        name, and two such files are told apart as two names differing in case are."""
        rel = composed(rel)
        mine, elsewhere = self._held_key(source, rel, multipage)
        for key in ([mine] if mine else []) + list(self._options(rel)):
            fitted = fit_key(key, multipage, self.name_max)
            names = self._names(fitted, multipage, page_count, digits)
            if names & self._taken or not self._free(names, source):
                continue
            self._taken |= names
            return Claim(fitted, key if fitted != key else None, elsewhere and key == mine)
        raise DecodeError("too many inputs map to the same output name")

    @staticmethod
    def _options(rel: PurePosixPath) -> Iterator[PurePosixPath]:
        stem = natural_key(rel)
        yield stem
        yield stem.with_name(rel.name)
        for i in range(2, MAX_SUFFIX):
            yield stem.with_name(f"{stem.name}-{i}")

    def _held_key(self, source: str, rel: PurePosixPath,
                  multipage: bool) -> tuple[PurePosixPath | None, bool]:
        """The key this source's pages were written under by an earlier run (None: none), and whether it is
        none of the options of `rel`: the source was named another way then (a walk of another folder, a path,
        a stdin list, a symlink), and keeps its key all the same, so that one source has one output."""
        if self.book is None:
            return None, False
        # NFC, as keys are: an earlier run's decomposed (NFD) name is found through its composed form
        stems = sorted({composed(output_stem(out)) for out in self.book.held(source)})
        if not stems:
            return None, False
        held = {s.as_posix().casefold() for s in stems}
        for key in self._options(rel):
            if fit_key(key, multipage, self.name_max).as_posix().casefold() in held:
                return key, False
        return stems[0], True

    def _free(self, names: set[str], source: str) -> bool:
        """No earlier run's record of another source holds any of `names`."""
        return self.book is None or all(self.book.holder(n) in (None, source) for n in names)

    @staticmethod
    def _names(key: PurePosixPath, multipage: bool, page_count: int, digits: int = PAGE_DIGITS) -> set[str]:
        names = {"stem:" + key.as_posix().casefold()}
        names |= {page_output(key, multipage, p, digits).as_posix().casefold() for p in range(1, page_count + 1)}
        return names
