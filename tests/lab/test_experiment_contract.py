"""The report contract: the lab evaluates ``point``, runs ``host`` and writes what the pure
``report`` returns; no experiment module defines ``run``, calls back into the lab with its own
module (``point_row``, ``train_point``, ``ChunkedPrograms``, ``sys.modules[__name__]``) or imports
anything of the lab beyond its types, claims and params."""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.lab.config import resolve
from dedebate.lab.context import experiment_key
from dedebate.lab.evaluate import run_module
from dedebate.lab.experiment import ExperimentResult
from dedebate.lab.registry import discover_experiments
from dedebate.lab.runner import run_experiment
from dedebate.lab.sweep_eval import point_row
from tests.conftest import REPO
from tests.fake_experiments.reporting import fake_report
from tests.fakes import FakeContext

REPORTING = "tests.fake_experiments.reporting"
CALLBACKS = {"point_row", "train_point", "ChunkedPrograms"}
LAB_TYPES = {"dedebate.lab.experiment", "dedebate.lab.claims", "dedebate.lab.params"}
DEVICE_FACTS = {"lanes_for_memory"}  # dedebate.lab.devices: a full-size batch from the device


def _top_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def contract_problems(source: str) -> list[str]:
    """Why a source file of an experiment (its module, or a module of its package) breaks the
    contract ([] if it keeps it)."""
    tree = ast.parse(source)
    problems = (
        ["defines run (the old contract: the lab drives every experiment)"]
        if "run" in _top_names(tree)
        else []
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            facts = (
                node.module == "dedebate.lab.devices"
                and {a.name for a in node.names} <= DEVICE_FACTS
            )
            if (
                node.module.startswith("dedebate.lab")
                and node.module not in LAB_TYPES
                and not facts
            ):
                problems.append(f"imports {node.module} (only {sorted(LAB_TYPES)})")
            problems += [f"imports {a.name}" for a in node.names if a.name in CALLBACKS]
        elif isinstance(node, ast.Import):
            problems += [
                f"imports {a.name} (only {sorted(LAB_TYPES)})"
                for a in node.names
                if a.name.startswith("dedebate.lab") and a.name not in LAB_TYPES
            ]
        elif isinstance(node, ast.Attribute) and node.attr in CALLBACKS:
            problems.append(f"uses {node.attr}")
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "modules"
        ):
            problems.append("uses sys.modules[...] (its own module)")
    return problems


def experiment_sources(module: types.ModuleType) -> list[Path]:
    """The source files of a registered experiment: its module, or every module of its package."""
    path = Path(module.__file__)
    return sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]


def test_no_experiment_defines_run_or_calls_back_into_the_lab():
    reg = discover_experiments(["experiments"])
    assert reg.errors == {}
    assert {
        "machines",
        "deterministic_debate",
        "prover_estimator",
        "ped_digits",
        "stochastic_debate",
        "stochastic_selfplay",
        "stackelberg",
        "ogd_estimator",
    } <= set(reg.names())
    found = {
        p.relative_to(REPO).as_posix(): contract_problems(p.read_text())
        for m in reg.experiments.values()
        for p in experiment_sources(m)
    }
    assert "experiments/machines.py" in found and "experiments/stackelberg/__init__.py" in found
    assert {path: bad for path, bad in found.items() if bad} == {}
    assert [name for name, m in reg.experiments.items() if hasattr(m, "run")] == []


@pytest.mark.parametrize(
    "source,problem",
    [
        ("def run(cfg, ctx):\n    pass\n", "defines run"),
        ("from experiments.machines import report as run\n", "defines run"),
        ("run = print\n", "defines run"),
        ("from dedebate.lab.sweep import point_row\n", "imports point_row"),
        ("from dedebate.lab.sweep_programs import train_point\n", "imports train_point"),
        (
            "import dedebate.lab.sweep_programs as sp\nx = sp.ChunkedPrograms\n",
            "uses ChunkedPrograms",
        ),
        ("import sys\nme = sys.modules[__name__]\n", "uses sys.modules"),
        ("from dedebate.lab.runner import run_experiment\n", "imports dedebate.lab.runner"),
        ("from dedebate.lab.devices import clear_program_cache\n", "imports dedebate.lab.devices"),
    ],
)
def test_a_run_or_a_callback_into_the_lab_is_reported(source, problem):
    problems = contract_problems(source)
    assert any(p.startswith(problem) for p in problems), problems
    assert (
        contract_problems(
            "from dedebate.lab.experiment import Claim\n"
            "from dedebate.lab.devices import lanes_for_memory\n"
            "def report(cfg, measured, host):\n"
            "    def run(x):\n        return x\n    return run\n"
        )
        == []
    )


def test_a_module_without_report_is_a_type_error_naming_it(tmp_path):
    module = types.SimpleNamespace(NAME="old", run=lambda cfg, ctx: ExperimentResult())
    with pytest.raises(
        TypeError,
        match=r"^experiment module 'old' defines no report: it must "
        r"define report\(cfg, measured, host\)$",
    ):
        run_module(module, None, FakeContext(tmp_path))


