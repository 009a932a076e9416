"""The ``deterministic_debate`` experiment: a sweep over the fraction of ORACLE steps is one
compiled program; the quick run is that sweep's point ``oracle_frac = 0.3`` run alone (by the
lab, with the row's documented key ``point_key``), through the same program (one compile for both),
equal to its row bit for bit; every claim passes with exact cost tables; config validation."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

import experiments.deterministic_debate as E
from dedebate.machines.configurations import clog2
from experiments.deterministic_debate.population import cost_table
from tests.conftest import REPO, assert_shipped_sweeps_plot
from tests.fakes import sweep_then_run_alone


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The sweep ``oracle_frac in {0, 0.3, 1}`` at the quick size (one row per call), then its
    point oracle_frac = 0.3 (the quick config) run alone with the row's key: ``(sweep record,
    point, run result, context, traces of point's fn after both)``."""
    rec, pt, _, res, ctx, traces = sweep_then_run_alone(
        E,
        tmp_path_factory.mktemp("deterministic"),
        axes={"oracle_frac": [0.0, 0.3, 1.0]},
        pick=lambda v: v["oracle_frac"] == 0.3,
    )
    return rec, pt, res, ctx, traces


@pytest.mark.slow  # one compile of the quick grids, shared by the sweep and the run
def test_oracle_frac_sweep_compiles_once_and_a_row_is_the_run_alone(quick):
    rec, pt, result, ctx, traces = quick
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["oracle_frac"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces and res["rows"] == 3 == len(rec.rows)
    cfg = E.Config(**E.SIZES["quick"])
    assert pt.cfg == cfg  # the quick run is this point
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index and r["seed"] == ctx.seed)
    assert_shipped_sweeps_plot("deterministic_debate", row)
    cost_T = {2**e for e in cfg.cost_log2}
    assert cfg.check_T in cost_T  # so every T has judged counts and cost rows for each l
    # 7 judged counts per family, 10 costs per family and l (+ S for both Figure 3 families), and
    # the exhaustive Figure 3 adversary's 7
    assert len(alone) == len(cost_T) * (3 * 7 + len(cfg.deps) * (3 * 10 + 2)) + 7
    assert {m: row[m] for m in alone} == alone
    assert result.tables["costs"] == cost_table(row)  # the report's table is the row's
    # Fig 4's honest debate checks the last step (DET): (1 + l) positions and a_T-1, exactly
    n = cfg.n_inputs
    assert row["T8/fig4/l2/bits_read"] == clog2(8) + (1 + 2) * (1 + clog2(n + 8))
    # every step but the last is ORACLE at oracle_frac = 1: honest B's pointer at a lie's first
    # inconsistent step makes V query the oracle; at oracle_frac = 0 never
    by_frac = {r["oracle_frac"]: r for r in rec.rows}
    assert by_frac[1.0]["T8/fig4/v_queries_sound"] > 0 == by_frac[0.0]["T8/fig4/v_queries_sound"]
    assert all(r["T8/fig4/sound_accepts"] == 0 < r["T8/fig4/sound_debates"] for r in rec.rows)


@pytest.mark.slow
def test_quick_run_passes_every_claim_with_exact_cost_tables(quick):
    _, _, res, ctx, _ = quick
    tmp_path = ctx.root
    cfg = E.Config(**E.SIZES["quick"])
    failed = [c.claim for c in res.claims if not c.passed]
    assert not failed, failed
    assert len(res.claims) >= 20
    text = " ".join(c.claim for c in res.claims)
    for needle in (
        "Fig 4 cross-examination: completeness",
        "Fig 3: no message sequence wins",
        "Witness debate (plan): soundness",
        "grow as S log T",
        "grow as l log T",
    ):
        assert needle in text
    side = res.tables["fig3_vs_fig4"]
    assert {r["T"] for r in side} == {8, 16} and {r["l"] for r in side} == set(cfg.deps)
    for r in side:  # honest debates: the protocol's counts, exactly
        m, n = r["m"], cfg.n_inputs
        assert r["fig3_full_bits"] == (m + 1) * r["S_full"] + m
        assert r["fig3_register_bits"] == (m + 1) * r["S_register"] + m
        assert r["S_full"] == r["T"].bit_length() + n + r["T"]
        assert r["fig4_bits"] == clog2(r["T"]) + (1 + r["l"]) * (1 + clog2(n + r["T"]))
        assert r["fig3_B_steps"] == r["T"] - 1 and r["fig4_B_steps"] == r["A_steps"] == r["T"]
    assert ctx.figures == ["deterministic_costs.png"]
    assert (tmp_path / "plots" / "deterministic_costs.png").stat().st_size > 0
    assert ctx.bars and ctx.bars[0].n == ctx.bars[0].total


@pytest.mark.parametrize(
    "field,value",
    [
        ("n_machines", 3),
        ("deps", (0,)),
        ("window", 2),
        ("check_T", 15),
        ("cost_log2", (2,)),
        ("oracle_frac", 1.5),
        ("witness_instances", 0),
        ("witness_instances", 1),  # no no-instance: the soundness rows would be empty
    ],
)
def test_config_rejects_bad_values_naming_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field}="):
        E.Config(**{field: value})


def test_sizes_and_yaml_build_valid_configs():
    from dedebate.lab.config import load_config

    for size in ("quick", "full"):
        E.Config(**E.SIZES[size])
    cfg = load_config(REPO / "configs" / "deterministic_debate.yaml", {E.NAME: E})
    assert cfg.params == E.Config()
    for f in dataclasses.fields(E.Config):
        assert f.metadata.get("doc"), f.name


def test_host_seeds_of_neighbouring_run_seeds_do_not_overlap():
    """``seed + j`` gave run seed s at its second T the first T's machines of seed s + 1."""
    from dedebate.machines.configurations import random_programs

    seeds = {E.host_seed(s, 0, j) for s in range(50) for j in range(6)}
    seeds |= {E.host_seed(s, 1) for s in range(50)} | {
        E.host_seed(s, 2, i) for s in range(50) for i in (0, 1)
    }
    assert len(seeds) == 50 * 6 + 50 + 100
    a, b = (random_programs(E.host_seed(s, 0, j), 4, 8) for s, j in ((3, 1), (4, 0)))
    assert any(
        (np.asarray(x) != np.asarray(y)).any() for x, y in zip(*map(jax.tree.leaves, (a, b)))
    )
