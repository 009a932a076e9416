"""experiments/machines.py: the quick run's claims pass, and bad configs are rejected."""

from pathlib import Path

import pytest

import experiments.machines as exp
from dedebate.lab.config import ConfigError, load_config
from tests.fakes import FakeContext

REPO = Path(__file__).resolve().parents[1]


def test_quick_run_claims_pass_and_plot_is_saved(tmp_path):
    ctx = FakeContext(tmp_path, size="quick", name=exp.NAME)
    result = exp.run(exp.Config(**exp.SIZES["quick"]), ctx)
    names = [c.claim for c in result.claims]
    assert len(names) == 7 * 2 + 2
    assert sum("Monte-Carlo interval" in n for n in names) == 7
    assert sum("<= proven K" in n for n in names) == 7
    assert sum("factor 2" in n for n in names) == 2
    failed = [(c.claim, c.value, c.bound) for c in result.claims if not c.passed]
    assert not failed
    rows = {r["fixture"]: r for r in result.tables["fixtures"]}
    assert rows["F2"]["K_empirical"] >= 1.0 and rows["F3"]["K_empirical"] >= 4.0
    for r in rows.values():
        assert r["K_empirical"] <= r["K_hybrid"] * (1 + 1e-9) <= r["K_proven"] * (1 + 2e-6)
        assert r["p1_mc_lo"] <= r["p1_enumeration"] <= r["p1_mc_hi"]
    assert result.plots == ["lipschitz_empirical_vs_proven.png"]
    assert (tmp_path / "plots" / result.plots[0]).stat().st_size > 0
    assert len(ctx.logged) == 7 and ctx.bars[0].n == 7


def test_config_file_loads_and_size_presets_apply():
    cfg = load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp})
    assert cfg.params == exp.Config()
    quick = load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp}, ["size=quick"])
    assert quick.params == exp.Config(**exp.SIZES["quick"])
    # The command line wins over the size preset and the file.
    pinned = load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp},
                         ["size=quick", "params.T=6"])
    assert pinned.params == exp.Config(**{**exp.SIZES["quick"], "T": 6})


@pytest.mark.parametrize("override,match", [
    ("params.T=3", "params.T=3"),
    ("params.T=19", "params.T=19"),
    ("params.trials=10", "params.trials=10"),
    ("params.eps=[0.0]", "params.eps"),
    ("params.n_random=-1", "params.n_random=-1"),
    ("params.ascent_iters=0", "params.ascent_iters=0"),
])
def test_bad_config_values_are_rejected(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(REPO / "configs" / "machines.yaml", {exp.NAME: exp}, [override])
