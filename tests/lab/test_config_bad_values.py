"""Config values are the values the user typed, or a one-line error: YAML 1.2 core-schema scalars
(no octal ``010``, no sexagesimal ``1:30``, no ``yes``/``off`` booleans), a ``memory_limit`` of
at most 2^63 bytes, no NUL character in a path or a W&B name, and no float that float32 would
compute as 0. The shipped configs and every experiment's defaults and presets are unchanged."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import yaml

from dedebate import cli
from dedebate.lab import config_yaml
from dedebate.lab.config import (
    SIZES,
    ConfigError,
    coerce,
    default_config,
    dump_yaml,
    load_config,
    load_yaml_text,
    parse_yaml,
    read_yaml,
    resolve,
)
from dedebate.lab.config_schema import parse_limit
from dedebate.lab.registry import discover_experiments
from tests.conftest import REPO
from tests.fakes import assert_one_line_error

EXPERIMENTS = discover_experiments().experiments
MACHINES = REPO / "configs" / "machines.yaml"
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
SWEEPS = sorted((REPO / "configs" / "sweeps").glob("*.yaml"))
NINES = "9" * 400


def same(a, b) -> bool:
    """Equal and of the same types throughout (1, 1.0 and True are three different values)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def machines(*overrides: str):
    return load_config(MACHINES, EXPERIMENTS, list(overrides))


def one_line_error(capsys, code, *needles):
    """The command's stderr (read from ``capsys``) is one refusal line holding every needle."""
    assert_one_line_error(code, capsys.readouterr().err, *needles)


# ----------------------------------------------------------------------------- 1: YAML 1.2 scalars


@pytest.mark.parametrize(
    "text, want",
    [
        ("010", 10),  # YAML 1.1: 8 (octal); a leading zero is decimal
        ("0100", 100),
        ("08", 8),
        ("-007", -7),
        ("+12", 12),
        ("0o17", 15),
        ("0x1F", 31),
        ("1:30", "1:30"),  # YAML 1.1: 90 (sexagesimal)
        ("1:00", "1:00"),
        ("1:30.5", "1:30.5"),
        ("1_000", "1_000"),  # YAML 1.1: 1000; YAML 1.2 has no digit separators
        ("0b101", "0b101"),
        ("-0x1F", "-0x1F"),
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("N", "N"),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("tRUE", "tRUE"),
        ("1.5", 1.5),
        ("1e3", 1000.0),  # YAML 1.1: the string '1e3'
        ("1E-3", 0.001),
        ("-.5", -0.5),
        ("1.", 1.0),
        ("1.0e-05", 1e-05),
        (".inf", math.inf),
        ("-.Inf", -math.inf),
        ("+.INF", math.inf),
        (".nan", math.nan),
        (".NaN", math.nan),
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a datetime.date
        ("=", "="),
        ("~", None),
        ("null", None),
        ("[010, 1:30, off, 1e3]", [10, "1:30", "off", 1000.0]),
        ("{seed: 010, mode: off}", {"seed": 10, "mode": "off"}),
        ("'010'", "010"),
        ("!!int 010", 10),
        ("!!float 3", 3.0),
        ("!!str 010", "010"),
    ],
)
def test_scalars_resolve_as_yaml_1_2_core_schema(text, want):
    assert same(parse_yaml(text), want), (text, parse_yaml(text), want)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("!!int 1:30", "'1:30' is not an integer"),
        ("!!int 0b1", "'0b1' is not an integer"),
        ("!!float abc", "'abc' is not a float"),  # was: ValueError traceback
        ("!!bool maybe", "'maybe' is not a boolean (true or false)"),  # was: KeyError
        ("!!bool yes", "'yes' is not a boolean"),
    ],
)
def test_explicit_tags_outside_the_core_schema_are_one_line_errors(text, problem):
    with pytest.raises(ConfigError, match=r"^x\.yaml: invalid YAML at line 1, column 1: ") as e:
        load_yaml_text(text, "x.yaml")
    assert problem in str(e.value) and "\n" not in str(e.value)


