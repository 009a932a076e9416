"""The ``deterministic_debate`` experiment: quick run, tables, config validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import experiments.deterministic_debate as E
from dedebate.machines.configurations import clog2
from tests.fakes import FakeContext

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_run_passes_every_claim_with_exact_cost_tables(tmp_path):
    cfg = E.Config(**E.SIZES["quick"])
    ctx = FakeContext(tmp_path, size="quick", name=E.NAME)
    res = E.run(cfg, ctx)
    failed = [c.claim for c in res.claims if not c.passed]
    assert not failed, failed
    assert len(res.claims) >= 20
    text = " ".join(c.claim for c in res.claims)
    for needle in ("Fig 4 cross-examination: completeness", "Fig 3: no message sequence wins",
                   "Witness debate (plan): soundness", "grow as S log T", "grow as l log T"):
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


@pytest.mark.parametrize("field,value", [
    ("n_machines", 3), ("deps", (0,)), ("window", 2), ("check_T", 15),
    ("cost_log2", (2,)), ("oracle_frac", 1.5), ("witness_instances", 0),
])
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
