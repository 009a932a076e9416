"""``dedebate.programs.jit``: every float32 product of a compiled program is a true float32 one."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp

from dedebate.programs import jit

DOT = re.compile(r"stablehlo\.dot_general[^\n]*")


def _dots(lowered) -> list[str]:
    return DOT.findall(lowered.as_text())


def test_jit_pins_every_product_also_in_gradients_and_static_arguments():
    @jit(static_argnums=1)
    def f(a, n):
        g = jax.grad(lambda x: jnp.sum(jnp.tanh(x @ x) @ x))(a)
        return jnp.einsum("ij,jk->ik", g, a) * n

    a = jnp.ones((3, 3), jnp.float32)
    dots = _dots(f.lower(a, 2))
    assert len(dots) >= 4 and all("precision = [HIGHEST, HIGHEST]" in d for d in dots)
    assert float(f(a, 2)[0, 0]) == float(jax.jit(lambda a: f(a, 2))(a)[0, 0])


TRACES: list[int] = []


def _square(x):
    TRACES.append(1)
    return x @ x


def test_jitting_a_module_level_function_twice_traces_it_once_as_jax_jit_does():
    """The precision wrapper is shared per module-level function, so JAX's trace and compile
    caches (keyed by the function jitted) serve every ``jit(f)`` of it."""
    x = jnp.ones((2, 2), jnp.float32)
    for _ in range(3):
        jit(_square)(x)
    assert len(TRACES) == 1


def test_exact_payoff_programs_pin_every_product():
    """The programs behind the exact rows (emulated TF32 products moved the stackelberg chaining
    row by up to 7.8e-5): the players' networks, the path sums, the estimators."""
    from experiments.stackelberg import Config, runs

    cfg = Config(depth=1, n_trees=2)
    st = runs.static(cfg)
    trees = runs.make_trees(jax.random.key(0), cfg.n_trees, cfg.depth, True)
    carry = runs.sb.init_carry(st, trees, jax.random.key(1), 1.0)
    a, b = runs.sb.players(st, trees, carry)
    batch = jax.tree.map(lambda x: x[None], (a, b, trees))
    dots = _dots(runs.proof_grid(st, 2.0).lower(*batch))
    assert len(dots) >= 10 and all("precision = [HIGHEST, HIGHEST]" in d for d in dots)
