"""experiments/prover_estimator/: a sweep over the protocol's rho (relative to the trees' fbs)
is one compiled program; the quick run is that sweep's point rho_scale = 1 run alone (by the lab,
with the row's documented key ``point_key``), through the same program (one compile for both),
equal to its row bit for bit; its claims pass and its plot is saved; bad configs are rejected."""

import math

import pytest

import experiments.prover_estimator as exp
from dedebate.lab.config import ConfigError, load_config
from tests.conftest import REPO, assert_shipped_sweeps_plot
from tests.fakes import sweep_then_run_alone

SEED = 3


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """The sweep ``rho_scale in {1, 0.75}`` at the quick size (one row per call), then its point
    rho_scale = 1 (the quick config) run alone with the row's key: ``(sweep record, point, run
    result, context, traces of point's fn after both)``."""
    rec, pt, _, result, ctx, traces = sweep_then_run_alone(
        exp,
        tmp_path_factory.mktemp("prover_estimator"),
        axes={"rho_scale": [1.0, 0.75]},
        pick=lambda v: v["rho_scale"] == 1.0,
        seed=SEED,
    )
    return rec, pt, result, ctx, traces


@pytest.mark.slow  # one compile of the exact sections, shared with the quick run
def test_rho_sweep_compiles_once_and_a_row_is_the_run_alone(quick):
    rec, pt, result, _, traces = quick
    res = rec.results
    assert res["vmapped"] and res["dynamic_axes"] == ["rho_scale"] and res["groups"] == 1
    assert res["compilations"] == 1 == traces and res["rows"] == 2 == len(rec.rows)
    assert pt.cfg == exp.Config(**exp.SIZES["quick"])  # the quick run is this point
    alone = result.metrics["point"]
    row = next(r for r in rec.rows if r["point"] == pt.index)
    assert_shipped_sweeps_plot("prover_estimator", row)
    assert len(alone) > 30 and {m: row[m] for m in alone} == alone
    assert row["completeness/worst_minus_margin"] >= -1e-6  # rho = fbs: completeness holds
    # rho = 0.75 x fbs = 1.5 on the q=5 Thr_3 tree (fbs 2): the negative control's rho, where
    # error-shifting B (e = 1) pushes honest A below rho^-(d+1) = 1.5^-5 (completeness fails)
    other = next(r for r in rec.rows if r["point"] != pt.index)
    assert other["error_shift/fbs"] == 2.0 and other["error_shift/rho"] == 1.5
    assert other["error_shift/control_u"] == other["error_shift/u/3"] < 1.5**-5 - 1e-3  # e = 1


@pytest.mark.slow
def test_quick_run_claims_pass_and_plot_is_saved(quick):
    _, _, result, ctx, _ = quick
    tmp_path = ctx.root
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
    assert ctx.bars[0].n == ctx.bars[0].total == 3  # the lab's point, host and report
    assert len(ctx.logged) == sum(map(len, result.tables.values()))  # a step per table row


def test_config_file_loads_and_size_presets_apply():
    cfg = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp})
    assert cfg.params == exp.Config()
    quick = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp}, ["size=quick"])
    assert quick.params == exp.Config(**exp.SIZES["quick"])
    full = load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp}, ["size=full"])
    assert full.params == exp.Config(**exp.SIZES["full"])


@pytest.mark.parametrize(
    "override,match",
    [
        ("params.fbs_qs=[10]", "params.fbs_qs"),
        ("params.noisy_depth=4", "params.noisy_depth=4"),
        ("params.shift_errors=[0.0]", "params.shift_errors"),
        ("params.control_rho=2.5", "params.control_rho=2.5"),
        ("params.obf_q=13", "params.obf_q=13"),
        ("params.obf_episodes=10", "params.obf_episodes=10"),
        ("params.signal_depths=[7]", "params.signal_depths"),
    ],
)
def test_bad_config_values_are_rejected(override, match):
    with pytest.raises(ConfigError, match=match):
        load_config(REPO / "configs" / "prover_estimator.yaml", {exp.NAME: exp}, [override])


def test_error_shift_rows_state_the_rho_they_measure():
    """At rho = fbs = 2 the rows gate (a value off the bound fails); at rho_scale != 1 (rho 1.5,
    fbs 2) the premise fails, so the error-shifting rows are findings with rho's own target."""
    m = {"error_shift/rho": 2.0, "error_shift/fbs": 2.0, "error_shift/honest": 2.0**-5}
    m |= {"error_shift/u/0": 0.0375, "error_shift/u/1": 0.05, "error_shift/control_u": 0.0625}
    honest, ok, off, control = exp.error_shift_claims(m, (0.2, 0.5), 1.5)
    assert honest.passed and ok.passed and not ok.finding and control.passed
    assert not off.passed and not off.finding and "rho = 2 on the path" in off.claim
    m |= {"error_shift/rho": 1.5, "error_shift/honest": 1.5**-5}
    honest, shifted, _, _ = exp.error_shift_claims(m, (0.2, 0.5), 1.5)
    assert honest.passed and "rho=1.5" in honest.claim
    assert shifted.finding and not shifted.passed and "rho_scale != 1" in shifted.note
    assert shifted.bound == f"== {1.5**-5 + 0.2 * 1.5**-4 * (1 - 1 / 1.5):.6g}"
    # an fbs that is not finite (a failed LP) is no premise that fails: the rows gate, and fail,
    # even where the value meets rho's target
    m |= {"error_shift/rho": 2.0, "error_shift/fbs": math.nan, "error_shift/honest": 2.0**-5}
    _, right, off, _ = exp.error_shift_claims(m, (0.2, 0.5), 1.5)
    assert not (right.finding or right.passed or off.finding or off.passed)


