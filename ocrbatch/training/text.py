"""Text to draw: licensed plain text found on the machine, and records made up here.

Sources (each is listed with its licence in ocrbatch/models/rec_doc/SOURCES.md):
- manual pages in English, French, German and Spanish (/usr/share/man: Debian's manpages, manpages-fr, -de, -es
  and the pages of every installed package; each page's own licence, free by Debian's policy), as running text;
- the docstrings of Python's standard library (PSF licence);
- the licence texts in /usr/share/common-licenses;
- word lists (/usr/share/dict: wamerican, wfrench, wngerman, ...; public domain and GPL), for names and items;
- records made up here from those words and random numbers: invoice and receipt lines, tables of figures,
  dates, amounts, references, addresses, URLs, e-mail addresses, code.

Nothing here is taken from a document the project scores on (the dev corpus is TeX documentation, the stress
set is drawn by the project's own scripts). A source that is missing on a machine is skipped; `builtin`
(Python's docstrings and the made-up records) is always there.
"""

from __future__ import annotations

import ast
import gzip
import random
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

MAN_ROOTS = ("/usr/share/man/man1", "/usr/share/man/man5", "/usr/share/man/man8", "/usr/share/man/fr/man1",
             "/usr/share/man/de/man1", "/usr/share/man/es/man1", "/usr/share/man/man3", "/usr/share/man/man7")
NOT_DEBIAN = ("gcloud", "bq.", "gsutil")  # pages of a CLI installed from outside Debian: not drawn
LICENCES = "/usr/share/common-licenses"
WORDS = ("/usr/share/dict/american-english", "/usr/share/dict/french", "/usr/share/dict/ngerman",
         "/usr/share/dict/spanish", "/usr/share/dict/italian")

_FONT_ESC = re.compile(r"\\f(\[[^\]]*\]|\(..|.)")
_ROFF_ESC = re.compile(r"\\(\(..|\[[^\]]*\]|[^a-zA-Z])")
_ROFF_NAMED = {"(em": "—", "(en": "–", "(lq": "“", "(rq": "”", "(oq": "‘", "(cq": "’", "(bu": "•", "(co": "©",
               "(rg": "®", "(de": "°", "(mu": "×", "(aq": "'", "(dq": '"', "(ti": "~", "(ha": "^", "(at": "@",
               "(Fo": "«", "(Fc": "»", "(fo": "‹", "(fc": "›", "(rs": "\\", "(ga": "`", "(tm": "™", "(pl": "+",
               "(mi": "−", "(>=": "≥", "(<=": "≤", "(!=": "≠", "(+-": "±", "-": "-", "e": "\\", " ": " ",
               "~": " ", "&": "", "|": "", "^": "", ".": ".", "'": "'", "`": "`", "/": "", ",": "", "\"": "",
               "%": "", ":": "", "c": ""}


def roff_paragraphs(source: str) -> list[str]:
    """The running text of a manual page's roff source, as paragraphs (macros dropped, escapes resolved)."""
    paras: list[str] = []
    cur: list[str] = []
    for line in source.splitlines():
        if line.startswith((".", "'")):
            word = line[1:].split(None, 1)
            macro = word[0] if word else ""
            rest = word[1] if len(word) > 1 else ""
            if macro in ("SH", "SS", "PP", "P", "LP", "TP", "IP", "sp", "br", "HP", "RS", "RE", "nf", "fi", "TH"):
                if cur:
                    paras.append(" ".join(cur))
                    cur = []
                if macro in ("SH", "SS") and rest:
                    paras.append(rest.strip('"'))
            elif macro in ("B", "I", "BR", "IR", "RB", "RI", "BI", "IB", "SM", "SB") and rest:
                cur.append(" ".join(w.strip('"') for w in rest.split()) if macro in ("B", "I", "SM", "SB")
                           else "".join(w.strip('"') for w in rest.split()))
            continue
        cur.append(line)
    if cur:
        paras.append(" ".join(cur))
    out = []
    for p in paras:
        p = _FONT_ESC.sub("", p)
        p = _ROFF_ESC.sub(lambda m: _ROFF_NAMED.get(m.group(1), ""), p)
        p = re.sub(r"\s+", " ", p).strip()
        if len(p) >= 20 and "\\" not in p:
            out.append(p)
    return out


