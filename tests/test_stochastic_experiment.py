"""The ``stochastic_debate`` experiment at quick size: every claim row passes, plots are saved."""

import pytest

import experiments.stochastic_debate as exp
from tests.fakes import FakeContext


@pytest.mark.slow
def test_quick_run_passes_and_saves_plots(tmp_path):
    cfg = exp.Config(**exp.SIZES["quick"])
    ctx = FakeContext(tmp_path, size="quick", name=exp.NAME)
    res = exp.run(cfg, ctx)
    failed = [(c.claim, c.value, c.lo, c.hi, c.bound) for c in res.claims if not c.passed]
    assert not failed, failed
    kinds = " ".join(c.claim for c in res.claims)
    for word in ("completeness", "soundness", "beyond the paper"):
        assert word in kinds
    # the cost rows hold by construction: consistency checks in the metrics, not claims
    checks = res.metrics["consistency_checks"]
    assert checks and all(c["holds"] for c in checks.values()), checks
    assert all(c.finding for c in res.claims if "beyond the paper" in c.claim)
    assert sorted(res.plots) == ["acceptance_vs_T.png", "queries_vs_T.png"]
    assert all((tmp_path / "plots" / p).exists() for p in res.plots)
    assert res.tables["acceptance"] and res.tables["queries"] and res.tables["scale"]


@pytest.mark.parametrize("field,value,match", [
    ("Ks", (3,), "Ks="), ("Ts", (2,), "Ts="), ("trials", 10, "trials="),
    ("p_yes", 0.5, "p_yes="), ("p_no", 0.4, "p_no="), ("es_population", 3, "es_population="),
    ("scale_factors", (2.0,), "scale_factors="), ("scale_T", 20, "scale_T="),
])
def test_config_rejects_bad_values(field, value, match):
    with pytest.raises(ValueError, match=match):
        exp.Config(**{field: value})
