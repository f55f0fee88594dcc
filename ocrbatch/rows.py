"""The row machinery: `Option`, one row of the option table (table.py), and what a row is made of: the kinds of
value, the scopes (where an option is given) and the typed configs (where its value goes). See config.py's
docstring for how the rows drive flags, variables, keywords, typed configs and docs.

An engine's own rows (engines/NAME/plugin.py) are `Option`s too: this module imports nothing of the package but
its errors, so an engine plug-in can import it without pulling in the table."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .errors import UsageError

# The typed configs a row's value goes to (Option.to): what an engine reads, a run's configuration, the server's
# own settings, how a command reports (its output on the terminal).
ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG, REPORT = "EngineOptions", "RunConfig", "ServeConfig", "Report"
CONFIG_NAMES = (ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG, REPORT)
RUN, SERVE, ENGINE = "run", "serve", "engine"
ENGINE_FLAG = frozenset({RUN, SERVE, ENGINE})  # a flag of both commands and a Converter keyword
# The kinds of value an option takes, and what one must be: batch is a number of pages, or auto; count a flag
# given N times (-vv).
KINDS = {"text": "text", "int": "a whole number", "count": "a whole number", "float": "a number",
         "path": "a path", "switch": "true or false", "batch": "a number of pages, or auto"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Option:
    """One row of OPTIONS."""

    name: str  # the Converter keyword (and the field, unless `attr`); the flag --name-with-dashes, OCRBATCH_NAME
    kind: str  # one of KINDS
    default: Any
    help: str
    scope: frozenset[str]  # RUN, SERVE, ENGINE: see the module's docstring
    short: tuple[str, ...] = ()  # short flags, e.g. ("-o",)
    choices: tuple[str, ...] = ()  # the values allowed, when they are a list
    # The values allowed, when another part of the package holds the list: asked each time (--engine, --backend:
    # the engines' registry, engines/catalog.py), so the list is written once, where it is kept.
    choices_of: Callable[[], tuple[str, ...]] | None = None
    least: float | None = None  # the smallest value allowed
    most: float | None = None  # the largest value allowed
    check: Callable[[Any], str | None] | None = None  # any other rule: why a value is refused, or None
    metavar: str | None = None
    # With --ray: None, the option works as without Ray; else why a value other than the default is refused
    # there (a usage error, exit 2): a text for every such value, or a rule naming the values it refuses.
    under_ray: str | Callable[[Any], str | None] | None = None
    # Where the value goes: the typed config (ENGINE_OPTIONS, RUN_CONFIG, SERVE_CONFIG or REPORT) and its field,
    # named `name` unless `attr` says otherwise (--null: null_separated). `typed_config` gives the config a field
    # for every row that names it; `configure` fills it, each value checked and parsed by its row, once.
    to: str = ""
    attr: str | None = None
    # Text (a flag's, a variable's, a keyword's) → the field's typed value (--pages 1-3 → PageSelection); given a
    # value it made already, it returns it (checked). None: the value is the field's as checked (a path: a Path).
    parse: Callable[[Any], Any] | None = None

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        assert self.to in CONFIG_NAMES, (self.name, self.to)

    @property
    def field(self) -> str:
        """The name of the typed config's field this row fills."""
        return self.attr or self.name

    @property
    def allowed(self) -> tuple[str, ...]:
        """The values allowed, when they are a list (`choices`, or `choices_of`'s answer); () for any value."""
        return self.choices or (tuple(self.choices_of()) if self.choices_of is not None else ())

    @property
    def initial(self) -> Any:
        """The default as its field holds it (parsed)."""
        return self.checked(self.default) if self.default is not None else None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def off(self) -> str | None:
        """A switch's opposite flag: --no-NAME (for a switch named no_X: --X)."""
        if self.kind != "switch":
            return None
        return "--" + self.name[3:].replace("_", "-") if self.name.startswith("no_") else "--no-" + self.flag[2:]

    @property
    def env(self) -> str:
        return "OCRBATCH_" + self.name.upper()

    def ray_problem(self, value: Any) -> str | None:
        """Why `value` (as given, or parsed) is refused with --ray, or None."""
        if self.under_ray is None or value is None or value in (self.default, self.initial):
            return None
        return self.under_ray if isinstance(self.under_ray, str) else self.under_ray(value)

    def problem(self, value: Any) -> str | None:
        """Why `value` is refused, or None."""
        if value is None:
            return None if self.default is None else "a value is needed"
        want = {"int": int, "count": int, "float": (int, float), "text": (str, os.PathLike),  # e.g. a model's path
                "path": (str, os.PathLike), "switch": bool, "batch": (int, str)}[self.kind]
        if not isinstance(value, want) or (isinstance(value, bool) and self.kind != "switch"):
            return f"{KINDS[self.kind]} is needed, not {type(value).__name__}"
        if self.kind == "path" and not str(value).strip():
            return "is empty: give a path"  # -o '' would otherwise be the current folder
        if self.kind == "float" and not math.isfinite(value):  # nan passes every comparison; inf is no time
            return "must be a finite number"
        if self.kind == "batch":
            if isinstance(value, str) and value.strip().lower() == "auto":
                return None
            try:
                value = int(value)
            except ValueError:
                return f"{KINDS[self.kind]} is needed"
        allowed = self.allowed
        if allowed and value not in allowed:
            return "choose " + _either(allowed)
        if self.least is not None and self.most is not None and not self.least <= value <= self.most:
            return f"choose between {self.least:g} and {self.most:g}"
        if self.least is not None and value < self.least:
            return "cannot be negative" if self.least == 0 else f"must be at least {self.least:g}"
        return self.check(value) if self.check is not None else None

    def checked(self, value: Any, label: str | None = None) -> Any:
        """`value` as its field holds it, if allowed: parsed by the row (`parse`; a path as a Path); else
        UsageError, naming `label` (default: the flag). A value parsed already is checked by `parse` again."""
        if self.parse is not None and value is not None and not isinstance(value, (str, int, float, os.PathLike)):
            return self.parse(value)  # e.g. a PageSelection, a tuple of formats
        why = self.problem(value)
        if why is not None:
            raise UsageError(f"{label or f'{self.flag} {value if str(value) else repr(str(value))}'}: {why}")
        if value is None:
            return None
        if self.parse is not None:
            return self.parse(value)
        return Path(value) if self.kind == "path" else value

    def read(self, raw: str, label: str | None = None) -> Any:
        """The value of OCRBATCH_NAME=raw (or of a flag's text, naming it in `label`: "--dpi abc"), checked;
        UsageError naming the variable (or `label`). A flag's text and a variable's are read alike, so that a
        value refused says so in one style wherever it came from."""
        label = label or f"{self.env}={raw!r}"
        text = raw.strip()
        if self.kind in ("int", "count", "float"):
            try:
                value: Any = float(text) if self.kind == "float" else int(text)
            except ValueError:
                raise UsageError(f"{label}: {KINDS[self.kind]} is needed") from None
        elif self.kind == "switch":
            if text.lower() not in _TRUE + _FALSE:
                raise UsageError(f"{label}: use 1/true/yes or 0/false/no")
            value = text.lower() in _TRUE
        else:
            value = raw if self.kind == "text" else text
        return self.checked(value, label)


def _either(choices: Iterable[str]) -> str:
    *most, last = choices
    return f"{', '.join(most)} or {last}" if most else last