def test_overrides_and_files_get_the_values_typed(tmp_path):
    cfg = machines("seed=010", "params.trials=0100", "params.high=True")
    assert (cfg.seed, cfg.params.trials, cfg.params.high) == (10, 100, True)
    assert machines("seed=0x10").seed == 16
    with pytest.raises(ConfigError, match=r"^seed='1:30': expected an integer$"):
        machines("seed=1:30")
    with pytest.raises(
        ConfigError,
        match=r"^tracking\.mode='off': expected one of 'auto', 'offline', 'online', 'disabled'$",
    ):
        machines("tracking.mode=off")
    with pytest.raises(ConfigError, match=r"^params\.high='yes': expected true or false$"):
        machines("params.high=yes")
    path = tmp_path / "c.yaml"
    path.write_text("experiment: machines\nseed: 1:00\n")  # ran as seed 60
    with pytest.raises(ConfigError, match=r"^seed='1:00': expected an integer$"):
        load_config(path, EXPERIMENTS)
    path.write_text("experiment: machines\nseed: 010\nparams:\n  trials: 0100\n")
    cfg = load_config(path, EXPERIMENTS)
    assert (cfg.seed, cfg.params.trials) == (10, 100)


def test_sexagesimal_override_is_a_one_line_cli_error(tmp_path, fake_env, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("experiment: fake_pass\n")
    one_line_error(capsys, cli.main(["run", str(path), "seed=1:30"]), "seed='1:30'", "integer")
    code = cli.main(["run", str(path), "tracking.mode=off"])
    one_line_error(capsys, code, "tracking.mode='off'", "'disabled'")


def test_loader_keeps_its_safety_limits():
    with pytest.raises(ConfigError, match="duplicate key 'a'"):
        load_yaml_text("a: 1\na: 010\n", "d.yaml")
    with pytest.raises(ConfigError, match="nodes once its aliases are expanded"):
        bomb = "a: &a [" + ",".join(["x"] * 50) + "]\n"
        for i in range(1, 6):
            bomb += f"{'abcdefg'[i]}: &{'abcdefg'[i]} [" + ",".join([f"*{'abcdefg'[i - 1]}"] * 50)
            bomb += "]\n"
        load_yaml_text(bomb, "b.yaml")
    with pytest.raises(ConfigError, match="nested deeper than"):
        load_yaml_text("[" * 100 + "]" * 100, "n.yaml")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_yaml_text("!!python/object/apply:os.system ['true']", "p.yaml")
    with pytest.raises(ConfigError, match="an integer of 101 digits"):
        load_yaml_text("n: " + "1" * 101, "i.yaml")
    assert load_yaml_text("base: &b {x: 1}\nother:\n  <<: *b\n  y: 2\n", "m.yaml") == {
        "base": {"x": 1},
        "other": {"x": 1, "y": 2},
    }


def _uncommented(text: str, module) -> str:
    """A shipped config with every documented ``# FIELD: value`` line of params uncommented."""
    fields = "|".join(f.name for f in dataclasses.fields(module.Config))
    return re.sub(rf"^  # ((?:{fields}): .*)$", r"  \1", text, flags=re.M)


@pytest.mark.parametrize("path", CONFIGS + SWEEPS, ids=lambda p: p.name)
def test_shipped_configs_read_as_under_yaml_1_1(path):
    text = path.read_text()
    assert same(load_yaml_text(text, str(path)), yaml.safe_load(text))
    assert same(read_yaml(path), yaml.safe_load(text))
    cfg = load_config(path, EXPERIMENTS)
    module = EXPERIMENTS[cfg.experiment]
    if path.parent.name == "configs":  # every documented value, uncommented, reads the same
        full = _uncommented(text, module)
        assert full != text and same(load_yaml_text(full, str(path)), yaml.safe_load(full))
        assert resolve(load_yaml_text(full, str(path)), EXPERIMENTS).params == module.Config()
        for size in SIZES:
            got = load_config(path, EXPERIMENTS, [f"size={size}"])
            assert got == default_config(module, size)


@pytest.mark.parametrize("path", CONFIGS + SWEEPS, ids=lambda p: p.name)
def test_run_directory_config_yaml_written_before_reads_back_the_same(path, tmp_path):
    # config.yaml files of existing runs were written by yaml.safe_dump (YAML 1.1): their ints,
    # floats, bools and quoted strings read back as written
    cfg = load_config(path, EXPERIMENTS)
    written = tmp_path / "config.yaml"
    written.write_text(dump_yaml(cfg))
    assert same(read_yaml(written), cfg.to_dict())
    assert load_config(written, EXPERIMENTS) == cfg


def test_dump_yaml_text_quotes_strings_either_yaml_version_reads_otherwise():
    data = {"s": ["1e3", "0o17", "08", "-.5", "off", "yes", "1:30", "2024-01-01", "x", "010"]}
    data["v"] = [1, -2, 0.5, 1e-5, 1e30, math.inf, True, False, None]
    text = config_yaml.dump_yaml_text(data, sort_keys=False)
    assert same(parse_yaml(text), data) and same(yaml.safe_load(text), data)


# ----------------------------------------------------------------------------- 2: memory_limit


@pytest.mark.parametrize(
    "value",
    [NINES, NINES + "G", NINES + ".5TiB", "9223372036854775809", 2**63 + 1, 10**50, "9300000TiB"],
)
def test_memory_limit_over_2_63_bytes_is_refused(value):
    with pytest.raises(
        ValueError, match=r"^memory_limit=.*: more than 2\^63 bytes, the largest limit \(use auto"
    ):
        parse_limit(value)


def test_memory_limit_sizes_are_exact_up_to_2_63_bytes():
    assert parse_limit(2**63) == parse_limit(str(2**63)) == 2**63
    assert parse_limit("8388608TiB") == 2**63
    assert parse_limit("0.5KiB") == 512
    assert parse_limit("1." + "0" * 5000 + "1G") == 10**9
    assert parse_limit("0." + "9" * 100 + "KiB") == 1023  # floor, not a rounded float


def test_huge_memory_limit_is_a_config_error_and_a_one_line_cli_error(fake_env, capsys):
    with pytest.raises(ConfigError, match=r"^memory_limit='9{70}.*: more than 2\^63 bytes"):
        machines(f"memory_limit={NINES}G")
    with pytest.raises(ConfigError, match=r"^memory_limit=9{60}: more than 2\^63 bytes"):
        machines(f"memory_limit={'9' * 60}")
    code = cli.main(["reproduce", "--memory-limit", NINES + "G"])
    one_line_error(capsys, code, "--memory-limit", "more than 2^63 bytes")


# ----------------------------------------------------------------------------- 3: NUL characters


@pytest.mark.parametrize(
    "key", ["output_dir", "tracking.project", "tracking.entity", "tracking.group"]
)
def test_nul_in_a_path_or_wandb_name_is_refused(key):
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}='a\\x00b': contains a NUL"):
        machines(f'{key}="a\\0b"')


