"""Sweeps: one compile for seeds x dynamic axes, point independence, groups on disk, resume,
config errors, and experiments without ``point`` (each point a full run)."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import types
import zlib

import jax
import numpy as np
import pytest
from scipy.stats import binom, binomtest

from dedebate.lab.config import ConfigError, resolve
from dedebate.lab.devices import clear_program_cache
from dedebate.lab.memory import MemoryBudgetError
from dedebate.lab.registry import discover_experiments
from dedebate.lab.rundir import read_config
from dedebate.lab.sweep import (
    SweepError,
    find_sweep_dir,
    plan,
    point_key,
    point_words,
    run_sweep,
)

SWEEPABLE = "tests.fake_experiments.sweepable"


@pytest.fixture(scope="module")
def reg():
    return discover_experiments([SWEEPABLE, "tests.fake_experiments"])


@pytest.fixture
def fake_sweep(reg):
    return reg.experiments["fake_sweep"]


def config(reg, tmp_path, sweep, **top):
    raw = {
        "experiment": "fake_sweep",
        "size": "quick",
        "seed": 3,
        "output_dir": str(tmp_path / "runs"),
        "tracking": {"mode": "disabled"},
        "sweep": sweep,
        **top,
    }
    return resolve(raw, reg.experiments)


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


METRICS = ("rate", "accept", "heads")
NAN = float("nan")


def test_seeds_by_two_dynamic_axes_compile_once_and_points_stand_alone(reg, fake_sweep, tmp_path):
    cfg = config(
        reg, tmp_path, {"seeds": 3, "axes": {"p": [0.2, 0.5, 0.9], "threshold": [0.25, 0.75]}}
    )
    clear_program_cache()
    before = fake_sweep.TRACES[0]
    rec = run_sweep(fake_sweep, cfg, show_progress=False)
    assert fake_sweep.TRACES[0] - before == 1  # 3 seeds x 3 p x 2 thresholds: one trace
    res = rec.results
    assert res["compilations"] == 1 and res["compiled_calls"] == 1
    assert res["dynamic_axes"] == ["p", "threshold"] and res["static_axes"] == []
    rows = read_csv(rec.sweep_dir / "sweep.csv")
    assert len(rows) == 18 == res["rows"]
    assert [(int(r["point"]), int(r["seed"])) for r in rows] == [
        (i, s) for i in range(6) for s in (3, 4, 5)
    ]
    assert {(float(r["p"]), float(r["threshold"])) for r in rows} == {
        (p, t) for p in (0.2, 0.5, 0.9) for t in (0.25, 0.75)
    }

    # (a) a point computed alone, outside any sweep, from its documented key
    pt = plan(fake_sweep, cfg).points[3]  # p = 0.5, threshold = 0.75
    dyn, fn = fake_sweep.point(pt.cfg)
    alone = jax.jit(fn)(dyn, point_key("fake_sweep", 4, pt.cfg))
    row = next(r for r in rows if r["point"] == "3" and r["seed"] == "4")
    for m in METRICS:
        assert float(row[m]) == float(alone[m]), m
    # (b) the same point as a one-point sweep: same numbers, whatever ran beside it; its rows
    # in the order of the seeds listed (5 before 4), not by value
    one = run_sweep(
        fake_sweep,
        config(
            reg,
            tmp_path,
            {"seeds": [5, 4], "plots": False, "axes": {"threshold": [0.75], "p": [0.5]}},
        ),
        show_progress=False,
    )
    only = read_csv(one.sweep_dir / "sweep.csv")
    assert [(r["point"], r["seed"]) for r in only] == [("0", "5"), ("0", "4")]
    for got in only:
        row = next(r for r in rows if r["point"] == "3" and r["seed"] == got["seed"])
        assert [got[m] for m in METRICS] == [row[m] for m in METRICS]

    # the numbers are right: pooled over seeds, heads ~ Binomial(3 * trials * n, p) and
    # acceptances ~ Binomial(3 * trials, P(Binomial(n, p) >= threshold * n)); exact two-sided
    # binomial tests at level 0.001 each
    n, trials = pt.cfg.n, pt.cfg.trials
    for i, point in enumerate(plan(fake_sweep, cfg).points):
        rs = [r for r in rows if int(r["point"]) == i]
        p, t = point.values["p"], point.values["threshold"]
        heads = sum(int(r["heads"]) for r in rs)
        assert binomtest(heads, 3 * trials * n, p).pvalue > 1e-3, (p, heads)
        k = math.ceil(float(np.float32(t)) * n)  # rate >= threshold <=> heads >= k
        exact = float(binom.sf(k - 1, n, np.float32(p)))
        acc = sum(round(float(r["accept"]) * trials) for r in rs)
        assert binomtest(acc, 3 * trials, exact).pvalue > 1e-3, (p, t, acc, exact)

    # per-point summary and plots with bands
    pp = res["per_point"][3]
    rates = [float(r["rate"]) for r in rows if r["point"] == "3"]
    assert pp["values"] == {"p": 0.5, "threshold": 0.75}
    assert pp["rate"]["mean"] == pytest.approx(np.mean(rates))
    assert pp["rate"]["lo"] < pp["rate"]["mean"] < pp["rate"]["hi"]
    assert sorted(res["plots"]) == sorted(
        f"plots/{m}-vs-{a}.png" for m in METRICS for a in ("p", "threshold")
    )
    assert (rec.sweep_dir / res["plots"][0]).read_bytes()[:4] == b"\x89PNG"


def test_static_axis_compiles_per_value_groups_on_disk_and_resume(
    reg, fake_sweep, tmp_path, monkeypatch, capsys
):
    cfg = config(
        reg, tmp_path, {"seeds": 2, "axes": {"n": [4, 8], "p": [0.3, 0.6]}, "plots": False}
    )
    seen = []
    real_point = fake_sweep.point

    def watching(pcfg):  # records whether group 0's results were on disk when group 1 began
        seen.append((pcfg.n, sorted(p.name for p in (tmp_path / "runs").glob("*/groups/group-*"))))
        return real_point(pcfg)

    monkeypatch.setattr(fake_sweep, "point", watching)
    clear_program_cache()
    before = fake_sweep.TRACES[0]
    rec = run_sweep(fake_sweep, cfg, show_progress=False)
    assert fake_sweep.TRACES[0] - before == 2 == rec.results["compilations"]
    assert rec.results["static_axes"] == ["n"] and rec.results["groups"] == 2
    assert [n for n, _ in seen] == [4, 4, 8, 8]
    assert seen[0][1] == [] and seen[2][1] == ["group-000.csv"]
    table = (rec.sweep_dir / "sweep.csv").read_text()
    g0 = read_csv(rec.sweep_dir / "groups" / "group-000.csv")
    assert {r["n"] for r in g0} == {"4"} and len(g0) == 4

    # a finished sweep resumed changes nothing: its results.json (compile counts, rates, times)
    # was rewritten with zeros (the UX and durability audits)
    record = (rec.sweep_dir / "results.json").read_bytes()
    capsys.readouterr()
    noop = run_sweep(
        fake_sweep, config(reg, tmp_path, cfg.sweep.__dict__, resume=True), show_progress=False
    )
    assert noop.results == {} and (rec.sweep_dir / "results.json").read_bytes() == record
    assert f"sweep already finished: {rec.sweep_dir}; nothing to do" in capsys.readouterr().err
    assert [r["point"] for r in noop.rows] == [r["point"] for r in rec.rows]
    # one that changes a key outside the hash (plots, here) is no no-op: it draws them
    sw = {**cfg.sweep.__dict__, "plots": True}
    drawn = run_sweep(fake_sweep, config(reg, tmp_path, sw, resume=True), show_progress=False)
    assert drawn.results["groups_resumed"] == 2 and drawn.results["plots"]
    # lose the last group, resume: only that group is computed again (by the program compiled
    # above: this process keeps it), and the table is the same
    (rec.sweep_dir / "groups" / "group-001.csv").unlink()
    (rec.sweep_dir / "sweep.csv").write_text("point\n")
    before = fake_sweep.TRACES[0]
    again = run_sweep(
        fake_sweep, config(reg, tmp_path, cfg.sweep.__dict__, resume=True), show_progress=False
    )
    assert again.sweep_dir == rec.sweep_dir
    assert fake_sweep.TRACES[0] - before == 0 == again.results["compilations"]
    assert again.results["groups_resumed"] == 1 and again.results["rows_computed"] == 4
    assert (rec.sweep_dir / "sweep.csv").read_text() == table
    # the folder's config.yaml keeps its own resume: false (run again, it starts a new sweep)
    assert read_config(rec.sweep_dir / "config.yaml")["resume"] is False
    # every group on disk: a resume reads them under a memory limit none of them fits (here a
    # finished sweep's no-op; with results.json gone, a resume that computes nothing); one to
    # compute again is refused, before it starts
    monkeypatch.setattr(fake_sweep, "memory_bytes", lambda c: {"all": 10**9}, raising=False)
    tight = config(reg, tmp_path, cfg.sweep.__dict__, resume=True, memory_limit=1000)
    assert run_sweep(fake_sweep, tight, show_progress=False).results == {}
    (rec.sweep_dir / "results.json").unlink()  # killed while plotting, say
    assert run_sweep(fake_sweep, tight, show_progress=False).results["groups_resumed"] == 2
    (rec.sweep_dir / "groups" / "group-001.csv").unlink()
    with pytest.raises(MemoryBudgetError, match=r"at n=8\)"):
        run_sweep(fake_sweep, tight, show_progress=False)
    assert (rec.sweep_dir / "sweep.csv").read_text() == table
    # a resume that finds no sweep of its own starts one: every group is checked
    fresh = config(reg, tmp_path / "elsewhere", cfg.sweep.__dict__, resume=True, memory_limit=1000)
    with pytest.raises(MemoryBudgetError, match=r"at n=(4|8)\)"):
        run_sweep(fake_sweep, fresh, show_progress=False)
    # resume finds this directory by its sweep hash; a different sweep never resumes into it
    assert find_sweep_dir(cfg) == rec.sweep_dir
    assert find_sweep_dir(config(reg, tmp_path, {"seeds": 3, "axes": {"n": [4]}})) is None
    with pytest.raises(SweepError, match="holds a different sweep"):
        run_sweep(fake_sweep, config(reg, tmp_path, {"seeds": 3}), sweep_dir=rec.sweep_dir)
    # a resume at another batch (a smaller one rescues a sweep out of memory) is warned: its rows
    # may round apart from the groups on disk (the durability audit: it was silent)
    monkeypatch.undo()
    capsys.readouterr()
    other = config(reg, tmp_path, {**cfg.sweep.__dict__, "batch": 1}, resume=True)
    run_sweep(fake_sweep, other, show_progress=False)
    assert "sweep.batch 0 -> 1: rows computed now may differ" in capsys.readouterr().err


def test_a_stopped_sweep_names_the_folder_to_resume(reg, fake_sweep, tmp_path, monkeypatch, capsys):
    """Ctrl-C (or SIGTERM) in a sweep prints the command that resumes it, as a run does: the
    folder's name was printed only at the end."""

    def stopped(pcfg):
        raise KeyboardInterrupt

    monkeypatch.setattr(fake_sweep, "point", stopped)
    clear_program_cache()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(fake_sweep, config(reg, tmp_path, {"seeds": 1}), show_progress=False)
    (folder,) = (tmp_path / "runs").glob("fake_sweep-sweep-*")
    assert f"resume the sweep with: dedebate sweep --resume {folder}\n" in capsys.readouterr().err


