"""Config loading: every kind of bad input is one line, exit code 2, naming key, value and rule."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from dedebate import cli
from dedebate.lab.config import (
    ConfigError,
    RunConfig,
    TrackingConfig,
    config_hash_of,
    dump_yaml,
    load_config,
    parse_override,
    resolve,
)
from dedebate.lab.config_docs import render_config_docs
from tests.fakes import assert_one_line_error

GOOD = """\
experiment: fake_pass
seed: 3
size: quick
tracking: {mode: disabled}
params:
  p: 0.25
"""


@pytest.fixture
def cfg_file(tmp_path):
    def write(text: str = GOOD, name: str = "c.yaml"):
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


def run_cli(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- resolution order


def test_sizes_then_yaml_then_overrides(cfg_file, fake_registry):
    exps = fake_registry.experiments
    cfg = load_config(cfg_file(), exps)
    # SIZES["quick"] sets n=16, chunks=2; YAML sets p; Config default for the rest.
    assert (cfg.params.n, cfg.params.chunks, cfg.params.p, cfg.params.flag) == (16, 2, 0.25, False)
    cfg = load_config(
        cfg_file(),
        exps,
        [
            "params.n=10",
            "params.flag=true",
            "params.xs=[5,6,7]",
            "params.k=4",
            "params.lr=1e-3",
            "params.p=1",
            "seed=9",
        ],
    )
    assert cfg.params.n == 10 and cfg.params.chunks == 2 and cfg.params.flag is True
    assert cfg.params.xs == (5, 6, 7) and cfg.params.k == 4 and cfg.seed == 9
    # ints are accepted for floats; "1e-3" (a string to YAML 1.1) is accepted for a float
    assert cfg.params.lr == 0.001 and isinstance(cfg.params.p, float) and cfg.params.p == 1.0
    # size override from the command line changes which SIZES entry applies
    cfg = load_config(cfg_file(), exps, ["size=full"])
    assert (cfg.params.n, cfg.params.chunks) == (4096, 8)
    cfg = load_config(cfg_file(), exps, ["size=default"])
    assert cfg.params.n == 64


def test_config_yaml_round_trips_and_hash(cfg_file, fake_registry, tmp_path):
    exps = fake_registry.experiments
    cfg = load_config(cfg_file(), exps, ["params.xs=[3]", "params.label=x y", "params.k=null"])
    again = load_config(cfg_file(dump_yaml(cfg), "again.yaml"), exps)
    assert again == cfg
    assert again.config_hash() == cfg.config_hash() == config_hash_of(cfg.to_dict())
    assert len(cfg.config_hash()) == 64
    # result-determining keys change the hash; where results go does not
    assert load_config(cfg_file(), exps, ["seed=4"]).config_hash() != cfg.config_hash()
    moved = dataclasses.replace(cfg, output_dir="elsewhere", resume=True)
    assert moved.config_hash() == cfg.config_hash()


def test_tracking_mode_auto_follows_wandb_mode():
    assert TrackingConfig().effective_mode({}) == "offline"
    assert TrackingConfig().effective_mode({"WANDB_MODE": "online"}) == "online"
    assert TrackingConfig().effective_mode({"WANDB_MODE": "dryrun"}) == "offline"
    assert TrackingConfig().effective_mode({"WANDB_MODE": "disabled"}) == "disabled"
    # an explicit mode in the config wins over the environment
    assert TrackingConfig(mode="offline").effective_mode({"WANDB_MODE": "online"}) == "offline"


def test_parse_override_values():
    assert parse_override("params.n=10") == (("params", "n"), 10)
    assert parse_override("params.flag=true") == (("params", "flag"), True)
    assert parse_override("params.xs=[1,2]") == (("params", "xs"), [1, 2])
    assert parse_override("tracking.group=") == (("tracking", "group"), None)
    assert parse_override("params.s=a=b") == (("params", "s"), "a=b")


# ----------------------------------------------------------------------------- each bad input


@pytest.mark.parametrize(
    ("text", "overrides", "fragments"),
    [
        # unknown top-level key
        (
            GOOD + "colour: red\n",
            [],
            ["unknown key 'colour'", "allowed top-level keys", "experiment"],
        ),
        # a parameter written at the top level: the message says where it goes
        (GOOD, ["n=3"], ["unknown key 'n' (a parameter: write params.n=...)"]),
        # unknown params key (YAML and override)
        (GOOD + "  nn: 3\n", [], ["unknown key 'params.nn'", "allowed keys here", "chunks"]),
        (GOOD, ["params.nn=3"], ["unknown key 'params.nn'"]),
        # unknown tracking key
        (GOOD, ["tracking.modee=offline"], ["unknown key 'tracking.modee'"]),
        # a misspelt key: the nearest known one is named
        (GOOD, ["params.nn=3"], ["unknown key 'params.nn' (did you mean 'n'?)"]),
        (GOOD, ["seeed=3"], ["unknown key 'seeed' (did you mean 'seed'?)"]),
        (GOOD, ["tracking.mdoe=offline"], ["(did you mean 'mode'?)"]),
        (GOOD, ["sweep.axes.nn=[1,2]"], ["'sweep.axes.nn'", "(did you mean 'n'?)"]),
        # names W&B refuses, a blank output folder, strings that are not YAML numbers
        (GOOD, ["tracking.project=a/b"], ["project='a/b': must not contain any of / \\ #"]),
        (GOOD, ["tracking.project='   '"], ["tracking.project=", "must be 1 to 128 characters"]),
        (GOOD, [f"tracking.group={'g' * 129}"], ["must be 1 to 128 characters"]),
        (GOOD, ["output_dir='  '"], ["output_dir=", "must name a folder"]),
        (GOOD, ["params.p='\u0661'"], ["params.p='\u0661'", "expected a number"]),
        (GOOD, ["params.p='1_0'"], ["params.p='1_0'", "expected a number"]),
        # sweep blocks: huge batches, blank or repeated metric names
        (GOOD, ["sweep.seeds=2", "sweep.batch=1180591620717411303424"], ["must lie in [0, 2^31]"]),
        (GOOD, ["sweep.seeds=2", "sweep.metrics=[a, a]"], ["names must be distinct and not blank"]),
        (GOOD, ["sweep.seeds=2", "sweep.metrics=['']"], ["names must be distinct and not blank"]),
        # wrong types
        (GOOD, ["params.n=abc"], ["params.n='abc'", "expected an integer"]),
        (GOOD, ["params.n=2.5"], ["params.n=2.5", "expected an integer"]),
        (GOOD, ["params.n=true"], ["params.n=True", "expected an integer"]),
        (GOOD, ["params.flag=1"], ["params.flag=1", "expected true or false"]),
        (GOOD, ["params.p=high"], ["params.p='high'", "expected a number"]),
        (GOOD, ["params.label=3"], ["params.label=3", "expected a string"]),
        (GOOD, ["params.xs=[1,x]"], ["params.xs[1]='x'", "expected an integer"]),
        (GOOD, ["params.xs=5"], ["params.xs=5", "expected a list"]),
        (GOOD, ["params.k=1.5"], ["params.k=1.5", "an integer or null"]),
        (GOOD, ["params.kind=c"], ["params.kind='c'", "one of 'a', 'b'"]),
        (GOOD, ["seed=abc"], ["seed='abc'", "expected an integer"]),
        (GOOD, ["resume=maybe"], ["resume='maybe'", "true or false"]),
        (GOOD.replace("p: 0.25", "[1, 2]"), [], ["params=", "expected a mapping"]),
        # out of range, via the experiment's __post_init__ and RunConfig's own checks
        (GOOD, ["params.n=-1"], ["params.n=-1", "must be >= 1"]),
        (GOOD, ["params.p=1.5"], ["params.p=1.5", "probability in [0, 1]"]),
        (GOOD, ["seed=-1"], ["seed=-1", "[0, 2^32)"]),
        # bad literals for size and tracking mode
        (
            GOOD.replace("size: quick", "size: huge"),
            [],
            ["size='huge'", "one of 'quick', 'default', 'full'"],
        ),
        (GOOD, ["tracking.mode=cloud"], ["tracking.mode='cloud'", "'offline'", "'disabled'"]),
        # experiment name
        (
            GOOD.replace("fake_pass", "nope"),
            [],
            ["experiment='nope'", "unknown experiment", "fake_pass"],
        ),
        (GOOD.replace("experiment: fake_pass\n", ""), [], ["missing key 'experiment'"]),
        # malformed overrides
        (GOOD, ["paramsn10"], ["malformed override 'paramsn10'", "key.sub=value"]),
        (GOOD, ["=3"], ["malformed override"]),
        (GOOD, ["params..n=3"], ["malformed override"]),
        (GOOD, ["params.xs=[1,"], ["malformed override", "not valid YAML"]),
        (GOOD, ["seed.x=1"], ["unknown key 'seed.x'", "'seed' is a value"]),
        # not YAML, not a mapping
        ("experiment: [unclosed\n", [], ["invalid YAML", "line"]),
        ("- just\n- a list\n", [], ["must be a mapping"]),
    ],
)
def test_bad_config_exits_2_with_one_line(text, overrides, fragments, cfg_file, fake_env, capsys):
    path = cfg_file(text)
    code, _, err = run_cli(["run", str(path), *overrides], capsys)
    assert_one_line_error(code, err, "config error", *fragments)


def test_missing_file_and_bad_command_lines(tmp_path, fake_env, capsys):
    code, _, err = run_cli(["run", str(tmp_path / "nope.yaml")], capsys)
    assert_one_line_error(code, err, "config file not found", "nope.yaml")
    code, _, err = run_cli(["frobnicate"], capsys)
    assert_one_line_error(code, err, "invalid choice", "frobnicate")
    code, _, err = run_cli(["reproduce", "--quick", "--full"], capsys)
    assert_one_line_error(code, err, "not allowed with")
    code, _, err = run_cli(["run"], capsys)
    assert_one_line_error(code, err, "needs a config file")
    code, _, err = run_cli(["reproduce", "--only", "nope"], capsys)
    assert_one_line_error(code, err, "unknown experiment(s) nope", "fake_pass")


def test_overrides_before_and_after_options(cfg_file, fake_env, capsys):
    path = cfg_file()
    code, _, err = run_cli(["run", str(path), "params.n=2", "--no-progress", "params.n=0"], capsys)
    assert_one_line_error(code, err, "params.n=0: must be >= 1")  # the last override wins
    code, _, err = run_cli(["run", str(path), "--no-progress", "--bogus"], capsys)
    assert_one_line_error(code, err, "unrecognized arguments: --bogus")


def test_config_error_class_is_value_error(fake_registry):
    with pytest.raises(ConfigError, match=r"^params\.n=0: must be >= 1$"):
        resolve({"experiment": "fake_pass", "params": {"n": 0}}, fake_registry.experiments)
    assert issubclass(ConfigError, ValueError)


def test_render_config_docs_lists_every_field(fake_registry, fake_env, capsys):
    text = render_config_docs(fake_registry.experiments["fake_pass"])
    for f in (
        "params.n: an integer = 64  -- coin flips per chunk",
        "params.k: an integer or null = None",
        "params.kind: one of 'a', 'b' = 'a'",
        "tracking.mode: one of 'auto', 'offline', 'online', 'disabled' = 'auto'",
        "seed: an integer = 0",
        "size quick: n=16, chunks=2",
    ):
        assert f in text, f
    code, out, _ = run_cli(["config", "fake_pass"], capsys)
    assert code == 0 and out.strip() == text.strip()
    code, _, err = run_cli(["config", "nope"], capsys)
    assert_one_line_error(code, err, "unknown experiment 'nope'")


def test_run_config_defaults():
    cfg = RunConfig(experiment="x")
    assert (cfg.seed, cfg.size, cfg.output_dir, cfg.resume) == (0, "default", "runs", False)
    assert cfg.tracking == TrackingConfig("auto", "dedebate", None, None)
