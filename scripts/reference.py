#!/usr/bin/env python3
"""The reference pages (Options, Commands) and the man page, made from config.OPTIONS and the Typer app.

Nothing here is written by hand: every option's flag, variable, default and meaning comes from its row of
`ocrbatch.config.OPTIONS`, every command's usage and parameters from the click command Typer builds. So a
new row in the table shows up in `ocrbatch convert --help`, on the docs site and in the man page alike.

    python scripts/reference.py options            # the Options page (Markdown) on stdout
    python scripts/reference.py commands           # the Commands page (Markdown) on stdout
    python scripts/reference.py man [OUT]          # the man page (troff), to OUT or stdout; `make man`

It is also the docs site's MkDocs hook (mkdocs.yml: `hooks`): `on_files` adds options.md and commands.md to
the site as it builds, so they are never stale and never committed.
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT))

TABLED = ("convert", "serve")  # the commands whose options are rows of config.OPTIONS
PAGES = {"options.md": "options_page", "commands.md": "commands_page"}  # generated pages, by file name


# -- the option table ------------------------------------------------------------------------------------
def _default(o: Any) -> str:
    if o.kind == "switch":
        return "off"
    if o.kind == "count":
        return ""
    if o.default is None:
        return ""
    if isinstance(o.default, float) and o.default.is_integer():
        return f"`{int(o.default)}`"
    return f"`{o.default}`"


def _flags(o: Any) -> str:
    names = [*o.short, o.flag]
    text = ", ".join(f"`{n}`" for n in names)
    if o.kind == "switch":
        text += f" / `{o.off}`"
    elif o.kind != "count":
        value = o.metavar or ("|".join(o.allowed) if o.allowed else o.kind.upper())
        text = text[:-1] + f" {value}`"
    return text


def _where(o: Any) -> str:
    from ocrbatch.config import ENGINE, RUN, SERVE

    return ", ".join(label for scope, label in ((RUN, "convert"), (SERVE, "serve"), (ENGINE, "Converter"))
                     if scope in o.scope)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: pipes escaped, and <, >, & as entities (--prompt's <image>, --join's
    <!-- page N --> are text, not HTML)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def _rows(keep) -> Iterator[str]:
    from ocrbatch.config import OPTIONS

    yield "| flag | variable | default | meaning | where |"
    yield "| --- | --- | --- | --- | --- |"
    for o in OPTIONS:
        if keep(o):
            yield f"| {_flags(o)} | `{o.env}` | {_default(o)} | {_cell(o.help)} | {_where(o)} |"


def _grouped(keep) -> Iterator[str]:
    """The rows `keep` picks, a table under each of --help's headings (ocrbatch.table.panel)."""
    from ocrbatch.config import OPTIONS
    from ocrbatch.table import panel, panel_order

    for title in panel_order():
        if any(keep(o) and panel(o) == title for o in OPTIONS):
            yield from (f"### {title}", "", *_rows(lambda o: keep(o) and panel(o) == title), "")


