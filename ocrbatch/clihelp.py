"""What the command line shows a person: `--help` in panels, and one style for a usage error.

- `--help` is click's plain layout (the app has no Rich markup: `pip install 'ocrbatch[vllm]'` keeps its
  `[vllm]`), which wraps every description and cuts none at any width. A command made from the option table
  (convert, serve) lists its options under headings (table.PANELS; an engine's own rows under its plug-in's
  title), each with its choices, default and OCRBATCH_* variable (`flag_help`).
- A usage error is one line, `ocrbatch: error: ...`, exit 2, whether the parser finds it (an unknown option, a
  missing argument) or the table does (a value refused, from a flag or a variable: rows.Option.read).
  A misspelt option gets the options nearest to it, the nearest first (`nearest`).
"""

from __future__ import annotations

import difflib
from typing import Any

from typer.core import TyperCommand

from .rows import Option

COL_MAX = 26  # the widest the option column gets before its description starts on the next line
_KIND_METAVARS = {"int": "N", "float": "NUM", "text": "TEXT", "path": "PATH", "batch": "N|auto"}
_LONGEST_CHOICES = 24  # choices up to this long are the metavar (auto|tiny|small); longer ones are listed


def metavar(o: Option) -> str | None:
    """What a flag's value is shown as: its row's metavar, its choices when short, or its kind."""
    if o.kind in ("switch", "count"):
        return None
    allowed = "|".join(o.allowed)
    if o.metavar:
        return o.metavar
    return allowed if allowed and len(allowed) <= _LONGEST_CHOICES else _KIND_METAVARS[o.kind]


def flag_help(o: Option) -> str:
    """A row's help as --help shows it: its text, then its choices (unless the metavar or the text names them
    all), its default and its variable."""
    notes = []
    if o.allowed and metavar(o) != "|".join(o.allowed) and not all(c in o.help for c in o.allowed):
        notes.append(f"[choices: {', '.join(o.allowed)}]")
    if o.default is not None and o.kind not in ("switch", "count"):
        notes.append(f"[default: {o.default}]")
    notes.append(f"[env: {o.env}]")
    return f"{o.help} {' '.join(notes)}"


class PanelCommand(TyperCommand):
    """A command whose options --help lists under headings: each parameter's heading is `panel_of(name)`, the
    headings in `order`'s order (a heading not in it last)."""

    panel_of: Any = staticmethod(lambda name: "Options")
    order: Any = staticmethod(lambda: [])

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line: [OPTIONS] and the arguments by their metavars (INPUT..., not typer's {inputs}...)."""
        return [self.options_metavar or "[OPTIONS]",
                *[_argument(p) for p in self.get_params(ctx) if p.param_type_name == "argument"]]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                record = (_argument(param), getattr(param, "help", None) or "")
            else:
                record = param.get_help_record(ctx)
            if record is not None:
                groups.setdefault(type(self).panel_of(param.name), []).append(record)
        order = [t for t in type(self).order() if t in groups] + [t for t in groups if t not in type(self).order()]
        for title in order:
            with formatter.section(title):
                formatter.write_dl(groups[title], col_max=COL_MAX)


def _argument(param: Any) -> str:
    name = param.metavar or param.name.upper()
    name += "..." if param.nargs != 1 and not name.endswith("...") else ""
    return name if param.required else f"[{name}]"


def nearest(wrong: str, known: list[str], n: int = 3) -> list[str]:
    """The options in `known` nearest to the misspelt `wrong`, the nearest first (difflib's ratio)."""
    return difflib.get_close_matches(wrong, known, n=n, cutoff=0.6)


def usage_line(exc: Any) -> str:
    """A click usage error as one line (without "ocrbatch: error: "): the message, a suggestion for a misspelt
    option, and where to look."""
    ctx = getattr(exc, "ctx", None)
    command = ctx.command_path if ctx is not None else "ocrbatch"
    name = getattr(exc, "option_name", None)
    if name is not None and hasattr(exc, "possibilities"):  # NoSuchOption
        known = [o for p in (ctx.command.get_params(ctx) if ctx is not None else []) for o in
                 [*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())] if o.startswith("--")]
        near = nearest(name, known)
        hint = f"; did you mean {near[0]}" + (f" (or {', '.join(near[1:])})" if near[1:] else "") + "?" if near else ""
        return f"no such option {name}{hint} ({command} --help lists them)"
    message = " ".join(str(exc.format_message()).split()).rstrip(".")
    return f"{message[:1].lower()}{message[1:]} ({command} --help)"