def docstring_paragraphs(source: str) -> list[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                for p in re.split(r"\n\s*\n", doc):
                    p = re.sub(r"\s+", " ", p).strip()
                    if len(p) >= 20 and ">>>" not in p:
                        out.append(p)
    return out


@dataclass
class Corpus:
    """Paragraphs of running text and words, drawn from the sources found on this machine, lazily."""

    rng: random.Random
    man: list[Path] = field(default_factory=list)
    python: list[Path] = field(default_factory=list)
    licences: list[Path] = field(default_factory=list)
    words: list[str] = field(default_factory=list)

    @classmethod
    def found(cls, rng: random.Random, system: bool = True) -> "Corpus":
        """The sources on this machine; with `system` false only Python's own docstrings (the tests)."""
        if not system:
            stdlib = Path(sysconfig.get_paths()["stdlib"])
            python = sorted(stdlib.glob("*.py"))
            words = sorted({w for p in python[:60] for para in docstring_paragraphs(p.read_text(errors="ignore"))
                            for w in para.split() if w.isalpha()})
            return cls(rng, [], python, [], words)
        man = sorted(p for root in MAN_ROOTS if Path(root).is_dir() for p in Path(root).glob("*.gz")
                     if not p.name.startswith(NOT_DEBIAN))
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        python = sorted(p for p in stdlib.glob("*.py")) + sorted(stdlib.glob("*/*.py"))
        lic = sorted(p for p in Path(LICENCES).glob("*") if p.is_file()) if Path(LICENCES).is_dir() else []
        words: list[str] = []
        for w in WORDS:
            if Path(w).is_file():
                words += [x for x in Path(w).read_text(encoding="utf-8", errors="ignore").split()
                          if x.isalpha() and "'" not in x]
        if not words:  # a machine without word lists: the words of Python's docstrings
            words = sorted({w for p in python[:200] for para in docstring_paragraphs(p.read_text(errors="ignore"))
                            for w in para.split() if w.isalpha()})
        return cls(rng, man, python, lic, words)

    def paragraph(self) -> str:
        """A random paragraph of running text (man pages most, docstrings, licences)."""
        for _ in range(20):
            r = self.rng.random()
            if r < 0.55 and self.man:
                path = self.rng.choice(self.man)
                try:
                    paras = roff_paragraphs(gzip.decompress(path.read_bytes()).decode("utf-8", "ignore"))
                except (OSError, EOFError):
                    continue
            elif r < 0.9 or not self.licences:
                paras = docstring_paragraphs(self.rng.choice(self.python).read_text(errors="ignore"))
            else:
                text = self.rng.choice(self.licences).read_text(errors="ignore")
                paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
                paras = [p for p in paras if len(p) > 30]
            if paras:
                return self.rng.choice(paras)
        return " ".join(self.rng.choice(self.words) for _ in range(30))

    def word(self) -> str:
        return self.rng.choice(self.words)

    def title(self, n: int | None = None) -> str:
        words = [self.word() for _ in range(n or self.rng.randint(1, 6))]
        style = self.rng.random()
        if style < 0.3:
            return " ".join(w.capitalize() for w in words)
        if style < 0.4:
            return " ".join(words).upper()
        return " ".join(words).capitalize()


# -- made-up records ---------------------------------------------------------------------------------

def amount(rng: random.Random) -> str:
    v = rng.choice([rng.uniform(0, 20), rng.uniform(0, 500), rng.uniform(0, 20000)])
    s = f"{v:,.2f}"
    if rng.random() < 0.25:  # European style
        s = s.replace(",", " ").replace(".", ",").replace(" ", rng.choice([".", " ", ""]))
    return s


def date(rng: random.Random) -> str:
    d, m, y = rng.randint(1, 28), rng.randint(1, 12), rng.randint(1950, 2030)
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    return rng.choice([f"{d:02d}/{m:02d}/{y}", f"{y}-{m:02d}-{d:02d}", f"{d} {months[m - 1]} {y}",
                       f"{d:02d}.{m:02d}.{y % 100:02d}", f"{months[m - 1]} {d}, {y}", f"{d:02d}-{m:02d}-{y}"])


def record_line(c: Corpus) -> str:
    """A line of the kind forms, invoices, receipts, references and code are made of."""
    rng = c.rng
    k = rng.randrange(16)
    if k >= 12:
        return symbol_line(c)
    if k == 0:
        return f"{rng.randint(1, 99)} {c.title(rng.randint(1, 4))} {amount(rng)}"
    if k == 1:
        return f"{c.word().upper()} {c.word().upper()} {rng.choice(['RM', '$', '€', 'EUR', 'USD', ''])}{amount(rng)}"
    if k == 2:
        label = rng.choice(["Invoice No.", "Date:", "Total", "Subtotal", "VAT 20%", "Tel:", "Fax:", "Ref.",
                            "Account", "Order #", "GST", "Cash", "Change", "Qty", "Due date", "Page"])
        return f"{label} {rng.choice([amount(rng), date(rng), str(rng.randint(1, 10**rng.randint(2, 9)))])}"
    if k == 3:
        return f"{rng.randint(1, 9999)} {c.title(2)} {rng.choice(['Street', 'Road', 'Avenue', 'Rue', 'Straße', 'Jalan'])}, {rng.randint(10000, 99999)} {c.word().capitalize()}"
    if k == 4:
        host = f"{c.word().lower()}.{rng.choice(['org', 'com', 'net', 'de', 'fr', 'io', 'edu'])}"
        return rng.choice([f"https://www.{host}/{c.word().lower()}/{c.word().lower()}.html",
                           f"{c.word().lower()}.{c.word().lower()}@{host}", f"http://{host}/~{c.word().lower()}",
                           f"See {host}/{c.word().lower()}?id={rng.randint(1, 999)}"])
    if k == 5:
        a = f"{c.word()[0].upper()}. {c.word().capitalize()}"
        return (f"[{rng.randint(1, 60)}] {a}, {c.title(rng.randint(3, 7))}, {c.title(2)} {rng.randint(1, 99)} "
                f"({rng.randint(1950, 2025)}) {rng.randint(1, 900)}–{rng.randint(901, 999)}.")
    if k == 6:
        return "  ".join(rng.choice([amount(rng), str(rng.randint(0, 10**5)), f"{rng.uniform(0, 100):.1f}%",
                                     f"{rng.uniform(-9, 9):.3f}"]) for _ in range(rng.randint(2, 6)))
    if k == 7:
        name = c.word().lower()
        return rng.choice([f"def {name}(self, {c.word().lower()}: int = {rng.randint(0, 9)}) -> None:",
                           f"{name} = {c.word().lower()}[{rng.randint(0, 9)}] + {rng.randint(0, 99)}",
                           f"$ {name} --{c.word().lower()}={rng.randint(1, 64)} -o {c.word().lower()}.txt",
                           f"if ({name} != NULL && {name}->{c.word().lower()} > {rng.randint(0, 99)}) {{",
                           f"#include <{name}.h>", f"{name}: {{ \"{c.word().lower()}\": {rng.randint(0, 999)} }}"])
    if k == 8:
        return f"{c.title(rng.randint(1, 3))} {'.' * rng.randint(3, 30)} {rng.randint(1, 400)}"
    if k == 9:
        return f"{rng.randint(1, 12)}.{rng.randint(1, 9)} {c.title(rng.randint(2, 6))}"
    if k == 10:
        return f"{date(rng)} {c.word().upper()} {rng.randint(100, 99999)} {amount(rng)}"
    return f"{c.title(rng.randint(1, 3))}: {rng.choice([c.title(rng.randint(1, 4)), amount(rng), date(rng)])}"


def symbol_line(c: Corpus) -> str:
    """A line dense in the marks running text has few of: separator rows, brackets of every kind (the
    metavariables of manuals and TeX documentation), quotes, dashes, operators, currency and units."""
    rng = c.rng
    w = c.word
    k = rng.randrange(7)
    if k == 0:
        mark = rng.choice("*-=._~#+")
        row = mark * rng.randint(3, 40)
        return rng.choice([row, f"{row} {w().upper()} {row}", f"{w().upper()} {mark * rng.randint(2, 12)} {amount(rng)}"])
    if k == 1:
        name = w().lower()
        return rng.choice([f"\\{name}{{{w().lower()}}}[{rng.randint(1, 9)}]{{#1}}", f"⟨{name}⟩ ⟨{w().lower()}⟩",
                           f"\\{name}⟨{w().lower()}⟩{{⟨{w().lower()}⟩}}", f"<{name}> [{w().lower()}] {{{w().lower()}}}",
                           f"{name}({w().lower()}, {rng.randint(0, 9)})[{rng.randint(0, 99)}] = {{{w().lower()}}};",
                           f"-{name.upper()[:8]}-", f"--{name}=<{w().lower()}>"])
    if k == 2:
        q = rng.choice([("‘", "’"), ("“", "”"), ("«\u00a0".replace("\\u00a0", " "), " »"), ('"', '"'), ("'", "'"),
                        ("„", "“")])
        return f"{c.title(rng.randint(1, 3))} {q[0]}{' '.join(w() for _ in range(rng.randint(1, 5)))}{q[1]} {w()}"
    if k == 3:
        a, b = rng.randint(1, 400), rng.randint(401, 999)
        return rng.choice([f"pages {a}–{b} — {w()} {w()}", f"{w().capitalize()} — {w()} – {w()}",
                           f"{a}–{b}", f"{w()}-{w()}-{w()}", f"({a}) {w()}; {w()}: {w()}…"])
    if k == 4:
        x = w()[:1].lower() or "x"
        return rng.choice([f"f({x}) = {rng.randint(2, 9)}{x}² + {rng.randint(1, 9)} ≤ {rng.uniform(0, 9):.1f} ± {rng.uniform(0, 1):.2f}",
                           f"{x} × {rng.randint(2, 99)} ÷ {rng.randint(2, 9)} ≈ {rng.uniform(0, 99):.2f}",
                           f"α = {rng.uniform(0, 1):.3f}, β = {rng.uniform(0, 1):.3f}, Δ{x} → 0",
                           f"{rng.randint(1, 99)} % {x} != {rng.randint(0, 9)} && {x} >= {rng.randint(0, 99)}",
                           f"{rng.uniform(0, 40):.1f} °C, {rng.randint(1, 999)} µm, {rng.randint(1, 99)} kg/m³"])
    if k == 5:
        cur = rng.choice(["$", "€", "£", "¥", "RM", "USD ", "EUR ", "CHF "])
        return f"{w().upper()} @ {cur}{amount(rng)} x {rng.randint(1, 9)} = {cur}{amount(rng)}"
    return rng.choice([f"© {rng.randint(1990, 2026)} {c.title(2)}. All rights reserved.", f"{c.title(1)}® {c.title(1)}™",
                       f"§ {rng.randint(1, 40)}.{rng.randint(1, 9)} {c.title(3)}", f"No. {rng.randint(1, 999)} / {w()} # {rng.randint(1, 99)}",
                       f"[{rng.randint(1, 9)}] {w()}; [{rng.randint(10, 99)}] {w()} & {w()}", f"{w()}/{w()}\\{w()}|{w()}"])