def test_nul_in_output_dir_is_a_one_line_cli_error(tmp_path, fake_env, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("experiment: fake_pass\n")
    code = cli.main(["run", str(path), f'output_dir="{tmp_path}/a\\0b"'])
    one_line_error(capsys, code, "output_dir=", "NUL")
    assert not list(tmp_path.glob("a*"))


# ----------------------------------------------------------------------------- 4: float32 underflow


@pytest.mark.parametrize("value", [1e-50, -1e-50, 1e-39, 1.1754942e-38, 5e-324, "1e-50"])
def test_floats_float32_computes_as_0_are_refused(value):
    with pytest.raises(
        ConfigError, match=r"^x=.*: below float32's smallest normal number \(1\.2e-38\)"
    ):
        coerce(value, float, "x")


def test_float32_underflow_names_the_item_even_in_a_union(fake_registry):
    with pytest.raises(
        ConfigError,
        match=r"^params\.eps\[0\]=1e-50: below float32's smallest normal number \(1\.2e-38\), "
        "so it computes as 0$",
    ):
        machines("params.eps=[1.0e-50]")
    exps = fake_registry.experiments
    with pytest.raises(ConfigError, match=r"^params\.lr=1e-45: below float32's smallest normal"):
        resolve({"experiment": "fake_pass", "params": {"lr": 1e-45}}, exps)
    with pytest.raises(ConfigError, match=r"^params\.lr=1e\+39: expected a finite number"):
        resolve({"experiment": "fake_pass", "params": {"lr": 1e39}}, exps)
    assert coerce(1.1754943508222875e-38, float, "x") == 1.1754943508222875e-38
    assert coerce(0, float, "x") == 0.0 and coerce(-0.0, float, "x") == 0.0
    assert resolve({"experiment": "fake_pass", "params": {"lr": 1e-30}}, exps).params.lr == 1e-30


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_default_and_preset_is_a_float32_normal_or_zero(name):
    module = EXPERIMENTS[name]
    for size in SIZES:
        params = default_config(module, size).params  # refused here if any value were tiny
        for f in dataclasses.fields(params):
            values = getattr(params, f.name)
            for v in values if isinstance(values, (list, tuple)) else [values]:
                if isinstance(v, float):
                    assert v == 0 or abs(v) >= 1.1754943508222875e-38, (name, f.name, v)