def test_point_key_is_the_documented_hash_of_the_params(reg, fake_sweep, tmp_path):
    """Two 31-bit little-endian words of sha256 of the params' canonical JSON, folded into the
    run's root key (docs/lab.md): recomputed here with hashlib, so a changed id is seen (it would
    give every past sweep's points new keys)."""
    pcfg = fake_sweep.Config(n=4, trials=3, p=0.25, threshold=0.75)
    text = '{"n":4,"p":0.25,"threshold":0.75,"trials":3}'
    digest = hashlib.sha256(text.encode()).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") & 0x7FFFFFFF for i in (0, 4)]
    assert list(point_words(pcfg)) == words
    root = jax.random.fold_in(jax.random.key(9), zlib.crc32(b"fake_sweep") & 0x7FFFFFFF)
    want = jax.random.fold_in(jax.random.fold_in(root, words[0]), words[1])
    got = point_key("fake_sweep", 9, pcfg)
    assert np.array_equal(jax.random.key_data(got), jax.random.key_data(want))


def test_groups_follow_the_order_of_their_first_point(reg, fake_sweep, tmp_path):
    """Two static axes (2 x 3 values) and a dynamic one: group g holds the g-th distinct static
    combination in point order (the last axis fastest)."""
    axes = {"n": [4, 8], "p": [0.3, 0.6], "trials": [2, 3, 5]}
    plan_ = plan(fake_sweep, config(reg, tmp_path, {"seeds": 1, "axes": axes}))
    firsts = list(dict.fromkeys((p.values["n"], p.values["trials"]) for p in plan_.points))
    assert [(g.static["n"], g.static["trials"]) for g in plan_.groups] == firsts
    for g in plan_.groups:
        assert {(p.values["n"], p.values["trials"]) for p in g.points} == {firsts[g.index]}


