"""Parameters stated once (dedebate/lab/params.py): every experiment field is declared with
``param`` (type, default, doc, range), every integer is bounded, the presets and the shipped
config files satisfy the ranges, and a config resolves as defaults < size preset < file <
command line."""

from __future__ import annotations

import dataclasses
import math
import re
import typing

import pytest
import yaml

from dedebate import cli
from dedebate.lab.config import (
    SIZES,
    ConfigError,
    default_config,
    load_config,
    resolve,
)
from dedebate.lab.config_docs import render_config_docs, render_config_file
from dedebate.lab.params import config_dataclass, field_range, item_type, param
from dedebate.lab.registry import discover_experiments
from tests.conftest import REPO

EXPERIMENTS = discover_experiments().experiments


def test_all_eight_experiments_are_registered():
    assert len(EXPERIMENTS) == 8, sorted(EXPERIMENTS)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_every_field_is_a_bounded_param_and_every_preset_is_in_range(name):
    module = EXPERIMENTS[name]
    hints = typing.get_type_hints(module.Config)
    for f in dataclasses.fields(module.Config):
        rng = field_range(f)
        assert rng is not None and f.metadata.get("doc"), f"{name}.{f.name}: not a param()"
        seq, inner = item_type(hints[f.name])
        if inner in (int, float):  # a float without one ran lr_a=3e38 into NaN claims
            assert math.isfinite(rng.upper), f"{name}.{f.name}: a number without a maximum"
            low = rng.ge if rng.ge is not None else rng.gt
            assert low is not None or rng.choices, f"{name}.{f.name}: a number without a minimum"
        if seq:
            assert rng.max_len is not None, f"{name}.{f.name}: a list without a maximum length"
    # The defaults, and both presets, built directly and through the lab's validation.
    assert module.Config() == default_config(module).params
    for size in ("quick", "full"):
        assert default_config(module, size).params == module.Config(**module.SIZES[size])


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_config_file_is_the_rendered_docs_and_sets_nothing(name):
    module = EXPERIMENTS[name]
    text = (REPO / "configs" / f"{name}.yaml").read_text()
    body = render_config_file(module)
    header, sep, rest = text.partition("\nexperiment:")
    assert sep and "experiment:" + rest == body, (
        f"configs/{name}.yaml is out of date: keep its comment header and replace everything "
        f"from 'experiment:' on with the output of `dedebate config {name} --yaml`"
    )
    assert all(not ln.strip() or ln.startswith("#") for ln in header.splitlines())
    path = REPO / "configs" / f"{name}.yaml"
    for size in SIZES:  # the file sets no params: each size is exactly its preset
        assert load_config(path, {name: module}, [f"size={size}"]) == default_config(module, size)
    # Every documented value, uncommented, is the field's default.
    fields = [f.name for f in dataclasses.fields(module.Config)]
    pattern = re.compile(rf"^  # ((?:{'|'.join(fields)}): .*)$", re.M)
    uncommented = pattern.sub(r"  \1", text)
    assert len(pattern.findall(text)) == len(fields)
    assert yaml.safe_load(uncommented)["params"].keys() == set(fields)
    assert load_config_text(uncommented, module).params == module.Config()


def load_config_text(text, module):
    return resolve(yaml.safe_load(text), {module.NAME: module})


def test_config_shows_each_range_and_yaml_prints_the_file_body(capsys):
    text = render_config_docs(EXPERIMENTS["machines"])
    assert "params.T: an even integer in [4, 18] = 16  -- steps of every fixture" in text
    assert (
        "params.eps: a list (each a number in (0, 1]; 1 to 64 items, distinct) = "
        "(0.001, 0.01, 0.05)" in text
    )
    assert cli.main(["config", "machines", "--yaml"]) == 0
    assert capsys.readouterr().out == render_config_file(EXPERIMENTS["machines"])


# ----------------------------------------------------------------------------- precedence

MACHINES = EXPERIMENTS["machines"]


def _machines(params: str, size: str, overrides=()):
    raw = yaml.safe_load(f"experiment: machines\nsize: {size}\nparams: {params}\n")
    return resolve(raw, {"machines": MACHINES}, list(overrides)).params


def test_file_beats_preset_and_command_line_beats_file():
    quick = MACHINES.SIZES["quick"]
    assert _machines("{}", "quick") == MACHINES.Config(**quick)
    # the file's T wins over the quick preset; the preset still sets what the file leaves out
    assert _machines("{T: 6}", "quick") == MACHINES.Config(**{**quick, "T": 6})
    # the command line wins over the file
    assert _machines("{T: 6}", "quick", ["params.T=8"]) == MACHINES.Config(**{**quick, "T": 8})
    # and over the preset
    assert _machines("{}", "full", ["params.trials=100"]).trials == 100