def options_page() -> str:
    from ocrbatch.config import ENGINE, OPTION, OPTIONS, RUN, SERVE
    from ocrbatch.table import ALIASES

    lines = [
        "---", "hide: [toc]", "---", "",  # the table needs the width
        "# Options",
        "",
        "<!-- Generated from ocrbatch/table.py's OPTIONS by scripts/reference.py when the site is built. -->",
        "",
        "Every option of `ocrbatch convert` and `ocrbatch serve`, and every keyword of `ocrbatch.Converter`, is",
        "one row of one table, `OPTIONS` in `ocrbatch/table.py`; this page, `--help` and the",
        "[man page](commands.md#man-page) are made from it.",
        "",
        "- **flag**: on the command line; a switch has its opposite (`--no-force` undoes `--force`).",
        "- **variable**: every option can also be set in the environment, `OCRBATCH_` and its name in capitals.",
        "  A flag given on the command line wins over its variable. Switches take `1`/`true`/`yes`/`on` or",
        "  `0`/`false`/`no`/`off`. A value that cannot be used stops the command with exit code 2 and names",
        "  where it came from: `ocrbatch: error: OCRBATCH_DPI='abc': a whole number is needed`.",
        "- **where**: `convert`, `serve` (flags of those commands), `Converter` (a keyword of the",
        "  [Python API](python.md), with the same default and checks; `Converter.from_env()` reads the",
        "  variables).",
        "",
        "With `--ray`, the engine options (those marked `Converter`) go to the workers on the cluster;",
        "`--threads` is then the CPUs each worker takes (see [Scaling out](scaling.md)).",
        "",
        "## convert",
        "",
        "Under the same headings as `ocrbatch convert --help`; an engine's own options under its name.",
        "",
        *_grouped(lambda o: RUN in o.scope),
        "Aliases, by the names other tools give them:",
        "",
        *[f"- `{flag}`: `{OPTION[row].flag} {value}`. {_cell(text)}" for flag, (row, value, text) in ALIASES.items()],
        "",
        "## serve",
        "",
        "`ocrbatch serve` takes the options above marked `serve` (the engine's, `-q`, `-v`), and these of its",
        "own (see [Serving](serving.md)):",
        "",
        *_rows(lambda o: SERVE in o.scope and RUN not in o.scope),
        "",
    ]
    python_only = [o for o in OPTIONS if o.scope == {ENGINE}]
    if python_only:
        lines += ["## Python only", "",
                  "Keywords of `Converter` without a flag (their variables are read by `Converter.from_env()`):",
                  "", "| keyword | variable | default | meaning |", "| --- | --- | --- | --- |",
                  *[f"| `{o.name}` | `{o.env}` | {_default(o)} | {_cell(o.help)} |" for o in python_only], ""]
    return "\n".join(lines)


# -- the commands ----------------------------------------------------------------------------------------
def _commands() -> list[tuple[str, Any]]:
    import typer

    from ocrbatch import cli

    group = typer.main.get_command(cli.app)
    return [(name, cmd) for name, cmd in group.commands.items() if not cmd.hidden]


def _root_options() -> list[Any]:
    import typer

    from ocrbatch import cli

    return [p for p in typer.main.get_command(cli.app).params if not getattr(p, "hidden", False)]


def _usage(name: str, cmd: Any) -> str:
    # the command's own Context class: typer 0.29 carries its own click (typer._click), and the click package
    # may be absent (a plain install) or another copy whose classes typer's commands are not instances of
    pieces = cmd.collect_usage_pieces(cmd.context_class(cmd, info_name=name))
    return f"ocrbatch {name} " + " ".join(p.replace("{", "").replace("}", "").upper() for p in pieces)


def _param_row(p: Any) -> str:
    if p.param_type_name == "argument":
        return f"| `{(p.metavar or p.name).upper()}` | {_cell(getattr(p, 'help', '') or '')} |"
    names = ", ".join(f"`{n}`" for n in [*p.opts, *p.secondary_opts])
    default = p.default if not callable(p.default) else None
    shown = f" (default: `{default}`)" if default not in (None, False, 0, "", ()) and not p.count else ""
    return f"| {names} | {_cell(p.help or '')}{shown} |"