def test_each_rows_host_inputs_are_drawn_at_that_rows_key(reg, fake_sweep, tmp_path):
    """``inputs(cfg, seed, key)`` of every (point, seed) row gets that row's own ``point_key``."""
    from dedebate.lab.sweep_eval import row_inputs

    plan_ = plan(fake_sweep, config(reg, tmp_path, {"seeds": [5, 2], "axes": {"p": [0.2, 0.9]}}))
    rows = [(p, s) for p in plan_.points for s in plan_.seeds]
    seen = []

    def inputs(pcfg, seed, key):
        seen.append((pcfg, seed))
        return {"key": jax.random.key_data(key)}

    got = row_inputs(types.SimpleNamespace(inputs=inputs), plan_, rows)
    assert seen == [(p.cfg, s) for p, s in rows]
    want = [jax.random.key_data(point_key("fake_sweep", s, p.cfg)) for p, s in rows]
    assert np.array_equal(np.asarray(got["key"]), np.stack(want))


def test_a_finished_sweeps_rows_come_back_in_point_order(reg, fake_sweep, tmp_path):
    """The static axis listed last: groups (by n) are not in point order (p first), and a no-op
    resume still returns the rows as the sweep did."""
    sweep = {"seeds": 2, "axes": {"p": [0.3, 0.6], "n": [4, 8]}, "plots": False}
    rec = run_sweep(fake_sweep, config(reg, tmp_path, sweep), show_progress=False)
    assert [(r["point"], r["seed"]) for r in rec.rows] == [(i, s) for i in range(4) for s in (3, 4)]
    noop = run_sweep(fake_sweep, config(reg, tmp_path, sweep, resume=True), show_progress=False)
    assert noop.results == {} and noop.rows == rec.rows


