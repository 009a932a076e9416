"""The fbs closed forms tabulated against the LPs (spec PED 3.2, 3.3, 3.4).

:func:`fbs_rows` puts the closed forms of :mod:`dedebate.trees.stability` (thresholds, AND, OR,
majority, parity, dictator) beside the packing LP and its dual at every point with the first w
bits set; :func:`flip_rows` puts the worst-case flip probability ``F(eps)`` (an LP) beside
``eps * fbs`` for ``eps <= 1/q``. Host only (scipy HiGHS): the rows a report checks.
"""

from __future__ import annotations

from dedebate.trees.library import (
    and_table,
    dictator_table,
    majority_table,
    or_table,
    parity_table,
    threshold_table,
)
from dedebate.trees.stability import (
    fbs,
    fbs_and,
    fbs_dual,
    fbs_majority,
    fbs_or,
    fbs_parity,
    fbs_threshold,
    flip_probability,
)


def fbs_rows(qs) -> list[dict]:
    """Rows ``(family, q, t, w, lp, dual, closed)``: fbs by the LP, its dual, closed form.

    For every width q, each family at the point with the first w bits set: thresholds Thr_t for
    every t, AND, OR, parity, dictator, majority for odd q.
    """
    rows = []

    def add(family, q, t, w, table, closed):
        z = (1 << w) - 1
        rows.append(
            {
                "family": family,
                "q": q,
                "t": t,
                "w": w,
                "lp": fbs(table, z),
                "dual": fbs_dual(table, z),
                "closed": float(closed),
            }
        )

    for q in qs:
        for t in range(1, q + 1):
            tab = threshold_table(q, t)
            for w in range(q + 1):
                add("threshold", q, t, w, tab, fbs_threshold(q, t, w))
        for w in range(q + 1):
            add("AND", q, q, w, and_table(q), fbs_and(q, w))
            add("OR", q, 1, w, or_table(q), fbs_or(q, w))
            add("parity", q, 0, w, parity_table(q), fbs_parity(q))
            add("dictator", q, 0, w, dictator_table(q), 1.0)
            if q % 2 == 1:
                add("majority", q, (q + 1) // 2, w, majority_table(q), fbs_majority(q, w))
    return rows


def flip_rows(qs) -> list[dict]:
    """``F(eps)`` by LP against ``eps * fbs`` for thresholds at eps in {0.01, 1/q} (spec 3.3)."""
    rows = []
    for q in qs:
        if q > 5:
            continue
        for t in range(1, q + 1):
            tab = threshold_table(q, t)
            for w in range(q + 1):
                z = (1 << w) - 1
                f = fbs(tab, z)
                for eps in (0.01, 1.0 / q):
                    rows.append(
                        {
                            "q": q,
                            "t": t,
                            "w": w,
                            "eps": eps,
                            "F": flip_probability(tab, z, eps),
                            "eps_fbs": eps * f,
                        }
                    )
    return rows
