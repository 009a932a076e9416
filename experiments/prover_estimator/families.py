"""The claim-tree families of a Theorem 6.1 report, with the LP results jitted code indexes (spec
PED 9.2-9.5).

:class:`Families` builds, from a key, the three families the report plays on: noisy-evidence trees
(q = 9, Thr_5, with an AND decomposition as the unstable alternative), the tight error-shifting
tree (q = 5, Thr_3, depth 4: fbs = 2 at every node) and hidden-flaw trees (an AND of q with one
flawed child). :meth:`Families.lookups` solves the fbs LPs of every child code those families can
produce, once, on the host (scipy), so that swept JAX code only indexes them;
:meth:`Families.tree_rhos` solves the rho of the library trees.
:data:`DIRECTION_POLICIES` are the obfuscating liar's direction policies.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from dedebate.trees import hidden_flaw_tree, noisy_evidence_tree, unanimous_tree
from dedebate.trees.stability import lp_lookup, tree_rho

DIRECTION_POLICIES = {
    "always +1": (0.0, 0.0, 1.0),
    "always -1": (1.0, 0.0, 0.0),
    "random +-1": (0.5, 0.0, 0.5),
}
"""The obfuscating liar's direction policies: probabilities of the directions (-1, 0, +1)."""

SYMMETRIC_POLICIES = ("random +-1",)
"""Direction policies whose exact E[U_A] is 0 against any estimator (not only the calibrated one):
their exact row is a consistency check, not a claim about B."""

TIGHT_DEPTH = 4
"""Depth of the tight error-shifting tree (q = 5, Thr_3: fbs = 2 at every node)."""


@dataclasses.dataclass(frozen=True)
class Families:
    """The tree families of a report: noisy-evidence trees of depth ``noisy_depth``, the tight
    error-shifting tree, hidden-flaw trees of width ``obf_q`` and depth ``obf_depth``."""

    noisy_depth: int
    obf_q: int
    obf_depth: int

    def noisy(self, key):
        """A noisy-evidence tree (q = 9, Thr_5; candidate 1 is the unstable AND alternative)."""
        return noisy_evidence_tree(key, depth=self.noisy_depth, unstable_alternative=True)

    def tight(self, key):
        """The tight error-shifting tree (q = 5, Thr_3 with 4 / 1 true children, depth 4)."""
        return noisy_evidence_tree(
            key, depth=TIGHT_DEPTH, q=5, t=3, true_counts=(4,), false_counts=(1,)
        )

    def hidden_flaw(self, key):
        """A hidden-flaw tree (an AND of ``obf_q`` children, one flawed)."""
        return hidden_flaw_tree(key, depth=self.obf_depth, q=self.obf_q)

    def lookups(self) -> tuple[list[dict], list[np.ndarray]]:
        """``(lookups, fbs32)``: the LP results of every (table, true child code) of the families.

        Solved on the host (scipy HiGHS) for the child popcounts the families can produce: Thr_5 of
        9 with 0-1 / 8-9 true children and the AND alternative; Thr_3 of 5 with 1 / 4; a hidden-flaw
        AND of ``obf_q``. ``fbs32``: the fbs rounded to 9 decimals as float32.
        """
        q = self.obf_q
        lookups = [
            lp_lookup(f(jax.random.key(0)).tables, pops)
            for f, pops in (
                (self.noisy, (0, 1, 8, 9)),
                (self.tight, (1, 4)),
                (self.hidden_flaw, (0, q - 1, q)),
            )
        ]
        return lookups, [np.round(lk["fbs"], 9).astype(np.float32) for lk in lookups]

    def tree_rhos(self, noisy_keys, unanimous_key) -> tuple[float, float, float]:
        """rho (max LP fbs over internal nodes) of the noisy trees (max; NaN if any), the unanimous
        tree and the noisy tree's AND alternative; equal (table, child code) LPs are solved once.
        """
        cache: dict = {}
        trees = noisy_evidence_tree(noisy_keys, depth=self.noisy_depth, unstable_alternative=True)
        n = jax.tree.leaves(trees)[0].shape[0]
        tree_list = [jax.tree.map(lambda x, i=i: x[i], trees) for i in range(n)]
        rhos = [float(tree_rho(t, cache=cache)) for t in tree_list]
        rho_noisy = math.nan if any(math.isnan(r) for r in rhos) else max(rhos)  # fails closed
        rho_uni = tree_rho(unanimous_tree(unanimous_key, depth=2), cache=cache)
        return rho_noisy, rho_uni, tree_rho(tree_list[0], cand=1, cache=cache)