def test_the_lab_evaluates_point_runs_host_and_writes_the_report(tmp_path):
    cfg = resolve(
        {
            "experiment": "fake_report",
            "seed": 3,
            "size": "quick",
            "output_dir": str(tmp_path),
            "tracking": {"mode": "disabled"},
        },
        {"fake_report": fake_report},
    )
    assert discover_experiments([REPORTING]).names() == ["fake_report"]
    rec = run_experiment(fake_report, cfg, show_progress=False)
    assert rec.error is None and rec.passed
    res = json.loads((rec.run_dir / "results.json").read_text())
    key = experiment_key(3, "fake_report")
    row = point_row(fake_report, cfg.params, key, 3)
    dyn, fn = fake_report.point(cfg.params)
    direct = jax.jit(fn)(dyn, key)  # the same numbers, computed apart from the lab
    assert row == {k: int(v) for k, v in direct.items()} == res["metrics"]["point"]
    assert res["metrics"]["host"] == {"expected": 0.5 * 32 * 8, "seed": 3, "seen": row["heads"]}
    assert res["metrics"]["wall_point_s"] > 0 and res["metrics"]["wall_host_s"] >= 0
    assert res["claims"][0]["value"] == row["heads"] / (32 * 8)
    assert res["plots"] == ["plots/heads.png"] and (rec.run_dir / "plots/heads.png").stat().st_size
    assert res["tables"] == {"counts": "tables/counts.csv"}
    logged = [json.loads(line) for line in (rec.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["counts/count"]) for r in logged] == [
        (0, row["heads"]),
        (1, row["max_trial"]),
    ]


def test_a_report_that_returns_no_result_is_a_type_error(tmp_path):
    module = types.SimpleNamespace(NAME="bad", report=lambda cfg, measured, host: {"claims": []})
    with pytest.raises(TypeError, match=r"bad\.report returned dict, expected ExperimentResult"):
        run_module(module, None, FakeContext(tmp_path))
    module.report = lambda cfg, measured, host: ExperimentResult(claims=[np.float32(1.0)])
    with pytest.raises(TypeError, match=r"bad\.report returned claims that are not Claim rows"):
        run_module(module, None, FakeContext(tmp_path))


def test_a_points_extras_reach_host_and_report_but_not_the_metrics(tmp_path):
    module = types.ModuleType("fake_extras")

    def point(cfg):
        def fn(dyn, key):
            heads = jax.random.bernoulli(key, dyn["p"], (16,)).astype(jnp.int32)
            return {"heads": jnp.sum(heads)}, {"per_coin": heads}

        return {"p": jnp.float32(cfg.p)}, fn

    module.NAME, module.point = "fake_extras", point
    module.host = lambda cfg, seed, key, measured: int(measured["extras"]["per_coin"].sum())
    module.report = lambda cfg, measured, host: ExperimentResult(
        metrics={"coins": measured["extras"]["per_coin"].tolist(), "host": host}
    )
    res = run_module(module, fake_report.Config(), FakeContext(tmp_path))
    coins = res.metrics["coins"]
    assert len(coins) == 16 and set(coins) == {0, 1}
    assert res.metrics["point"] == {"heads": sum(coins)} and res.metrics["host"] == sum(coins)


@pytest.mark.parametrize("kind", ["tables", "figures"])
@pytest.mark.parametrize("name", ["a/b", "..", ".hidden", "a b", ""])
def test_table_and_figure_names_are_file_names(kind, name):
    """A table or figure name becomes a file name: 'a/b' and 'a_b' both wrote tables/a_b.csv,
    one over the other, and '..' names no file of the run."""
    with pytest.raises(ValueError, match=rf"{kind} name {name!r} names a file"):
        ExperimentResult(**{kind: {name: []}})
    assert ExperimentResult(**{kind: {"a_b-1.x": []}})


def _module_reporting(report):
    """A module with a one-number point and ``report`` as its report."""
    module = types.ModuleType("fake_named")

    def point(cfg):
        return {"p": jnp.float32(cfg.p)}, lambda dyn, key: {"heads": jnp.int32(3)}

    module.NAME, module.point, module.report = "fake_named", point, report
    return module


def test_the_lab_keeps_a_reports_plots_and_its_name_for_the_points_row(tmp_path):
    """A report's own plot paths come before its figures' files; a report metric named
    ``point`` would overwrite the lab's row, and is refused."""
    from matplotlib.figure import Figure

    fig = Figure()
    fig.subplots().plot([0, 1])
    own = ExperimentResult(plots=["plots/own.png"], figures={"drawn": fig})
    res = run_module(_module_reporting(lambda *_: own), fake_report.Config(), FakeContext(tmp_path))
    assert res.plots[0] == "plots/own.png" and len(res.plots) == 2 and not res.figures
    named = ExperimentResult(metrics={"point": 1})
    with pytest.raises(TypeError, match="returned a metric named 'point'"):
        run_module(_module_reporting(lambda *_: named), fake_report.Config(), FakeContext(tmp_path))


def test_table_rows_are_logged_from_the_first_free_step(tmp_path):
    from dedebate.lab.evaluate import log_tables

    ctx = FakeContext(tmp_path)
    log_tables(ctx, {"t": [{"a": 1, "note": "x"}, {"a": 2}], "u": [{"b": 3.5}]}, first_step=5)
    assert ctx.logged == [(5, {"t/a": 1}), (6, {"t/a": 2}), (7, {"u/b": 3.5})]


def test_a_point_with_extras_may_not_name_a_metric_extras(tmp_path):
    module = types.ModuleType("fake_extras_named")  # its own name: the lab caches by module

    def point(cfg):
        return {"p": jnp.float32(cfg.p)}, lambda dyn, key: ({"extras": dyn["p"]}, {"x": dyn["p"]})

    module.NAME, module.point = "fake_extras_named", point
    module.report = lambda cfg, measured, host: ExperimentResult()
    with pytest.raises(TypeError, match="returned a metric named 'extras'"):
        run_module(module, fake_report.Config(), FakeContext(tmp_path))
