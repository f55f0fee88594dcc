"""The options and the run's configuration.

`OPTIONS` is the one table of options, a row each: name, kind, default, help, scope, the values allowed, and the
typed config whose field it fills. From it come the `convert` and `serve` flags (cli.py), the OCRBATCH_*
variables, the `Converter`'s keywords and their checks (converter.py), the fields of the typed configs, and the
docs' Options page and man page (scripts/reference.py makes them). A row's scope says where it is given:

    run     a flag of `ocrbatch convert` (one run: its inputs, output and reporting)
    serve   a flag of `ocrbatch serve`
    engine  a keyword of `ocrbatch.Converter`: the engine side, kept across runs

and its `to` where its value goes: a field (named as the row, or `attr`) of EngineOptions (what the engine
reads), RunConfig (a run; ServiceConfig, the engine side a Converter keeps, is RunConfig's fields of the same
names), ServeConfig (serve/config.py) or Report (how a command reports). `typed_config` gives each of these a
field for every row that names it (unless declared by hand, to document it); `configure` fills them from the
values, each checked and parsed by its row, once (`Option.parse`: --pages → PageSelection, --max-batch →
BatchCap). A field no row fills is marked `by_code`: the code sets it.

Every option with a flag also reads OCRBATCH_<NAME> (a flag given wins); a value refused names where it came
from: `--dpi 20: ...`, `OCRBATCH_DPI='abc': ...`. A switch has its opposite flag (`--no-quiet`; `--progress`
for `--no-progress`), so that a flag can undo a variable.

Adding an option is its row and the code that reads its field (config.engine_options.NAME for an engine's,
config.NAME for a run's, report.NAME for the terminal's); nothing is copied by hand. The configs are frozen,
typed and validated.

The parts, by what they hold: values.py the value types (PageSelection, Shard, BatchCap, the formats), rows.py
the row machinery (Option, the kinds, scopes and config names), table.py the table (OPTIONS, and settle,
env_values, check that read values through it), and this module the typed configs made from it. Every public
name of the three is re-exported here.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from .errors import UsageError
# The value types, the row machinery and the table, re-exported: `from ..config import X` finds them here.
from .rows import (CONFIG_NAMES, ENGINE, ENGINE_FLAG, ENGINE_OPTIONS, KINDS, REPORT, RUN, RUN_CONFIG,  # noqa: F401
                   SERVE, SERVE_CONFIG, Option)
from .table import (MAX_UPLOAD_MB, OPTION, OPTIONS, check, env_values, options, options_help,  # noqa: F401
                    settle)
from .values import (FORMATS, MAX_BATCH_START, BatchCap, PageSelection, Shard, available_cpus,  # noqa: F401
                     default_workers, parse_formats)


def _default(name: str) -> Any:
    return OPTION[name].initial


# -- the typed configs, made from the table -----------------------------------------------------------------
CONFIGS: dict[str, type] = {}  # the typed configs, by name (Option.to): filled as each is defined
FILLS: dict[tuple[str, str], Option] = {(o.to, o.field): o for o in OPTIONS}  # (config, field) → its row
assert len(FILLS) == len(OPTIONS), "two rows fill one field"
_FIELD_TYPES = {"text": "str", "int": "int", "count": "int", "float": "float", "path": "Path", "switch": "bool",
                "batch": "BatchCap"}
BY_CODE = {"by": "code"}  # a field's metadata: set by the code (or a benchmark), not an option: no row


def by_code(default: Any = MISSING, *, factory: Any = MISSING) -> Any:
    """A field of a typed config that no row fills: the code sets it (the run's inputs, buffer sizes...)."""
    return field(default=default, default_factory=factory, metadata=BY_CODE)


def typed_config(cls: type) -> type:
    """Make `cls` a frozen dataclass, typed config `cls.__name__` (a name of CONFIG_NAMES), with a field for every
    row of OPTIONS whose `to` names it: a field declared in the class keeps its declaration (its type, a comment,
    a default of its own for direct construction), the others are added here, typed by the row's kind, defaulting
    to the row's default. A new option is its row and the code that reads the field: nothing to copy by hand."""
    name = cls.__name__
    assert name in CONFIG_NAMES, name
    made = _with_fields(cls, [o for o in OPTIONS if o.to == name])
    CONFIGS[name] = made
    return made


def _with_fields(cls: type, rows: Iterable[Option]) -> type:
    """`cls` as a frozen dataclass with a field for each of `rows` it does not declare."""
    notes = dict(cls.__dict__.get("__annotations__", {}))
    for o in rows:
        if o.field not in notes:
            kind = "Any" if o.parse is not None else _FIELD_TYPES[o.kind]
            notes[o.field] = kind if o.default is not None else f"{kind} | None"
            setattr(cls, o.field, o.initial)
    cls.__annotations__ = notes
    return dataclass(frozen=True)(cls)


def rows_as_fields(select: Callable[[Option], bool]) -> Callable[[type], type]:
    """A class decorator: `cls` a frozen dataclass with a field for each row `select` picks (_with_fields)."""
    return lambda cls: _with_fields(cls, filter(select, OPTIONS))


def engine_side(o: Option) -> bool:
    """A row of RunConfig's that is the engine's side (a Converter's keyword, kept across runs): ServiceConfig's."""
    return o.to == RUN_CONFIG and ENGINE in o.scope


def row_of(config: type, name: str) -> Option | None:
    """The row that fills field `name` of typed config `config`, or None (a field the code sets)."""
    return FILLS.get((config.__name__, name))


def validate(config: Any) -> None:
    """UsageError, naming the flag, for the first field of a typed config whose value its row refuses (a config
    made directly, not by `configure`: tests, benchmarks)."""
    for f in fields(config):
        row = row_of(type(config), f.name)
        value = getattr(config, f.name)
        if row is not None and value is not None:
            row.checked(value)


def configure(config: type, values: Mapping[str, Any], *, strict: bool = False, **own: Any) -> Any:
    """A typed config from option values: each field a row fills takes `values[row's name]` (or by the field's
    name), checked and parsed by the row, and its default where the value is absent or None; a field that is a
    typed config itself (RunConfig.engine_options) is made from the same values; `own` sets fields directly (the
    code's: a run's inputs). `values` are keywords' values (Converter(dpi=300)) or values settled already
    (`settle`'s, parsed). With `strict`, a name in `values` that fills no field (a field the code sets, named,
    is taken as it is) is a UsageError."""
    used: set[str] = set()
    made = _configure(config, values, own, used)
    if strict and set(values) - used:
        raise UsageError(f"unknown option(s) {', '.join(sorted(set(values) - used))}")
    return made


def _configure(config: type, values: Mapping[str, Any], own: Mapping[str, Any], used: set[str]) -> Any:
    kwargs = dict(own)
    for f in fields(config):
        if f.name in kwargs:
            continue
        row = row_of(config, f.name)
        names = [f.name] if row is None else list(dict.fromkeys((row.name, f.name)))
        given = [n for n in names if values.get(n) is not None]
        used.update(n for n in names if n in values)
        if f.default_factory in CONFIGS.values() and not given:  # a typed config in this one
            kwargs[f.name] = _configure(f.default_factory, values, {}, used)
        elif given:
            kwargs[f.name] = values[given[0]] if row is None else row.checked(values[given[0]])
    return config(**kwargs)


def with_values(config: Any, values: Mapping[str, Any]) -> Any:
    """`config` with the fields `values` names (by a row's name or its field's) set, each checked and parsed by
    its row; UsageError for a name that fills none of its fields."""
    rows = {n: o for o in OPTIONS if o.to == type(config).__name__ for n in (o.name, o.field)}
    unknown = set(values) - set(rows)
    if unknown:
        raise UsageError(f"unknown option(s) {', '.join(sorted(unknown))}; choose from "
                         f"{', '.join(sorted(set(rows)))}")
    return dataclasses.replace(config, **{rows[n].field: rows[n].checked(v) for n, v in values.items()})


@typed_config
class EngineOptions:
    """What an engine reads: the rows of OPTIONS to ENGINE_OPTIONS, then the pipeline's settings for it. The rows
    every engine may read are declared here to document them; each engine's own rows (its plug-in's,
    engines/NAME/plugin.py: rapidocr's model_size, reread_below, int8, runtime; deepseek-ocr2's model, dtype,
    prompt, max_new_tokens, schedule, quantize, backend) get their fields from typed_config."""

    threads: int | None = _default("threads")  # CPU threads (rapidocr: tasks in parallel; torch on a CPU)
    keep_furniture: bool = _default("keep_furniture")  # keep running heads and feet, page numbers, margin stamps
    debug_layout: Path | None = _default("debug_layout")  # a folder: a picture of each page's layout
    # -- set by the pipeline (pipeline/service.py) or by benchmarks, not by users --
    min_new_tokens: int = by_code(0)  # benchmarks: equal to max_new_tokens, every page gets exactly that many
    buffer_pages: int = by_code(0)  # pages whose preprocessed inputs may wait in buffers at once; 0: the default
    pin_memory: bool | None = by_code(None)  # page-locked host buffers; None: when CUDA is available
    batch_pages: int = by_code(0)  # most pages one batch can hold (device buffers are sized for it); 0: grow
    reserve_buffers: bool = by_code(True)  # make every buffer at once (a fixed cap); False: as pages need them
    page_lengths: tuple[tuple[str, int], ...] = by_code(())  # benchmarks: (file name, tokens) each page ends after

    def __post_init__(self) -> None:
        validate(self)


class _Batching:
    """What ServiceConfig and RunConfig derive from their batching fields (max_batch, max_wait_ms, starve_ms)."""

    @property
    def max_batch_auto(self) -> bool:
        """--max-batch auto: the cap grows while throughput gains (gpu/throughput.py)."""
        return getattr(self.max_batch, "auto", False)

    @property
    def max_wait_s(self) -> float:
        return self.max_wait_ms / 1000.0

    @property
    def starve_s(self) -> float:
        return self.starve_ms / 1000.0


@rows_as_fields(engine_side)
class ServiceConfig(_Batching):
    """The engine side of a run, kept by a Converter across runs (pipeline/service.py): the engine's options and
    RunConfig's fields of the engine side (the rows to RUN_CONFIG whose scope has ENGINE: engine_side), of the
    same names: RunConfig.service copies them. A row added there is a field here too (_with_fields)."""

    engine: str = _default("engine")
    engine_options: EngineOptions = field(default_factory=EngineOptions)
    devices: str = _default("devices")
    max_batch: int = MAX_BATCH_START  # the first cap (a BatchCap from --max-batch: `.auto`, it grows)
    max_wait_ms: int = _default("max_wait_ms")
    workers: int = 4  # decode threads feeding it (sizes the buffers)
    ray: str | None = None
    starve_ms: int = _default("starve_ms")  # the longest a bulk page waits while interactive pages come
    stall_timeout: float = _default("stall_timeout")  # a device with pages in hand and none finished for this long


@typed_config
class RunConfig(_Batching):
    """One run: the rows of OPTIONS to RUN_CONFIG (a field declared here documents it, or gives a default of its
    own to direct construction; the others come from their rows: see typed_config), and the engine's."""

    inputs: tuple[str, ...] = by_code()
    output: Path
    engine: str = _default("engine")
    engine_options: EngineOptions = by_code(factory=EngineOptions)
    devices: str = _default("devices")  # resolved when the run starts (gpu/device.py)
    dpi: int = _default("dpi")
    # The first cap on pages per batch (rows decoding at once); --max-batch auto (a BatchCap, `auto`): the cap
    # grows while throughput gains (gpu/throughput.py). Made directly (tests, benchmarks), a fixed 8.
    max_batch: int = MAX_BATCH_START
    max_wait_ms: int = _default("max_wait_ms")
    workers: int = field(default_factory=default_workers)  # --workers; None (its default): up to 4
    pages: PageSelection | None = None
    shard: Shard | None = None  # --shard I/N: only this part of the sources (its own lock and manifest)
    force: bool = False
    null_separated: bool = False  # `-` reads NUL-separated paths (find -print0)
    text_layer: str = _default("text_layer")  # auto (use it when usable), off (always OCR), only (never OCR)
    ray: str | None = None  # convert on a Ray cluster: auto, local, or the head's address (pipeline/ray_driver.py)
    ray_workers: int | None = None  # actors on it; None: one per GPU, or per `threads` CPUs
    max_pixels: int = _default("max_pixels")  # an image frame larger than this fails as a page (images.py)
    # The watchdog: pages in flight and none finished for this long → they fail, the run stops (exit 8). Long
    # enough for an 8,192-token page and its one retry on a slow GPU (a T4 decodes ~10 tokens/s per row).
    stall_timeout: float = _default("stall_timeout")
    # What a run writes besides each page's Markdown (issue 22): `formats` ("md", or "md", "json": NAME.json beside
    # each page, pagejson.py), `join` (one NAME.md per multi-page document, pipeline/outputs.py), `review_below`
    # (pages whose confidence score is lower are listed in the summary: --json's "review").
    formats: tuple[str, ...] = _default("format")
    join: bool = _default("join")
    review_below: float | None = _default("review_below")

    def __post_init__(self) -> None:
        if not self.inputs:
            raise UsageError("no inputs given")
        validate(self)
        if self.ray_workers is not None and not self.ray:
            raise UsageError("--ray-workers needs --ray")
        if self.ray:  # the rows whose values --ray refuses (OPTIONS: under_ray)
            for part in (self, self.engine_options):
                for f in fields(part):
                    o = row_of(type(part), f.name)
                    if o is not None and (why := o.ray_problem(getattr(part, f.name))) is not None:
                        raise UsageError(f"{o.flag} with --ray: {why}")

    @classmethod
    def build(cls, inputs: Iterable[str], output: str | os.PathLike, **values: Any) -> "RunConfig":
        """From options by their names (rows of OPTIONS, to this config or to EngineOptions: `pages` may be text,
        `max_batch` a number or auto, `workers` None for the default), and fields the code sets (EngineOptions'
        `min_new_tokens`...) by theirs. UsageError for a name that is neither."""
        return configure(cls, values, strict=True, inputs=tuple(inputs), output=Path(output))

    def rerun(self, inputs: Iterable[str], output: str | os.PathLike, **values: Any) -> "RunConfig":
        """This configuration for another run: its inputs, its output, and its own options (`values`, by a row's
        name or its field's: pages, force, null_separated, ...), each checked and parsed by its row."""
        unknown = set(values) - {n for o in RUN_OWN for n in (o.name, o.field)}
        if unknown:  # the engine's side is the Converter's, kept across runs
            raise UsageError(f"unknown option(s) of a run {', '.join(sorted(unknown))}; choose from "
                             f"{', '.join(o.field for o in RUN_OWN)}")
        return with_values(dataclasses.replace(self, inputs=tuple(inputs), output=Path(output)), values)

    @property
    def service(self) -> ServiceConfig:
        """The engine side: ServiceConfig's fields, copied by name."""
        return ServiceConfig(**{f.name: getattr(self, f.name) for f in fields(ServiceConfig)})


# A run's own options (not the engine's, which a Converter keeps across runs): Converter.convert's keywords, by
# their fields' names (pages, force, null_separated, formats, ...).
RUN_OWN = tuple(o for o in OPTIONS if o.to == RUN_CONFIG and ENGINE not in o.scope and o.name != "output")


@typed_config
class Report:
    """How a command reports on the terminal: the rows to REPORT (--json, --quiet, -v, --no-progress,
    --log-every, --metrics-file), every field made from its row."""
