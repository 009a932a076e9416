"""One outcome shape: every protocol's play function returns an outcome with the costs record
``costs`` (:class:`~dedebate.protocols.costs.Costs`) and the verdict ``alice_wins`` (the
prover-estimator debate: the payoff ``u_a`` instead), as ``docs/outcomes.md`` describes.

Shapes only: ``jax.eval_shape`` traces each play function on a tiny instance without compiling.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.agents.deterministic_players import det_honest_alice, make_bob
from dedebate.agents.ped_strategies import constant_estimator, honest_prover
from dedebate.agents.stochastic_players import honest_alice, honest_bob
from dedebate.machines.configurations import config_machine, index_tree, random_programs
from dedebate.machines.fixtures import f2_target
from dedebate.protocols import prover_estimator, stochastic
from dedebate.protocols.binary_search import play_binary_search
from dedebate.protocols.costs import Costs
from dedebate.protocols.cross_exam import play_cross_exam
from dedebate.protocols.det_witness import plan_task, play_witness
from dedebate.protocols.naive_recursive import UniformChallenger, naive_debater, play_naive
from dedebate.trees import hidden_flaw_tree

T = 5
KEY = jax.random.key(0)
COST_FIELDS = ("alice_queries", "bob_queries", "verifier_queries", "bits_read", "rounds")
OLD_NAMES = {
    "verdict",
    "accept",
    "survived",
    "rounds",
    "n_rounds",
    "bits_read",
    "v_queries",
    "a_queries",
    "b_queries",
    "judge_queries",
    "queries_alice",
    "queries_bob",
    "queries_vera",
}


@functools.cache
def _stochastic(bob_draw):
    fx = f2_target(T, 0.8)
    c = stochastic.lean_defaults(1.0, T).constants(1.0, T)
    spec = stochastic.debate_static(T, bob_draw=bob_draw)
    return jax.eval_shape(
        lambda k: stochastic.play(
            spec, fx.machine, honest_alice(c), honest_bob(c), stochastic.make_vera(c), k
        ),
        KEY,
    )


def _deterministic(which):
    progs = random_programs(1, 2, T, n_inputs=2, n_deps=(1, 2), dep_window=3)
    prog, alice, bob = index_tree(progs, 0), det_honest_alice(T), make_bob("honest")
    if which == "cross_exam":
        return jax.eval_shape(play_cross_exam, prog, alice, bob)
    if which == "binary_search":
        return jax.eval_shape(play_binary_search, index_tree(config_machine(progs), 0), alice, bob)
    task = plan_task(0, 2)
    task = task.replace(program=index_tree(task.program, 0))
    return jax.eval_shape(
        play_witness, task, jnp.zeros(task.n_w, jnp.int8), det_honest_alice(task.program.T), bob
    )


def _tree():
    return hidden_flaw_tree(jax.random.key(1), depth=2, q=2)


def _naive():
    return jax.eval_shape(
        lambda k: play_naive(naive_debater("honest"), UniformChallenger(), _tree(), k), KEY
    )


def _ped():
    params = prover_estimator.ped_params(2.0)
    return jax.eval_shape(
        lambda k: prover_estimator.play(
            prover_estimator.PEDStatic(), params, honest_prover(), constant_estimator(), _tree(), k
        ),
        KEY,
    )


PLAYS = {
    "stochastic": lambda: _stochastic("count"),
    "stochastic_lazy": lambda: _stochastic("lazy"),
    "cross_exam": lambda: _deterministic("cross_exam"),
    "binary_search": lambda: _deterministic("binary_search"),
    "det_witness": lambda: _deterministic("witness"),
    "naive_recursive": _naive,
    "prover_estimator": _ped,
}


@pytest.mark.parametrize("name", sorted(PLAYS))
def test_every_outcome_carries_costs_and_the_verdict(name):
    out = PLAYS[name]()
    assert isinstance(out.costs, Costs), type(out.costs)
    assert tuple(f.name for f in dataclasses.fields(out.costs)) == COST_FIELDS
    leaves = [getattr(out.costs, f) for f in COST_FIELDS]
    chex.assert_shape(leaves, ())  # one scalar count per debate
    assert all(leaf.dtype in (jnp.int32, jnp.float32) for leaf in leaves), leaves
    fields = {f.name for f in dataclasses.fields(out)}
    assert not fields & OLD_NAMES, fields & OLD_NAMES  # the costs live in one place only
    if name == "prover_estimator":  # a payoff, no verdict (docs/outcomes.md)
        assert "alice_wins" not in fields and out.u_a.dtype == jnp.float32
    else:
        chex.assert_shape(out.alice_wins, ())
        chex.assert_type(out.alice_wins, jnp.bool_)


def test_stochastic_costs_keep_their_dtypes():
    """Sample counts times steps can pass 2^31: Alice's and Bob's charged queries stay float32;
    Vera's samples (at most N_V, which passes 2^24 with the paper's constants) are exact int32."""
    c = _stochastic("count").costs
    chex.assert_type(
        [getattr(c, f) for f in COST_FIELDS],
        [jnp.float32, jnp.float32, jnp.int32, jnp.int32, jnp.int32],
    )


def test_the_docs_describe_every_cost_field():
    page = (Path(__file__).resolve().parents[2] / "docs" / "outcomes.md").read_text("utf-8")
    assert "## Costs" in page and "## Verdict" in page
    rows = {line.split("|")[1].strip(" `") for line in page.splitlines() if line.startswith("| `")}
    assert set(COST_FIELDS) <= rows, set(COST_FIELDS) - rows
    assert np.all([f"`{f}`" in page for f in ("alice_wins", "u_a")])