def test_sampled_debate_chunks_draw_from_keys_no_other_chunk_uses(monkeypatch):
    """Chunk 0 splits its key into children 0 and 1; later chunks were ``fold_in(key, c)``, and
    ``split(key)[1] == fold_in(key, 1)`` (jax_threefry_partitionable): chunk 1 replayed chunk 0's
    naive debates' keys. Chunk 0 keeps ``key`` (the default size runs one chunk, unchanged)."""
    import jax
    import numpy as np

    from experiments.prover_estimator import zoo

    seen = []

    def fake(params, trees, dps, per_tree, per_tree_naive, key):
        seen.append(key)
        n = trees.truth.shape[0]
        return np.zeros((len(dps), n, per_tree)), np.zeros((n, per_tree_naive))

    monkeypatch.setattr(zoo, "sampled_obfuscation", fake)
    cfg = exp.Config(obf_trees=8, obf_episodes=600_000, naive_episodes=600_000)
    key = jax.random.key(7)
    zoo.sampled_debates(cfg, None, jax.random.key(1), key)
    assert len(seen) >= 3 and jax.random.key_data(seen[0]).tolist() == (
        jax.random.key_data(key).tolist()
    )
    data = [tuple(np.asarray(jax.random.key_data(k)).ravel()) for k in seen]
    children = {
        tuple(np.asarray(jax.random.key_data(c)).ravel()) for k in seen for c in jax.random.split(k)
    }
    assert len(set(data)) == len(data) and not set(data) & children


def test_honest_selection_breaks_float32_ties_the_same_way_in_every_program():
    """Honest A vs error-shifting B (e = 1) on the default run's noisy-evidence trees (seed 0),
    whose subclaims' errors tie exactly: the batched section and each tree alone give the same
    least payoff (before the tie tolerance, 0.1389 batched and 0.125 alone, both >= the bound)."""
    import jax
    import numpy as np

    from dedebate.agents import ped_strategies as ps
    from dedebate.lab.context import experiment_key
    from dedebate.trees import stability as st
    from experiments.prover_estimator import zoo

    cfg = exp.Config()
    keys = exp._keys(experiment_key(0, exp.NAME))
    (lookup, fbs32), _, _ = zoo.lookups(cfg)
    dyn = {k: np.asarray(getattr(cfg, k), np.float32) for k in exp.DYNAMIC}
    batch = jax.jit(lambda d: zoo.completeness_metrics(cfg, keys, lookup, fbs32, d))(dyn)
    e1, rho = len(cfg.shift_errors) - 1, float(batch["rho"])  # shift_errors end at e = 1

    @jax.jit
    def alone(k):
        tree = zoo.noisy(k, depth=cfg.noisy_depth)
        est = ps.ErrorShiftingEstimator(np.float32(1.0), st.error_shifting_table_jnp(tree, lookup))
        return zoo._exact_u(zoo._params(np.float32(rho)), ps.honest_prover(), est, tree)

    single = [alone(k) for k in jax.random.split(keys["noisy"], cfg.noisy_trees)]
    assert float(batch[f"error_shifting_min/{e1}"]) == float(np.min(single))
    r, d = 1 / rho, cfg.noisy_depth
    assert np.min(single) >= r ** (d + 1) + r**d * (1 - r) - exp.TOL  # Thm 6.1(1), e = 1


def test_the_sections_reduce_each_bs_payoffs_over_the_trees():
    """Two trees whose payoffs differ in every column: each B's min over the trees (the random
    joints from column 3 on), the unstable prover's and the wrong direction's max, and honest A's
    and the naive liar's largest deviation on either side of their exact value."""
    import numpy as np

    from experiments.prover_estimator import zoo

    u_zoo = np.array([[0.234375, 0.5, 0.5, 0.375, 0.75], [0.1875, 0.625, 0.3125, 0.875, 0.5]])
    es, unstable = np.array([[0.5, 0.25], [0.375, 0.75]]), np.array([[0.0, 0.125], [0.0, 0.0625]])
    c = {k: float(v) for k, v in zoo.completeness_summary(u_zoo, es, unstable, 0.21875).items()}
    assert c == {
        "honest_min": 0.1875,
        "honest_dev": 0.03125,  # the second tree's, below 7/32
        "root_liar_min": 0.5,
        "constant_half_min": 0.3125,
        "random_joint_min": 0.375,  # the first random joint's, on the first tree
        "error_shifting_min/0": 0.375,
        "error_shifting_min/1": 0.25,
        "unstable_min": 0.0,
        "unstable_max_e1": 0.125,
        "worst_minus_margin": 0.1875 - 0.21875,
    }
    liars = np.array([[0.0, -0.125, 0.0625, 0.25], [0.03125, 0.0, -0.25, 0.5]])
    honests = np.array([[0.125, 0.0625], [0.09375, 0.03125]])
    naive_liar, naive_honest = np.array([0.75, 0.9375]), np.array([1.0, 0.96875])
    o = zoo.obfuscation_summary(liars, honests, naive_liar, naive_honest, 0.1171875, 0.875)
    assert {k: float(v) for k, v in o.items()} == {
        "liar_max_abs/0": 0.03125,
        "liar_max_abs/1": 0.125,
        "liar_max_abs/2": 0.25,
        "liar_max": 0.0625,
        "stable_liar_max": 0.5,
        "wrong_direction_max": 0.0625,
        "honest_min": 0.09375,
        "honest_dev": 0.0234375,  # the second tree's, below 15/128
        "naive_liar_mean": 0.84375,
        "naive_liar_dev": 0.125,  # the first tree's, below 7/8
        "naive_honest_min": 0.96875,
        "ped_gap": 0.09375 - 0.0625,
        "naive_gap": 0.96875 - 0.9375,
    }
