"""Every plot of a quantity that a claim compares with a bound draws that bound, labelled.

Each experiment's figure function is fed small made-up rows; the bound is recomputed here from
its formula and must be the data of a labelled line, band or span of the figure.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

from experiments import deterministic_debate, stackelberg, stochastic_debate, stochastic_selfplay

matplotlib.use("Agg")


def _drawn(ax) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``{label: (x, lower, upper)}`` of the labelled artists of ``ax``: a line (lower = upper
    = its y), a band (``fill_between``: its polygon's least and largest y at each x) or a
    horizontal span (x = nan)."""
    out = {}
    for artist, label in zip(*ax.get_legend_handles_labels()):
        if isinstance(artist, matplotlib.lines.Line2D):
            y = np.asarray(artist.get_ydata(), float)
            out[label] = (np.asarray(artist.get_xdata(), float), y, y)
        elif isinstance(artist, matplotlib.collections.PolyCollection):
            v = artist.get_paths()[0].vertices
            xs = np.unique(v[:, 0])
            out[label] = (
                xs,
                np.array([v[v[:, 0] == x, 1].min() for x in xs]),
                np.array([v[v[:, 0] == x, 1].max() for x in xs]),
            )
        elif isinstance(artist, matplotlib.patches.Patch):  # axhspan: y in data coordinates
            y = artist.get_patch_transform().transform(artist.get_path().vertices)[:, 1]
            out[label] = (np.array([math.nan]), np.array([y.min()]), np.array([y.max()]))
    return out


def _has(ax, x, lower, upper=None) -> list[str]:
    """The labels of ``ax`` whose artist has exactly the data ``(x, lower, upper)``."""
    upper = lower if upper is None else upper
    return [
        lab
        for lab, (xs, lo, hi) in _drawn(ax).items()
        if len(xs) == len(np.atleast_1d(x))
        and np.allclose(xs, x, equal_nan=True)
        and np.allclose(lo, lower)
        and np.allclose(hi, upper)
    ]


def test_stochastic_queries_plot_draws_n_vera_and_alices_bound():
    """queries_vs_T: Vera's queries under N_V and Alice's against 5000 K^2 T ln(200T) (both
    checked by cost_rows), one labelled line each per K."""
    Ts = np.array([8.0, 64.0, 256.0])
    qrows = [
        {
            "K": K,
            "T": int(T),
            "constants": "lean",
            "alice": 4000.0 * K * T,
            "bob": 100.0 * K * T,
            "vera_max": 900.0 * K,
            "n_vera": stochastic_debate.lean_n_vera(float(K), int(T)),
        }
        for K in (1, 2)
        for T in Ts
    ]
    fig = stochastic_debate.plot_queries(qrows, {"c": 4990.0})
    (ax,) = fig.axes
    for K in (1, 2):
        n_v = [stochastic_debate.lean_n_vera(float(K), int(T)) for T in Ts]
        assert any("N_V" in lab for lab in _has(ax, Ts, n_v)), (K, _drawn(ax).keys())
        assert _has(ax, Ts, 5000 * K**2 * Ts * np.log(200 * Ts)), (K, _drawn(ax).keys())


def _cost_rows():
    """Cost rows as :func:`cost_table` gives them, T = 8, 16, 32, l = 1 and 3."""
    rows = []
    for T in (8, 16, 32):
        m = int(math.ceil(math.log2(T)))
        for proto, S in (("fig3_full", 3 * T), ("fig3_window", 12)):
            rows.append(
                {
                    "T": T,
                    "protocol": proto,
                    "l": 1,
                    "m": m,
                    "S": S,
                    "bits_read": (m + 1) * S + m,
                    "bits_read_max_over_zoo": (m + 1) * S + m,
                    "a_steps": T,
                    "b_steps": T - 1,
                }
            )
        for l in (1, 3):
            rows.append(
                {
                    "T": T,
                    "protocol": "fig4",
                    "l": l,
                    "m": m,
                    "S": None,
                    "bits_read": 6 * m,
                    "bits_read_max_over_zoo": (l + 3) * m,
                    "a_steps": T,
                    "b_steps": T,
                }
            )
    return rows


def test_deterministic_cost_plot_draws_the_claims_bands():
    """deterministic_costs: bits V reads inside [1, 2] x S log2 T (Fig 3) and
    [1, 2] x (l+2) log2 T (Fig 4), the provers' steps under 2T."""
    rows = _cost_rows()
    fig = deterministic_debate._plot(rows)
    bits, work = fig.axes
    T = np.array([8.0, 16.0, 32.0])
    m = np.ceil(np.log2(T))
    for S in (3 * T, np.full(3, 12.0)):  # full-tape, register configurations
        assert _has(bits, T, S * m, 2 * S * m), list(_drawn(bits))
    for l in (1, 3):
        assert _has(bits, T, (l + 2) * m, 2 * (l + 2) * m), list(_drawn(bits))
        # the Fig 4 curve is what its claim bounds: the worst case over the zoo
        assert _has(bits, T, (l + 3) * m), list(_drawn(bits))
    assert _has(work, T, 2 * T), list(_drawn(work))


def test_selfplay_plot_draws_b_on_the_tracking_panel():
    """stochastic_selfplay: the tracking rows compare |p - pi| with b: drawn on its panel,
    beside Lean's guaranteed sides on the acceptance panel."""
    cfg = stochastic_selfplay.Config()
    rng = np.random.default_rng(0)
    mons = [
        SimpleNamespace(value=rng.uniform(0, 1, (2, 5)), tracking=rng.uniform(1e-3, 1, (2, 5)))
        for _ in range(2)
    ]
    fig = stochastic_selfplay.plot_training(cfg, mons, ["yes", "no"], 0.025)
    acc, track = fig.axes[:2]
    assert _has(track, [0, 1], [0.025, 0.025]), list(_drawn(track))
    comp, sound = stochastic_selfplay.guaranteed_sides(cfg.T)
    assert _has(acc, [0, 1], [comp, comp]) and _has(acc, [0, 1], [sound, sound])


def test_stackelberg_plot_draws_the_payoff_band():
    """stackelberg schedules: the final-payoff row's band rho^-(d+1) (1 +- tol) is drawn."""
    cfg = SimpleNamespace(steps=6, seeds=2, tol=0.1)
    rng = np.random.default_rng(0)
    mon = SimpleNamespace(
        **{k: rng.uniform(0.01, 1, (2, 2, 6)) for k in ("u_a", "a_correct", "max_adv")}
    )
    thr = 2.0**-5
    fig = stackelberg.plot_schedules(cfg, mon, ["n_B = 5", "simultaneous"], thr)
    assert _has(fig.axes[0], [math.nan], [thr * 0.9], [thr * 1.1]), list(_drawn(fig.axes[0]))
    assert _has(fig.axes[0], [0, 1], [thr, thr])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")