@pytest.mark.parametrize(
    "sweep, top, expect",
    [
        ({"axes": {"nope": [1]}}, {}, "unknown key 'sweep.axes.nope': not a params field"),
        ({"axes": {"p": [0.5, 1.5]}}, {}, "sweep.axes.p[1]=1.5: must be a probability in [0, 1]"),
        ({"axes": {"p": 0.5}}, {}, "sweep.axes.p=0.5: expected a list"),
        ({"axes": {"p": []}}, {}, "sweep.axes.p=[]: must list at least one value"),
        ({"axes": {"p": [0.5, 0.25, 0.5]}}, {}, "sweep.axes.p[2]=0.5: repeats sweep.axes.p[0]"),
        ({"seeds": 0}, {}, "sweep.seeds=0: must be a count in [1, 100000]"),
        ({"seeds": [1, 1]}, {}, "sweep.seeds=[1, 1]: seeds must be distinct"),
        ({"seeds": 2}, {"seed": 2**32 - 1}, "sweep.seeds=2: seed 4294967295 + 1 is beyond"),
        ({"axes": {}, "batch": -1}, {}, "sweep.batch=-1: must lie in [0, 2^31]"),
        ({"axez": {}}, {}, "unknown key 'sweep.axez'"),
    ],
)
def test_sweep_config_errors(reg, tmp_path, sweep, top, expect):
    with pytest.raises(ConfigError) as err:
        config(reg, tmp_path, sweep, **top)
    assert expect in str(err.value)


