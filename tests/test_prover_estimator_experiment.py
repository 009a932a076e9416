"""experiments/prover_estimator.py: the quick run's claims pass, and bad configs are rejected."""

from pathlib import Path

import pytest

import experiments.prover_estimator as exp
from dedebate.lab.config import ConfigError, load_config
from tests.fakes import FakeContext

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_run_claims_pass_and_plot_is_saved(tmp_path):
    ctx = FakeContext(tmp_path, size="quick", name=exp.NAME)
    result = exp.run(exp.Config(**exp.SIZES["quick"]), ctx)
    failed = [(c.claim, c.value, c.bound) for c in result.claims if not c.passed]
    assert not failed
    by_name = {c.claim: c for c in result.claims}
    spec = [c for n, c in by_name.items() if "meets the bound exactly" in n]
    assert [round(c.value, 6) for c in spec] == [0.0375, 0.046875, 0.0625]
    control = next(c for n, c in by_name.items() if n.startswith("negative control"))
    assert control.value == pytest.approx(0.0625, abs=1e-6)
    naive = next(c for n, c in by_name.items() if "survives a uniform challenger" in n)
    assert naive.value == pytest.approx(63 / 64, abs=1e-6)
    sampled = [c for n, c in by_name.items() if n.endswith("(sampled debates)")]
    assert len(sampled) == 3 and all(c.lo <= 0 <= c.hi for c in sampled)
    sig = result.tables["signal"]
    assert [s["depth"] for s in sig] == [1, 2, 3]
    for s in sig:
        assert s["ped_delta"] == pytest.approx(2.0 ** -(s["depth"] + 1), abs=1e-6)
        assert s["naive_delta"] == pytest.approx(4.0 ** -s["depth"], abs=1e-6)
    assert result.plots == ["training_signal_vs_depth.png"]
    assert (tmp_path / "plots" / result.plots[0]).stat().st_size > 0
    assert ctx.bars[0].n == ctx.bars[0].total == 5


def test_config_file_loads_and_size_presets_apply():
    cfg = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp})
    assert cfg.params == exp.Config()
    quick = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp},
                        ["size=quick"])
    assert quick.params == exp.Config(**exp.SIZES["quick"])
    full = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp},
                       ["size=full"])
    assert full.params == exp.Config(**exp.SIZES["full"])


@pytest.mark.parametrize("override,match", [
    ("params.fbs_qs=[10]", "params.fbs_qs"),
    ("params.noisy_depth=4", "params.noisy_depth=4"),
    ("params.shift_errors=[0.0]", "params.shift_errors"),
    ("params.control_rho=2.5", "params.control_rho=2.5"),
    ("params.obf_q=13", "params.obf_q=13"),
    ("params.obf_episodes=10", "params.obf_episodes=10"),
    ("params.signal_depths=[7]", "params.signal_depths"),
])
def test_bad_config_values_are_rejected(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp}, [override])