def commands_page() -> str:
    from ocrbatch import config

    lines = ["# Commands", "",
             "<!-- Generated from the Typer app (ocrbatch/cli.py) by scripts/reference.py when the site is built. -->",
             "", "`ocrbatch --help` and `ocrbatch COMMAND --help` say the same on a terminal.", "",
             "## ocrbatch", "", "| option | meaning |", "| --- | --- |",
             *[_param_row(p) for p in _root_options()], ""]
    tabled = {o.flag for o in config.OPTIONS}
    for name, cmd in _commands():
        help_text = (cmd.help or "").strip()
        lines += [f"## ocrbatch {name}", "", "```text", _usage(name, cmd), "```", "",
                  " ".join(help_text.split()), ""]
        params = cmd.params
        if name in TABLED:  # made from the option table: listed there
            params = [p for p in cmd.params if not any(o in tabled for o in getattr(p, "opts", ()))]
            lines += [f"Its options are rows of the option table: see [Options](options.md#{name}).", ""]
        if params:
            lines += ["| parameter | meaning |", "| --- | --- |", *[_param_row(p) for p in params], ""]
    lines += ["## Shell completion", "",
              "`ocrbatch --install-completion SHELL` installs completion of commands, options and their values for",
              "SHELL (`bash`, `zsh`, `fish` or `powershell`); open a new shell to use it.",
              "`ocrbatch --show-completion SHELL` prints the script instead, to put where you like",
              "(`ocrbatch --show-completion zsh > ~/.zfunc/_ocrbatch`). Another shell is refused with exit 2.", "",
              "## Man page", "",
              "`make man` writes `build/man/ocrbatch.1` from the same table and commands",
              "(`python scripts/reference.py man build/man/ocrbatch.1`); read it with `man -l build/man/ocrbatch.1`.",
              ""]
    return "\n".join(lines)


# -- the man page ----------------------------------------------------------------------------------------
def _roff(text: str) -> str:
    text = " ".join(str(text).split()).replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def man_page() -> str:
    from ocrbatch import __version__, config

    out = [f'.TH OCRBATCH 1 "{date.today():%Y-%m-%d}" "ocrbatch {__version__}" "User Commands"',
           ".SH NAME", "ocrbatch \\- batch\\-convert scanned PDFs and page images to Markdown, one file per page",
           ".SH SYNOPSIS"]
    for name, cmd in _commands():
        out += [".B " + _roff(_usage(name, cmd)), ".br"]
    out += [".SH DESCRIPTION", _roff("ocrbatch converts folders of scanned PDFs and page images to Markdown, one "
                                     "Markdown file per page, with the embedded PP-OCR engine on a CPU or "
                                     "DeepSeek-OCR-2 on a GPU. Every option can also be set by its OCRBATCH_* "
                                     "variable; a flag given wins.")]
    for name, cmd in _commands():
        out += [".SH " + _roff(f"ocrbatch {name}".upper()), _roff(cmd.help or "")]
        for p in cmd.params:
            if not getattr(p, "opts", None) or getattr(p, "hidden", False):
                continue
            row = next((o for o in config.OPTIONS if o.flag in p.opts), None)
            names = ", ".join([*p.opts, *p.secondary_opts])
            out += [".TP", ".B " + _roff(names)]
            text = p.help or ""
            if row is not None:  # the row's own text (--help adds its default and variable in brackets)
                text = row.help + f" Variable: {row.env}."
                if row.default not in (None, False, 0) and row.kind not in ("switch", "count"):
                    text += f" Default: {row.default}."
            out.append(_roff(text))
    out += [".SH EXIT STATUS"]
    from ocrbatch.errors import ExitCode

    for code in ExitCode:
        out += [".TP", f".B {int(code)}", _roff(code.name.lower().replace("_", " "))]
    out += [".SH SEE ALSO", _roff("The documentation in docs/ (make docs builds it as a site), "
                                  "ocrbatch COMMAND --help.")]
    return "\n".join(out) + "\n"


# -- the MkDocs hook -------------------------------------------------------------------------------------
def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site being built (MkDocs calls this; mkdocs.yml: hooks)."""
    from mkdocs.structure.files import File

    for name, maker in PAGES.items():
        files.append(File.generated(config, name, content=globals()[maker]()))
    return files


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("options", "commands", "man"):
        print(__doc__, file=sys.stderr)
        return 2
    text = {"options": options_page, "commands": commands_page, "man": man_page}[argv[0]]()
    if len(argv) > 1:
        out = Path(argv[1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