def test_config_without_sweep_is_unchanged(reg, tmp_path):
    cfg = resolve({"experiment": "fake_sweep"}, reg.experiments)
    assert cfg.sweep is None and "sweep" not in cfg.to_dict()
    with_sweep = config(reg, tmp_path, {"seeds": 2, "axes": {"p": [0.1]}}, seed=0)
    # the sweep block is not part of the run's config hash, but is part of the sweep hash
    assert (
        with_sweep.config_hash()
        == resolve({"experiment": "fake_sweep", "size": "quick"}, reg.experiments).config_hash()
    )
    assert (
        with_sweep.sweep_hash()
        != config(reg, tmp_path, {"seeds": 3, "axes": {"p": [0.1]}}, seed=0).sweep_hash()
    )


def test_experiment_without_point_runs_each_point_in_full(reg, tmp_path):
    raw = {
        "experiment": "fake_pass",
        "size": "quick",
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
        "sweep": {"seeds": 2, "axes": {"p": [0.25, 0.75], "chunks": [1]}, "plots": False},
    }
    cfg = resolve(raw, reg.experiments)
    rec = run_sweep(reg.experiments["fake_pass"], cfg, show_progress=False)
    rows = read_csv(rec.sweep_dir / "sweep.csv")
    assert len(rows) == 4 and rec.results["vmapped"] is False
    for r in rows:
        run = json.loads((rec.sweep_dir / r["run_dir"] / "results.json").read_text())
        assert run["metrics"]["heads"] == int(r["heads"]) and r["total"] == "16"
        assert run["provenance"]["seed"] == int(r["seed"])
        assert r["status"] == "ok" and r["passed"] in ("0", "1")
    # the same point in a smaller sweep: same numbers (keys from the point id, not the index, and
    # from the row's seed, not the config's base seed: 7 here, 0 above)
    cfg2 = resolve(
        {
            **raw,
            "seed": 7,
            "sweep": {"seeds": [1], "axes": {"p": [0.75], "chunks": [1]}, "plots": False},
        },
        reg.experiments,
    )
    (alone,) = read_csv(
        run_sweep(reg.experiments["fake_pass"], cfg2, show_progress=False).sweep_dir / "sweep.csv"
    )
    inside = next(r for r in rows if r["p"] == "0.75" and r["seed"] == "1")
    assert alone["heads"] == inside["heads"]


def test_a_resumed_sweep_of_full_runs_reruns_only_what_failed_or_never_finished(
    reg, tmp_path, monkeypatch
):
    mod = reg.experiments["fake_pass"]
    real_host, calls, fail = mod.host, [], {1: MemoryError("transient")}

    def host(cfg, seed, key, measured):
        calls.append(seed)
        if seed in fail:
            raise fail[seed]
        return real_host(cfg, seed, key, measured)

    monkeypatch.setattr(mod, "host", host)
    raw = {
        "experiment": "fake_pass",
        "size": "quick",
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
        "sweep": {"seeds": 3, "axes": {"p": [0.25]}, "plots": False},
    }
    first = run_sweep(mod, resolve(raw, reg.experiments), show_progress=False)
    assert [r["status"] for r in first.rows] == ["ok", "error", "ok"] and calls == [0, 1, 2]
    fail.clear()  # the cause is gone: only the failed run runs again, with the sweep's key
    calls.clear()
    again = run_sweep(mod, resolve({**raw, "resume": True}, reg.experiments), show_progress=False)
    assert calls == [1] and [r["status"] for r in again.rows] == ["ok"] * 3
    fresh = run_sweep(
        mod,
        resolve({**raw, "output_dir": str(tmp_path / "b")}, reg.experiments),
        show_progress=False,
    )
    assert [r["heads"] for r in again.rows] == [r["heads"] for r in fresh.rows]
    # killed during seed 1's run (before the group's file): the finished seed 0 is read back
    (again.sweep_dir / "groups" / "group-000.csv").unlink()
    calls.clear()
    last = run_sweep(mod, resolve({**raw, "resume": True}, reg.experiments), show_progress=False)
    assert last.rows == again.rows and calls == []


