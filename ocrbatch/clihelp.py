"""The command line's parameters made from the option table, and what it shows a person: `--help` in panels,
one style for a usage error, completion scripts.

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
import inspect
from typing import Any, Callable, Optional

import typer
from typer.core import TyperCommand

from . import table
from .errors import UsageError
from .rows import Option

PROG = "ocrbatch"  # also under `python -m ocrbatch`: the name --help shows and --install-completion completes

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


# A value is taken as text and read by its row (Option.read, as its variable is), so that a value refused says so in
# one style from a flag or a variable; a path stays text (typer's Path would make -o '' the current folder).
_ANNOTATIONS = {"text": str, "int": str, "count": int, "float": str, "path": str, "switch": bool, "batch": str}


def flag(option: Option) -> inspect.Parameter:
    """The command-line parameter of one row of config.OPTIONS (typer reads it from the command's signature)."""
    names = [f"{option.flag}/{option.off}" if option.kind == "switch" else option.flag, *option.short]
    default = option.default if option.kind in ("switch", "count") else None  # the table gives the rest theirs
    info = typer.Option(default, *names, help=flag_help(option), metavar=metavar(option),
                        count=option.kind == "count", show_default=False,
                        autocompletion=_completion(option.allowed) if option.allowed else None)
    kind = _ANNOTATIONS[option.kind]
    return inspect.Parameter(option.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=kind if option.kind in ("switch", "count") else Optional[kind])


def alias(name: str) -> inspect.Parameter:
    """The parameter of an alias flag (table.ALIASES: --force-ocr), a switch that gives its row a value."""
    row, value, text = table.ALIASES[name]
    return inspect.Parameter(alias_name(name), inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                             default=typer.Option(False, name, help=text))


def alias_name(name: str) -> str:
    """The parameter's name of alias flag `name` (--force-ocr: alias_force_ocr)."""
    return "alias_" + name.lstrip("-").replace("-", "_")


def label(o: Option, text: str) -> str:
    """How a refused value given to `o`'s flag is named: `--dpi abc`, `--pages ''`."""
    return f"{o.flag} {text if text else repr(text)}"


def panel_command(rows: list[Option]) -> type[PanelCommand]:
    """The command class whose --help lists `rows` under their headings (table.panel), an alias under its row's,
    the arguments under the first, and -h last."""
    by_name = {o.name: table.panel(o) for o in rows}
    by_name.update({alias_name(f): table.panel(table.OPTION[r]) for f, (r, _, _) in table.ALIASES.items()})

    def panel_of(name: str) -> str:
        return by_name.get(name, table.LOGGING if name == "help" else table.IN_OUT)

    return type("TabledCommand", (PanelCommand,), {"panel_of": staticmethod(panel_of),
                                                   "order": staticmethod(table.panel_order)})


def _completion(choices: tuple[str, ...]) -> Callable[[str], list[str]]:
    """Shell completion (`ocrbatch --install-completion`) of an option's values."""

    def complete(incomplete: str) -> list[str]:
        return [c for c in choices if c.startswith(incomplete)]

    return complete


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")  # the shells typer's completion scripts are for


def completion_script(shell: str) -> tuple[str, str]:
    """The shell named and its completion script; UsageError for a shell there is none for."""
    from typer._completion_shared import get_completion_script

    shell = shell.strip().lower()
    if shell not in SHELLS:
        raise UsageError(f"no completion for {shell!r}: name one of {', '.join(SHELLS[:4])}")
    return shell, get_completion_script(prog_name=PROG, complete_var=f"_{PROG.upper()}_COMPLETE", shell=shell)
