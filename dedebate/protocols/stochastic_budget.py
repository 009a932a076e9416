"""Sample budgets of the stochastic-oracle debate: Lean's N_V recomputed on the host, and the
empirical budget frontier of a sweep over a common factor on (N_A, N_B, N_V).

The frontier is an empirical finding (no theorem settles it): per (K, T) cell of a sweep's rows,
the smallest factor before the first at which the zoo's completeness falls below 3/5 or its
soundness rises above 2/5 (spec DED 5.4), set against Lean's proven counts (spec DED 5.2).
"""

from __future__ import annotations

import re

import numpy as np

from dedebate.core.samples import hoeffding_samples
from dedebate.protocols.stochastic import lean_defaults

CELL = re.compile(r"K(\d+)_T(\d+)")


def lean_n_vera(K: float, T: int) -> int:
    """Vera's sample count from Lean's formula, apart from the debate's constants.

    Args:
        K: the Lipschitz constant.
        T: the number of steps.

    Returns:
        ``samples((s - c) / 2, v)`` (:func:`dedebate.core.samples.hoeffding_samples`) at Lean's
        defaults for (K, T).
    """
    lp = lean_defaults(K, T)
    return hoeffding_samples((lp.s - lp.c) / 2, lp.v)


def frontier(rows) -> list[dict]:
    """The budget frontier of a sweep over ``scale``, from its rows.

    Per (K, T) cell ``K{K}_T{T}`` (and per value of any other swept axis than ``Ks`` / ``Ts``),
    going down the factors from the largest, the smallest factor before the first at which the
    mean over seeds of ``completeness_min`` falls below 3/5 or that of ``soundness_max`` rises
    above 2/5. Cells of other names (e.g. the paper's constants) are skipped.

    Args:
        rows: ``sweep.csv`` rows (dicts), with a ``scale`` column and ``{cell}/completeness_min``,
            ``{cell}/soundness_max``, ``{cell}/n_alice``, ``/n_bob``, ``/n_vera`` metrics
            (``None`` where a row has no such cell).

    Returns:
        One dict per cell: ``K``, ``T``, ``others`` (the other axes), ``factor`` (``None``: the
        largest factor already fails), ``tried`` (the factors' means), ``lean`` (Lean's proven
        counts), ``seeds`` and, where a factor holds, the frontier's ``counts``.
    """
    groups: dict[tuple, dict[float, list[dict]]] = {}
    for r in rows:
        others = tuple(sorted((k, str(v)) for k, v in r.items()
                              if "/" not in k
                              and k not in ("point", "seed", "group", "scale", "Ks", "Ts")))
        for k in r:
            cell = k.split("/")[0]
            if (k.endswith("/completeness_min") and r[k] is not None  # None: another K's row
                    and CELL.fullmatch(cell)):
                groups.setdefault((cell, others), {}).setdefault(float(r["scale"]), []).append(r)
    out = []
    for (cell, others), by_f in groups.items():
        K, T = (int(x) for x in CELL.fullmatch(cell).groups())
        lean = lean_defaults(float(K), T).constants(float(K), T)

        def mean(rs, m, cell=cell):
            return float(np.mean([float(r[f"{cell}/{m}"]) for r in rs]))

        best, tried = None, []
        for f in sorted(by_f, reverse=True):
            c, snd = mean(by_f[f], "completeness_min"), mean(by_f[f], "soundness_max")
            tried.append({"factor": f, "completeness_min": c, "soundness_max": snd})
            if not (c >= 3 / 5 and snd <= 2 / 5):
                break
            best = f
        e = {"K": K, "T": T, "others": dict(others), "factor": best, "tried": tried,
             "lean": (lean.n_alice, lean.n_bob, lean.n_vera),
             "seeds": len(by_f[max(by_f)])}
        if best is not None:
            rs = by_f[best]
            e["counts"] = tuple(int(rs[0][f"{cell}/{n}"]) for n in ("n_alice", "n_bob", "n_vera"))
        out.append(e)
    return sorted(out, key=lambda e: (sorted(e["others"].items()), e["K"], e["T"]))