def test_rows_missing_from_another_process_fail_the_sweep(reg, tmp_path, monkeypatch):
    from dedebate.lab import distributed as dist
    from dedebate.lab import sweep

    raw = {
        "experiment": "fake_pass",
        "size": "quick",
        "output_dir": str(tmp_path),
        "tracking": {"mode": "disabled"},
        "sweep": {"seeds": 2, "axes": {"p": [0.25]}, "plots": False},
    }
    cfg, mod = resolve(raw, reg.experiments), reg.experiments["fake_pass"]
    p = plan(mod, cfg)
    # process 0 of 2, whose partner's shard never reaches this file system
    monkeypatch.setattr(dist, "process_count", lambda: 2)
    monkeypatch.setattr(dist, "process_index", lambda: 0)
    monkeypatch.setattr(dist, "barrier", lambda name: None)
    with pytest.raises(SweepError, match="1 rows of group 0 are missing"):
        sweep._full_run_group(mod, p, p.groups[0], cfg, tmp_path, "g", False)
    assert json.loads((tmp_path / "points/p0000-s0/results.json").read_text())["status"] == "ok"


def test_cli_sweep_and_run_with_a_sweep_block(tmp_path, monkeypatch, capsys):
    from dedebate import cli

    monkeypatch.setenv("DEDEBATE_EXPERIMENTS", SWEEPABLE)
    path = tmp_path / "s.yaml"
    path.write_text(
        f"experiment: fake_sweep\nsize: quick\noutput_dir: {tmp_path}\n"
        "tracking: {mode: disabled}\n"
    )
    assert cli.main(["sweep", str(path)]) == 2
    assert "the config has no sweep block" in capsys.readouterr().err
    assert cli.main(["sweep", str(path), "sweep.axes.p=[0.5, 2]"]) == 2
    assert "sweep.axes.p[1]=2.0: must be a probability in [0, 1]" in capsys.readouterr().err
    assert cli.main(["sweep", str(path), "--processes", "0"]) == 2
    assert cli.main(["sweep", str(path), "--processes", "100000"]) == 2  # started them all
    assert "--processes 100000: must lie in [1, 64]" in capsys.readouterr().err
    assert cli.main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "no config.yaml there" in capsys.readouterr().err
    # `dedebate run` on a config with a sweep block runs the sweep
    assert (
        cli.main(
            [
                "run",
                "--no-progress",
                str(path),
                "sweep.seeds=[4]",
                "sweep.plots=false",
                "sweep.axes.p=[0.5]",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "1 points x 1 seeds = 1 runs in 1 static group(s)" in out
    (d,) = tmp_path.glob("fake_sweep-sweep-*")
    assert f"sweep directory: {d}" in out
    assert cli.main(["config", "fake_sweep"]) == 0
    doc = capsys.readouterr().out
    assert "sweep.axes: a mapping" in doc and "over p, threshold run vmapped" in doc


def test_rows_of_another_shape_or_structure_are_one_error_naming_the_row():
    from dedebate.lab.sweep import SweepError, _stack_trees

    stacked = _stack_trees([{"a": np.zeros(2), "b": 1}, {"a": np.ones(2), "b": 2}], str)
    assert stacked["a"].shape == (2, 2) and stacked["b"].tolist() == [1, 2]
    with pytest.raises(SweepError, match=r"^row 1$"):
        _stack_trees([{"a": np.zeros(2)}, {"a": np.zeros(3)}], lambda i: f"row {i}")
    with pytest.raises(SweepError, match=r"^row 2$"):
        _stack_trees([{"a": 0}, {"a": 1}, {"c": 2}], lambda i: f"row {i}")


def test_a_module_that_takes_a_dropped_modules_name_and_id_gets_its_own_program():
    """The program cache holds the module it compiled for: CPython gives a freed module's id to
    a new object, and a cache keyed on the name and id ran the old module's program."""
    import dataclasses
    import gc

    from dedebate.lab.sweep_eval import point_row

    @dataclasses.dataclass(frozen=True)
    class Config:
        p: float = 0.5

    def module(m, value):
        m.NAME, m.Config = "fake_reused_id", Config
        m.point = lambda cfg: ({}, lambda dyn, key: {"v": jax.numpy.float32(value)})
        return m

    key = jax.random.key(0)
    first = module(types.ModuleType("fake_reused_id"), 1.0)
    assert point_row(first, Config(), key, 0) == {"v": 1.0}
    freed = id(first)
    del first
    gc.collect()
    made = [types.ModuleType("fake_reused_id") for _ in range(1000)]
    second = module(next((m for m in made if id(m) == freed), made[-1]), 2.0)
    assert point_row(second, Config(), key, 0) == {"v": 2.0}


def test_compile_options_are_a_dict_or_chosen_by_platform():
    """An experiment's COMPILE_OPTIONS: absent, a dict used on every platform, or a function of
    the devices' platform (deterministic_debate: level 0 on a CPU, XLA's defaults elsewhere)."""
    import types

    import jax

    import experiments.deterministic_debate as det
    from dedebate.lab.sweep import compile_options

    cpu = jax.devices("cpu")
    assert compile_options(types.SimpleNamespace(), cpu) is None
    level1 = {"xla_backend_optimization_level": 1}
    assert compile_options(types.SimpleNamespace(COMPILE_OPTIONS=level1), cpu) == level1
    assert compile_options(det, cpu) == {"xla_backend_optimization_level": 0}
    gpu = [types.SimpleNamespace(platform="gpu")]
    assert compile_options(det, gpu) is None


def test_numeric_and_one_number_list_axes_are_plotted_as_numbers(tmp_path, monkeypatch):
    """A list-valued axis of one number each (``cost_log2: [[4], [6]]``) and a plain numeric one
    land on a numeric x axis at their values (sorted), log-scaled where they span a decade; a
    list of several numbers and booleans stay categorical."""
    import itertools

    from dedebate.lab import sweep_output
    from dedebate.lab.sweep_output import plot_sweep
    from dedebate.lab.sweep_plan import Point, SweepPlan

    axes = {
        "cost_log2": [[8], [4], [6]],
        "eps": [0.1, 0.001],
        "high": [True, False],
        "Ks": [[1, 2], [4]],
    }
    points = tuple(
        Point(i, dict(zip(axes, v)), None, (0, 0))
        for i, v in enumerate(itertools.product(*axes.values()))
    )
    rows = [{"point": p.index, "seed": s, "x": float(p.index + s)} for p in points for s in (0, 1)]
    sweep = SweepPlan("toy", axes, tuple(axes), (), (0, 1), points, (), True)
    drawn = {}
    monkeypatch.setattr(
        sweep_output,
        "write_figure",
        lambda path, fig, **kw: drawn.setdefault(
            path.name,
            (
                fig.axes[0].get_xscale(),
                fig.axes[0].get_lines()[0].get_xdata().tolist(),
                [t.get_text() for t in fig.axes[0].get_xticklabels()],
            ),
        ),
    )
    assert plot_sweep(rows, sweep, tmp_path) == [f"x-vs-{a}.png" for a in axes]
    assert drawn["x-vs-cost_log2.png"][:2] == ("linear", [4.0, 6.0, 8.0])
    assert drawn["x-vs-eps.png"][:2] == ("log", [0.001, 0.1])
    assert drawn["x-vs-high.png"] == ("linear", [0, 1], ["True", "False"])
    assert drawn["x-vs-Ks.png"] == ("linear", [0, 1], ["[1, 2]", "[4]"])


def test_one_finite_value_has_no_interval():
    """A point with one finite value over its seeds has a mean and no interval (NaN: no band),
    not an interval of width 0 that reads as the most certain point."""
    from dedebate.lab.sweep_output import t_interval

    mean, lo, hi = t_interval([0.5, float("nan")])
    assert mean == 0.5 and math.isnan(lo) and math.isnan(hi)
    mean, lo, hi = t_interval([1.0, 3.0])
    assert mean == 2.0 and lo < 1.0 and hi > 3.0  # 12.7 x the standard error either side


def test_a_near_constant_metric_is_drawn_without_an_offset(tmp_path, monkeypatch):
    """0.5 + 1e-9 k reads 0.5 on the y ticks, not ticks of 1e-9 under an offset of +0.5."""
    from dedebate.lab import sweep_output
    from dedebate.lab.sweep_plan import Point, SweepPlan

    axes = {"n": [1, 2, 3]}
    points = tuple(Point(i, {"n": n}, None, (0, 0)) for i, n in enumerate(axes["n"]))
    rows = [{"point": p.index, "seed": 0, "x": 0.5 + 1e-9 * p.index} for p in points]
    offsets = []

    def drawn(path, fig, **kw):
        fig.canvas.draw()
        offsets.append(fig.axes[0].yaxis.get_major_formatter().get_offset())

    monkeypatch.setattr(sweep_output, "write_figure", drawn)
    sweep = SweepPlan("toy", axes, tuple(axes), (), (0,), points, (), True)
    assert sweep_output.plot_sweep(rows, sweep, tmp_path) == ["x-vs-n.png"]
    assert offsets == [""]


def test_a_million_row_plan_builds_no_config_until_a_group_is_read(reg, tmp_path, monkeypatch):
    """1,000 static n x 1,000 dynamic p (max_rows raised): planning counts 10^6 points and 1,000
    groups from the axes' lengths and builds no Config (the eager plan built all 10^6); reading
    group 7 builds exactly its 1,000 points, indices 7000..7999 at n = 8. On a small grid with a
    static axis between two dynamic ones, the lazy groups hold the points of the eager grouping
    (every combination, the last axis fastest, grouped by its static value)."""
    import itertools

    from dedebate.lab import sweep_plan

    module = reg.experiments["fake_sweep"]
    ps = [i / 999 for i in range(1000)]
    cfg = config(
        reg, tmp_path, {"seeds": 1, "max_rows": 10**6, "axes": {"n": list(range(1, 1001)), "p": ps}}
    )
    built = [0]
    real = sweep_plan.build_dataclass

    def counted(*args, **kw):
        built[0] += 1
        assert built[0] <= 5000, "the plan builds a Config per point"
        return real(*args, **kw)

    monkeypatch.setattr(sweep_plan, "build_dataclass", counted)
    p = plan(module, cfg)
    assert (built[0], len(p.points), p.rows, len(p.groups)) == (0, 10**6, 10**6, 1000)
    g = p.groups[7]
    assert built[0] == 1000 and g.static == {"n": 8}
    assert [q.index for q in g.points] == list(range(7000, 8000))
    assert g.points[123].values == {"n": 8, "p": ps[123]}
    assert g.points[123].words == sweep_plan.point_words(g.points[123].cfg)

    axes = {"p": [0.1, 0.2], "n": [3, 4, 5], "threshold": [0.25, 0.75]}
    small = plan(module, config(reg, tmp_path, {"seeds": 2, "axes": axes}))
    eager: dict = {}
    for i, combo in enumerate(itertools.product(*axes.values())):
        eager.setdefault(combo[1], []).append((i, dict(zip(axes, combo))))
    assert [[(q.index, q.values) for q in gr.points] for gr in small.groups] == list(eager.values())
    assert [q.index for q in small.points] == list(range(12)) and small.rows == 24


def test_per_point_counts_the_finite_values_its_interval_is_over(reg, tmp_path):
    from dedebate.lab.sweep_output import per_point

    p = plan(reg.experiments["fake_sweep"], config(reg, tmp_path, {"seeds": 4}))
    rows = [{"point": 0, "seed": s, "group": 0, "rate": v} for s, v in enumerate([1, NAN, 3, NAN])]
    (entry,) = per_point(rows, p)
    assert entry["seeds"] == 4 and entry["rate"]["n"] == 2 and entry["rate"]["mean"] == 2.0
