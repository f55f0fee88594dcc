"""The one table of options (config.OPTIONS): every row's flag and variable, generated; the flag wins; a switch's
opposite undoes its variable; a refused variable names itself. The commands are parsed by typer as the real ones
are (their parameters made by the same decorator), with a probe in place of the command's body."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from conftest import draw_page, run_cli
from ocrbatch import cli, config
from ocrbatch.config import OPTIONS, RUN, SERVE

FLAGGED = [o for o in OPTIONS if o.scope & {RUN, SERVE}]


def sample(o: config.Option, other: bool = False):
    """A value the option allows that is not its default (`other`: a second, different one), as (flag's text,
    the value the command gets: parsed by the row, e.g. --pages 1-4 a PageSelection)."""
    text, value = _sample(o, other)
    return text, o.checked(value)


def _sample(o: config.Option, other: bool = False):
    if o.name == "engine":  # its choices are the engines registered (engines/catalog.py): two that run anywhere
        return ("fake-timed", "fake-timed") if other else ("fake", "fake")
    if o.allowed:
        value = [c for c in o.allowed if c != o.default][1 if other and len(o.allowed) > 2 else 0]
        if other and len(o.allowed) == 2:
            value = o.default
        return value, value
    if o.kind in ("int", "count"):
        base = o.default if o.default is not None else (o.least or 0) + 1
        value = base + (2 if other else 1)
        if o.most is not None and value > o.most:
            value = base - (2 if other else 1)
        return str(value), value
    if o.kind == "float":
        value = (o.default or 1.0) + (2.5 if other else 1.5)
        if o.most is not None and value > o.most:  # e.g. a score between 0 and 1
            value = o.most * (0.5 if other else 0.75)
        return str(value), value
    if o.kind == "switch":
        return None, not o.default
    if o.kind == "batch":
        return ("5", "5") if other else ("3", "3")
    if o.kind == "path":
        text = "/tmp/other" if other else "/tmp/one"
        return text, Path(text)
    text = {"pages": "2-3,7" if other else "1-4", "engine": "fake-timed" if other else "fake",
            "format": "md" if other else "md,json",
            "shard": "2/3" if other else "1/3"}.get(
        o.name, "other" if other else "one")
    return text, text


BAD = {"int": "abc", "count": "abc", "float": "abc", "switch": "maybe", "batch": "many"}


def bad_value(o: config.Option) -> str | None:
    if o.allowed:
        return "nope"
    if o.name == "pages":
        return "x-y"
    if o.name == "shard":
        return "0/3"
    if o.name == "token":
        return "  "
    if o.name == "format":
        return "docx"
    return BAD.get(o.kind)


def flag_args(o: config.Option, text) -> list[str]:
    if o.kind == "switch":
        return [o.flag]
    if o.kind == "count":
        return [o.flag] * int(text)
    return [o.flag, text]


def probe(scope: str):
    """A command taking the options of `scope` as the real one does; returns (app, the options it got)."""
    app = typer.Typer()
    got: dict = {}

    @app.command()
    @cli._with_options(scope)
    def command(*, options: dict) -> None:
        got.clear()
        got.update(options)

    @app.command()
    def other() -> None:  # two commands: typer then expects the command's name, as in the real app
        pass

    return app, got


def invoke(scope: str, args: list[str], env: dict[str, str] | None = None):
    app, got = probe(scope)
    clean = {o.env: None for o in OPTIONS}  # none of the caller's OCRBATCH_* variables
    result = CliRunner().invoke(app, ["command", *args], env={**clean, **(env or {})})
    return result, dict(got)


def scope_of(o: config.Option) -> str:
    return RUN if RUN in o.scope else SERVE


@pytest.mark.parametrize("o", FLAGGED, ids=lambda o: o.name)
def test_every_option_is_set_by_its_flag_or_its_variable_and_the_flag_wins(o):
    text, value = sample(o)
    result, got = invoke(scope_of(o), flag_args(o, text))
    assert result.exit_code == 0, result.output
    assert got[o.name] == value
    env_text = ("1" if value else "0") if o.kind == "switch" else text
    result, got = invoke(scope_of(o), [], env={o.env: env_text})
    assert result.exit_code == 0, result.output
    assert got[o.name] == value
    if o.kind != "switch":
        other_text, other = sample(o, other=True)
        assert other != value
        result, got = invoke(scope_of(o), flag_args(o, text), env={o.env: other_text})
        assert result.exit_code == 0, result.output
        assert got[o.name] == value  # the flag, not the variable
    result, got = invoke(scope_of(o), [], env={})
    assert got[o.name] == o.initial


@pytest.mark.parametrize("o", [o for o in FLAGGED if o.kind == "switch"], ids=lambda o: o.name)
def test_a_switchs_opposite_flag_undoes_its_variable(o):
    assert o.off and o.off != o.flag
    on = "0" if o.default else "1"
    result, got = invoke(scope_of(o), [], env={o.env: on})
    assert got[o.name] is not o.default
    result, got = invoke(scope_of(o), [o.off], env={o.env: on})
    assert result.exit_code == 0, result.output
    assert got[o.name] is o.default


@pytest.mark.parametrize("o", [o for o in FLAGGED if bad_value(o) is not None], ids=lambda o: o.name)
def test_a_refused_variable_names_the_variable_and_exits_2(o):
    raw = bad_value(o)
    result, got = invoke(scope_of(o), [], env={o.env: raw})
    assert result.exit_code == 2 and not got
    assert f"{o.env}={raw!r}: " in result.output and "Invalid value" not in result.output


def test_a_variable_out_of_range_names_the_variable_a_flag_names_the_flag():
    result, _ = invoke(RUN, [], env={"OCRBATCH_DPI": "20"})
    assert result.exit_code == 2 and "OCRBATCH_DPI='20': choose between 36 and 1200" in result.output
    result, _ = invoke(RUN, ["--dpi", "20"])
    assert result.exit_code == 2 and "--dpi 20: choose between 36 and 1200" in result.output
    result, _ = invoke(SERVE, [], env={"OCRBATCH_MAX_BATCH": "0"})
    assert result.exit_code == 2 and "OCRBATCH_MAX_BATCH='0': must be at least 1" in result.output


def test_a_variable_its_flag_overrides_is_not_read():
    result, got = invoke(RUN, ["--dpi", "300"], env={"OCRBATCH_DPI": "abc"})
    assert result.exit_code == 0 and got["dpi"] == 300
    from ocrbatch import Converter

    with Converter.from_env({"OCRBATCH_WORKERS": "none", "OCRBATCH_ENGINE": "fake"}, workers=1) as conv:
        assert conv._template.workers == 1


def test_the_commands_have_exactly_the_tables_flags_and_variables():
    command = typer.main.get_command(cli.app)
    aliases = {"alias_force_ocr"}  # table.ALIASES: --force-ocr, on both (--text-layer is a flag of both)
    for scope, name, own in ((RUN, "convert", {"inputs", *aliases}), (SERVE, "serve", aliases)):
        params = {p.name: p for p in command.commands[name].params}
        assert set(params) == {o.name for o in config.options(scope)} | own
        for o in config.options(scope):
            assert o.flag in params[o.name].opts and not params[o.name].envvar  # variables: read by the table
            if o.kind == "switch":
                assert params[o.name].secondary_opts == [o.off]
    assert {o.env for o in OPTIONS} == {"OCRBATCH_" + o.name.upper() for o in OPTIONS}


def test_the_real_command_line_reads_variables_and_the_opposite_flag(tmp_path):
    draw_page("x").save(tmp_path / "x.png")
    env = {"OCRBATCH_QUIET": "1", "OCRBATCH_ENGINE": "fake"}
    quiet = run_cli("convert", str(tmp_path / "x.png"), "-o", str(tmp_path / "a"), env=env)
    loud = run_cli("convert", str(tmp_path / "x.png"), "-o", str(tmp_path / "b"), "--no-quiet", env=env)
    assert quiet.returncode == loud.returncode == 0, loud.stderr
    assert quiet.stderr == "" and "pages" in loud.stderr  # the summary, which OCRBATCH_QUIET=1 left out
    bad = run_cli("convert", str(tmp_path / "x.png"), "-o", str(tmp_path / "c"), env={"OCRBATCH_DPI": "abc"})
    assert bad.returncode == 2
    assert bad.stderr.strip() == "ocrbatch: error: OCRBATCH_DPI='abc': a whole number is needed"
    missing = run_cli("convert", str(tmp_path / "x.png"), env={"OCRBATCH_OUTPUT": ""})
    assert missing.returncode == 2 and "-o/--output" in missing.stderr


def test_converter_keywords_are_the_tables_engine_rows_checked_by_the_table():
    from ocrbatch import Converter
    from ocrbatch.errors import UsageError

    for o in config.options(config.ENGINE):
        assert f"{o.name}=" in Converter.__doc__
    with pytest.raises(UsageError, match="unknown option"):
        Converter(engine="fake", output="x")  # a run's option, not the converter's
    with pytest.raises(UsageError, match=re.escape("--text-layer sideways: choose auto, off or only")):
        Converter(engine="fake", text_layer="sideways")
    with pytest.raises(UsageError, match=re.escape("OCRBATCH_WORKERS='0': must be at least 1")):
        Converter.from_env({"OCRBATCH_WORKERS": "0"})
    conv = Converter.from_env({"OCRBATCH_ENGINE": "fake", "OCRBATCH_MAX_BATCH": "auto", "OCRBATCH_STARVE_MS": "50"},
                              max_wait_ms=5)
    try:
        assert conv._template.max_batch == config.MAX_BATCH_START and conv._template.max_batch_auto
        assert conv._service_config.starve_s == 0.05 and conv._template.max_wait_ms == 5
    finally:
        conv.close()


def test_serve_takes_max_batch_auto_from_its_flag_or_variable(tmp_path, monkeypatch):
    pytest.importorskip("uvicorn")
    from test_serve import Server, png

    srv = Server(tmp_path / "flag", "--engine", "fake", "--max-batch", "auto")
    try:
        assert "max batch auto" in srv.log.read_text()
        r = srv.convert(png("auto"), filename="auto.png")
        assert r.status_code == 200 and r.json()["pages"][0]["status"] == "ok"
    finally:
        assert srv.stop() == 0
    monkeypatch.setenv("OCRBATCH_MAX_BATCH", "auto")
    srv = Server(tmp_path / "variable", "--engine", "fake")
    try:
        assert "max batch auto" in srv.log.read_text()
    finally:
        assert srv.stop() == 0


RUN_ROWS = [o for o in OPTIONS if RUN in o.scope]


@pytest.mark.parametrize("o", RUN_ROWS, ids=lambda o: o.name)
def test_every_option_works_the_same_under_ray_or_is_refused_there_with_exit_2(o, tmp_path):
    """The table's under_ray column: a row that --ray refuses is a usage error (exit 2, naming both flags, before
    Ray is started); a row without one is taken with --ray as without it."""
    from ocrbatch.config import EngineOptions, RunConfig
    from ocrbatch.errors import UsageError

    text, value = sample(o)
    if o.under_ray is not None:
        if o.name == "devices":
            text = value = "0,1"
        assert o.ray_problem(value) is not None and o.ray_problem(o.default) is None
        draw_page("x").save(tmp_path / "a.png")
        r = run_cli("convert", str(tmp_path / "a.png"), "-o", str(tmp_path / "out"), "--ray", "local",
                    *flag_args(o, text))
        assert r.returncode == 2 and o.flag in r.stderr and "--ray" in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
        return
    own = {f.name for f in config.fields(RunConfig)} | {f.name for f in config.fields(EngineOptions)}
    if o.name not in own or o.name in ("ray", "output"):
        return  # a reporting option (--json, --quiet...): the driver's, with Ray or without
    try:
        RunConfig.build(("in",), tmp_path / "out", ray="local", **{o.name: value})
    except UsageError as exc:  # pragma: no cover - the table says it works under Ray
        pytest.fail(f"{o.flag} {text!r} refused with --ray, but its row has no under_ray: {exc}")


# -- the typed configs, made from the table -----------------------------------------------------------------
def typed_configs() -> dict[str, type]:
    from ocrbatch.serve.config import ServeConfig  # noqa: F401 - defining it registers it

    assert set(config.CONFIGS) == set(config.CONFIG_NAMES)
    return config.CONFIGS


def test_every_row_fills_exactly_one_field_of_a_typed_config_and_every_other_field_is_the_codes():
    configs = typed_configs()
    for o in OPTIONS:
        holders = [name for name, cls in configs.items() if o.field in {f.name for f in config.fields(cls)}]
        assert holders == [o.to], f"{o.name}: its field {o.field!r} is in {holders}, not only in {o.to}"
    for name, cls in configs.items():
        for f in config.fields(cls):
            row = config.row_of(cls, f.name)
            by_code = f.metadata == config.BY_CODE
            assert (row is None) == by_code, f"{name}.{f.name}: a field is a row's, or marked by_code, not both"
            if row is None or f.default is config.MISSING or (name, f.name) == ("RunConfig", "max_batch"):
                continue  # RunConfig made directly (tests, benchmarks): a fixed cap of 8; the table's is auto
            assert f.default == row.initial, f"{name}.{f.name}: default {f.default!r}, its row's {row.initial!r}"
    # the engine side a Converter keeps: its engine's options and RunConfig's engine-side fields, copied by name
    assert {f.name for f in config.fields(config.ServiceConfig)} == \
        {"engine_options"} | {o.field for o in OPTIONS if o.to == config.RUN_CONFIG and config.ENGINE in o.scope}
    built = config.RunConfig.build(("x",), "out", max_batch="auto", starve_ms=70, stall_timeout=9.0, workers=3)
    service = built.service
    assert (service.max_batch, service.max_batch_auto, service.starve_s, service.stall_timeout, service.workers) \
        == (config.MAX_BATCH_START, True, 0.07, 9.0, 3)


def _field(o: config.Option, made) -> object:
    """The value of `o`'s field in `made` (a RunConfig: an engine row's is in its engine_options)."""
    if o.to == config.ENGINE_OPTIONS and isinstance(made, config.RunConfig):
        made = made.engine_options
    return getattr(made, o.field)


NEEDS = {"ray_workers": {"ray": "auto"}}  # a row whose sample needs another's: --ray-workers needs --ray


def _through_cli(scope: str, args: list[str], env: dict[str, str]) -> dict[str, object]:
    """The typed configs that convert's (or serve's) options make, as cli.py makes them."""
    from ocrbatch import Converter
    from ocrbatch.serve.config import ServeConfig

    result, got = invoke(scope, args, env)
    assert result.exit_code == 0, result.output
    made = {config.REPORT: config.configure(config.Report, got)}
    if scope == SERVE:
        made[config.SERVE_CONFIG] = config.configure(ServeConfig, got, window=2 * got["max_batch"])
    with Converter(**cli._converter_options(got)) as conv:
        run = conv.config.rerun(("x",), "out", **cli._run_options(got)) if scope == RUN else conv.config
    made[config.RUN_CONFIG] = made[config.ENGINE_OPTIONS] = run
    return made


@pytest.mark.parametrize("o", [o for o in OPTIONS if o.name != "output"], ids=lambda o: o.name)
def test_a_rows_flag_variable_and_keywords_reach_its_field_with_one_parsed_value(o):
    """Every way in (the flag, the variable, the Converter's keyword or convert's, RunConfig.build, the
    variable read by Converter.from_env) fills the row's one field with the same value, parsed by the row."""
    from ocrbatch import Converter

    text, value = sample(o)
    raw = _sample(o)[1]  # as a Python caller gives it: text, a number, a path
    assert value != o.initial
    needs = NEEDS.get(o.name, {})
    reached: dict[str, object] = {}
    env_text = ("1" if value else "0") if o.kind == "switch" else text
    if o.scope & {RUN, SERVE}:
        scope = scope_of(o)
        extra = [a for n, v in needs.items() for a in (config.OPTION[n].flag, v)]
        made = _through_cli(scope, [*extra, *flag_args(o, text)], {})
        reached["flag"] = _field(o, made[o.to])
        made = _through_cli(scope, [], {o.env: env_text, **{config.OPTION[n].env: v for n, v in needs.items()}})
        reached["variable"] = _field(o, made[o.to])
    if config.ENGINE in o.scope:
        with Converter(**{"engine": "fake", **needs, o.name: raw}) as conv:
            reached["Converter keyword"] = _field(o, conv.config)
        env = {"OCRBATCH_ENGINE": "fake", o.env: env_text, **{config.OPTION[n].env: v for n, v in needs.items()}}
        with Converter.from_env(env) as conv:
            reached["Converter.from_env"] = _field(o, conv.config)
    if o in config.RUN_OWN:
        with Converter(engine="fake") as conv:
            reached["convert keyword"] = _field(o, conv.config.rerun(("x",), "out", **{o.field: raw}))
    if o.to in (config.RUN_CONFIG, config.ENGINE_OPTIONS):
        reached["RunConfig.build"] = _field(o, config.RunConfig.build(("x",), "out", **needs, **{o.name: raw}))
    assert reached and all(v == value and type(v) is type(value) for v in reached.values()), (value, reached)


def test_max_batch_is_parsed_once_by_its_row_into_one_field():
    cap = config.OPTION["max_batch"].checked("auto")
    assert isinstance(cap, config.BatchCap) and cap == config.MAX_BATCH_START and cap.auto and cap.text == "auto"
    assert config.OPTION["max_batch"].checked(cap) is cap  # a value parsed already is kept
    import pickle

    assert pickle.loads(pickle.dumps(cap)).auto and pickle.loads(pickle.dumps(config.BatchCap(3))) == 3
    made = config.RunConfig.build(("x",), "out", max_batch="12")
    assert made.max_batch == 12 and not made.max_batch_auto and not made.service.max_batch_auto
    with pytest.raises(config.UsageError, match="unknown option"):
        config.RunConfig.build(("x",), "out", max_batchh=3)
    from ocrbatch import Converter

    with Converter(engine="fake") as conv, pytest.raises(config.UsageError, match="unknown option"):
        conv.convert(["x"], "out", dpi=300)  # the engine side is the Converter's, not a run's