def test_over_limit_count_fails_fast_naming_the_max(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", "experiments")
    out = tmp_path / "runs"
    code = cli.main(
        [
            "run",
            str(REPO / "configs" / "machines.yaml"),
            f"output_dir={out}",
            "params.trials=1000000000000",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == (
        "dedebate: error: config error: params.trials=1000000000000: "
        "must be an integer in [100, 10000000]"
    )
    assert not out.exists()  # nothing was started, so nothing was allocated
    with pytest.raises(
        ConfigError,
        match=r"^params\.obf_trees=1000000000: must be an integer "
        r"in \[1, 4096\]$",
    ):
        resolve(
            {"experiment": "prover_estimator", "size": "quick", "params": {"obf_trees": 10**9}},
            {"prover_estimator": EXPERIMENTS["prover_estimator"]},
        )


# ----------------------------------------------------------------------------- the helper


@config_dataclass
class _Demo:
    n: int = param(4, "a count", ge=1, le=8, multiple_of=2)
    xs: tuple[float, ...] = param((0.5,), "rates", gt=0, lt=1, min_len=1, max_len=2)
    kind: str = param("a", "a choice", choices=("a", "b"))
    x: float = param(0.0, "any finite number")

    def __post_init__(self):
        if self.kind == "b" and self.n != 2:
            raise ValueError(f"kind={self.kind!r}: needs n=2")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 3}, "n=3: must be an even integer in [1, 8]"),
        ({"n": 10}, "n=10: must be an even integer in [1, 8]"),
        ({"n": True}, "n=True: must be an even integer in [1, 8]"),
        ({"xs": ()}, "xs=[]: must list 1 to 2 items, distinct"),
        ({"xs": (0.5, 0.5)}, "xs=[0.5, 0.5]: the items must be distinct (item 1 repeats item 0)"),
        ({"xs": (0.5, 1.0)}, "xs=[0.5, 1.0]: each item must be a number in (0, 1) (item 1 is 1.0)"),
        ({"kind": "c"}, "kind='c': must be one of 'a', 'b'"),
        ({"x": math.inf}, "x=inf: must be a finite number"),
        ({"kind": "b"}, "kind='b': needs n=2"),  # the class's own relational check still runs
    ],
)
def test_direct_construction_checks_ranges_then_relations(kwargs, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        _Demo(**kwargs)
    assert _Demo(n=2, kind="b").kind == "b"


@pytest.mark.parametrize(
    ("name", "override"),
    [
        ("stochastic_debate", "params.Ts=[8, 8]"),  # 4x the Monte-Carlo rows, 1/4 their level
        ("ogd_estimator", "params.sound_provers=[honest, honest]"),
        ("machines", "params.T=9"),  # majority needs T - 1 odd: it crashed after starting
    ],
)
def test_repeated_list_items_and_odd_machine_steps_are_refused(name, override):
    with pytest.raises(ConfigError, match=re.escape(override.split("=")[0] + "=")):
        resolve({"experiment": name}, EXPERIMENTS, [override])
    assert resolve(  # what layer widths may repeat
        {"experiment": "ogd_estimator"}, EXPERIMENTS, ["params.net_hidden=[8, 8]"]
    ).params.net_hidden == (8, 8)


def test_a_dynamic_list_axis_of_two_lengths_is_a_config_error():
    """It failed after the sweep folder was made, blaming the experiment's DYNAMIC."""
    sweep = {"seeds": 1, "axes": {"eps": [[0.1], [0.1, 0.2]]}}
    with pytest.raises(ConfigError, match=r"^sweep\.axes\.eps\[1\]=\[0\.1, 0\.2\]: 2 items"):
        resolve({"experiment": "machines", "sweep": sweep}, EXPERIMENTS)
    sweep["axes"] = {"eps": [[0.1], [0.2]]}
    assert resolve({"experiment": "machines", "sweep": sweep}, EXPERIMENTS).sweep is not None


def test_config_yaml_round_trip_of_a_resolved_real_config(tmp_path):
    from dedebate.lab.config import dump_yaml

    cfg = default_config(MACHINES, "quick")
    path = tmp_path / "config.yaml"
    path.write_text(dump_yaml(cfg))
    # a run directory's config.yaml writes every param: resolving it again (resume) is a no-op
    assert load_config(path, {"machines": MACHINES}) == cfg
    assert "\n  T: 8\n" in path.read_text()
