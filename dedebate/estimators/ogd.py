"""Algorithm 1: online gradient descent producing a (delta, F)-indistinguishable h (spec PED 5.3).

Tabular over a finite context set X (``h: [X, Z]``): from the uniform h_1, each update picks the
test with the largest exact |Adv| (spec 5.1), freezes it at h_t and takes a projected step
``h_{t+1}(x, .) = Proj_{Delta_Z}(h_t(x, .) + eta_t sign(Adv) F_t(x, .))``; the loop exits when
``max_f |Adv_f| < delta``. Step sizes ``eta_t = D / (G sqrt t)`` (:data:`STEP_RULES`):
``"hazan"`` (D = 2, G = 2 sqrt|Z|; ``T <= 36 |Z| / delta^2``) or ``"tight"`` (D = sqrt 2,
G = sqrt|Z|; ``T <= 4.5 |Z| / delta^2``), by the regret bound of spec 5.4 and 5.5.

:func:`ogd_solve` is a ``lax.while_loop`` capped at the proven bound for the chosen rule (it
cannot be reached if the theorem holds; ``converged`` reports it); :func:`ogd_run_steps` runs a
fixed number of masked updates for chunked drivers. :func:`algorithm1` validates and runs it
under ``jit``; :func:`solve_block` / :func:`solve_grid` vmap it over problems and deltas. The
final h costs ``T |Z|`` test evaluations (spec 5.6).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dedebate.core.simplex import PROJECTIONS, project_rows
from dedebate.estimators.advantage import OIProblem, advantages
from dedebate.programs import FAST_COMPILE, jit, program_cache

Array = jax.Array

# rule -> (D, G / sqrt|Z|): diameter of {Psi h} and the subgradient-norm bound per sqrt|Z|.
STEP_RULES = {"hazan": (2.0, 2.0), "tight": (math.sqrt(2.0), 1.0)}


def _rule(rule: str) -> tuple[float, float]:
    """``(D, G / sqrt|Z|)`` of a rule named in :data:`STEP_RULES`."""
    if rule not in STEP_RULES:
        raise ValueError(f"step_rule={rule!r}: allowed values are {sorted(STEP_RULES)}")
    return STEP_RULES[rule]


def step_size(rule: str, n_z: int, t):
    """``eta_t = D / (G sqrt t)`` for the named rule (spec PED 5.3)."""
    d, g_per = _rule(rule)
    return d / (g_per * math.sqrt(n_z) * jnp.sqrt(t))


def regret_bound(rule: str, n_z: int, steps):
    """Hazan's Theorem 3.1 bound ``(3/2) G D sqrt(T)`` on ``sum_t |Adv_{f_t}(h_t)|`` (spec 5.4)."""
    d, g_per = _rule(rule)
    return 1.5 * g_per * math.sqrt(n_z) * d * jnp.sqrt(steps)


def iteration_bound(rule: str, n_z: int, delta):
    """``T <= ((3/2) G D)^2 / delta^2`` (spec PED 5.5): 36 or 4.5 ``|Z| / delta^2``, unrounded."""
    d, g_per = _rule(rule)
    return (1.5 * g_per * d) ** 2 * n_z / (delta * delta)


@dataclasses.dataclass(frozen=True)
class OGDStatic:
    """Static settings of Algorithm 1 (jit treats them as constants).

    ``step_rule``: "hazan" or "tight" (see module doc); ``trace_len``: size of the advantage-trace
    buffer (entries past it are dropped); ``max_steps``: optional extra cap on the number of
    updates (``None``: only the proven bound caps the loop); ``projection``: the per-row simplex
    projection, "sort" (:func:`dedebate.core.project_rows_to_simplex`), "pairwise" (sort-free,
    small |Z|, :mod:`dedebate.core.simplex`) or "auto" (pairwise for |Z| <= 32). All
    are the exact Euclidean projection.
    """

    step_rule: str = "hazan"
    trace_len: int = 512
    max_steps: int | None = None
    projection: str = "auto"

    def __post_init__(self):
        if self.step_rule not in STEP_RULES:
            raise ValueError(
                f"step_rule={self.step_rule!r}: allowed values are {sorted(STEP_RULES)}"
            )
        if not isinstance(self.trace_len, int) or self.trace_len < 1:
            raise ValueError(f"trace_len={self.trace_len!r}: need an integer >= 1")
        if self.max_steps is not None and (
            not isinstance(self.max_steps, int) or self.max_steps < 0
        ):
            raise ValueError(f"max_steps={self.max_steps!r}: need None or an integer >= 0")
        if self.projection not in PROJECTIONS:
            raise ValueError(f"projection={self.projection!r}: allowed values are {PROJECTIONS}")


@struct.dataclass
class OGDState:
    """Carry of Algorithm 1.

    ``h``: the current prediction h_{T+1} ``[X, Z]``; ``adv``: its advantages ``[F]``;
    ``steps``: T, the number of updates taken; ``trace[t]``: ``max_f |Adv_f(h_{t+1})|`` for
    t = 0..T (NaN beyond); ``chosen[t]``: the test f_{t+1} used by update t+1 (-1 beyond);
    ``regret_sum``: ``sum_t |Adv_{f_t}(h_t)|``, the left side of the regret bound, summed with
    Kahan's compensation ``regret_carry`` (a float32 running sum loses its terms once it is 2^24
    times larger than them; runs may take up to 36 |Z| / delta^2 steps).
    """

    h: Array
    adv: Array
    steps: Array
    trace: Array
    chosen: Array
    regret_sum: Array
    regret_carry: Array

    @property
    def max_adv(self) -> Array:
        """``max_f |Adv_f(h)|`` of the current prediction."""
        return jnp.max(jnp.abs(self.adv))


def ogd_init(static: OGDStatic, family, problem: OIProblem) -> OGDState:
    """Algorithm 1's first state: h_1 = uniform on Z for every x, and its advantages."""
    h = jnp.full((problem.n_x, problem.n_z), 1.0 / problem.n_z, problem.g.dtype)
    # The barrier keeps XLA from folding the broadcast constant into the tests' fused
    # dot+reduce: jaxlib 0.10.2's CPU YNN reduce fusion returns wrong numbers (or NaN) for a dot
    # with a broadcast-constant operand (cf. jax-ml/jax#39103).
    h = jax.lax.optimization_barrier(h)
    adv = advantages(family, problem, h)
    trace = jnp.full((static.trace_len,), jnp.nan, h.dtype).at[0].set(jnp.max(jnp.abs(adv)))
    return OGDState(
        h=h,
        adv=adv,
        steps=jnp.zeros((), jnp.int32),
        trace=trace,
        chosen=jnp.full((static.trace_len,), -1, jnp.int32),
        regret_sum=jnp.zeros((), h.dtype),
        regret_carry=jnp.zeros((), h.dtype),
    )


def _compensated_add(total, carry, x):
    """Kahan's ``total + x`` with the low-order part lost so far in ``carry``."""
    y = x - carry
    new = total + y
    return new, (new - total) - y


def _step_cap(static: OGDStatic, n_z: int, delta) -> Array:
    """The largest T the proven bound allows (and ``static.max_steps`` if set), as int32."""
    bound = jnp.floor(iteration_bound(static.step_rule, n_z, jnp.asarray(delta, jnp.float32)))
    cap = jnp.minimum(bound, 2.0**31 - 2).astype(jnp.int32)
    if static.max_steps is not None:
        cap = jnp.minimum(cap, static.max_steps)
    return cap


def ogd_update(static: OGDStatic, family, problem: OIProblem, state: OGDState, active) -> OGDState:
    """One update of Algorithm 1 (spec PED 5.3), taken only where ``active`` (else a no-op)."""
    i = jnp.argmax(jnp.abs(state.adv))
    a_i = state.adv[i]
    t = state.steps + 1
    eta = step_size(static.step_rule, problem.n_z, t.astype(state.h.dtype))
    f_t = family.value_of(i, state.h)  # F_t(x, z) = f_t(x, z, h_t(x))
    h_new = project_rows(state.h + (eta * jnp.sign(a_i)) * f_t, static.projection)
    adv_new = advantages(family, problem, h_new)
    regret_sum, regret_carry = _compensated_add(state.regret_sum, state.regret_carry, jnp.abs(a_i))
    new = OGDState(
        h=h_new,
        adv=adv_new,
        steps=t,
        trace=state.trace.at[t].set(jnp.max(jnp.abs(adv_new)), mode="drop"),
        chosen=state.chosen.at[t - 1].set(i.astype(jnp.int32), mode="drop"),
        regret_sum=regret_sum,
        regret_carry=regret_carry,
    )
    return jax.tree_util.tree_map(lambda n, o: jnp.where(active, n, o), new, state)


def ogd_solve(static: OGDStatic, family, problem: OIProblem, delta) -> OGDState:
    """Run Algorithm 1 to its exit (``max_f |Adv_f| < delta``), capped at the proven bound.

    A ``lax.while_loop``, also capped at ``static.max_steps``; ``delta`` is dynamic (vmappable).
    """
    cap = _step_cap(static, problem.n_z, delta)

    def cond(state):
        return (state.max_adv >= delta) & (state.steps < cap)

    def body(state):
        return ogd_update(static, family, problem, state, True)

    return jax.lax.while_loop(cond, body, ogd_init(static, family, problem))


def ogd_run_steps(
    static: OGDStatic, family, problem: OIProblem, state: OGDState, delta, n_steps: int
) -> OGDState:
    """``n_steps`` iterations of Algorithm 1 from ``state``; converged iterations are no-ops."""
    cap = _step_cap(static, problem.n_z, delta)

    def body(_, state):
        active = (state.max_adv >= delta) & (state.steps < cap)
        return ogd_update(static, family, problem, state, active)

    return jax.lax.fori_loop(0, n_steps, body, state)


@struct.dataclass
class OGDSummary:
    """What Algorithm 1 reports (spec 5.5, 5.6): steps, exit advantage, bounds, circuit size."""

    steps: Array  # T
    max_adv: Array  # max_f |Adv_f(h_{T+1})| at exit
    converged: Array  # max_adv < delta
    bound: Array  # the proven bound for the rule used (36 or 4.5 |Z|/delta^2)
    bound_tight: Array  # 4.5 |Z| / delta^2
    regret_sum: Array  # sum_t |Adv_{f_t}(h_t)|
    regret_bound: Array  # (3/2) G D sqrt(T)
    circuit_size: Array  # T |Z| test evaluations, float32 (T |Z| can pass int32 within the cap)


def summarize(static: OGDStatic, problem: OIProblem, state: OGDState, delta) -> OGDSummary:
    """What Algorithm 1 reports about a state (spec PED 5.4-5.6)."""
    n_z = problem.n_z
    steps_f = state.steps.astype(jnp.float32)
    return OGDSummary(
        steps=state.steps,
        max_adv=state.max_adv,
        converged=state.max_adv < delta,
        bound=iteration_bound(static.step_rule, n_z, jnp.asarray(delta, jnp.float32)),
        bound_tight=iteration_bound("tight", n_z, jnp.asarray(delta, jnp.float32)),
        regret_sum=state.regret_sum,
        regret_bound=regret_bound(static.step_rule, n_z, steps_f),
        circuit_size=steps_f * n_z,
    )


def algorithm1(
    family,
    problem: OIProblem,
    delta: float,
    step_rule: str = "hazan",
    trace_len: int = 512,
    max_steps: int | None = None,
    projection: str = "auto",
    fast_compile: bool = False,
):
    """``(state, summary)``: validate, then run Algorithm 1 to its exit under ``jit``.

    ``delta`` in ``(0, 2]``; ``max_steps`` an extra cap (None: the proven bound only);
    ``fast_compile`` compiles at XLA backend level 1 (for small problems, where compiling
    dominates).
    """
    number = isinstance(delta, (int, float, np.integer, np.floating, jax.Array))
    if not number or isinstance(delta, bool) or np.ndim(delta) != 0 or not 0 < delta <= 2:
        raise ValueError(f"delta={delta!r}: the indistinguishability level must lie in (0, 2]")
    try:
        shape = jax.eval_shape(_family_values, family, problem.g).shape
    except TypeError as err:  # a family built for another |Z| fails inside its own arithmetic
        raise ValueError(
            f"family: cannot evaluate on h of shape {problem.g.shape}: {err}"
        ) from None
    if shape[1:] != (problem.n_x, problem.n_z):
        raise ValueError(
            f"family values shape={shape}: expected [F, X={problem.n_x}, Z={problem.n_z}]"
        )
    static = OGDStatic(
        step_rule=step_rule, trace_len=trace_len, max_steps=max_steps, projection=projection
    )
    solve = _solve_jit_fast if fast_compile else _solve_jit
    state = solve(static, family, problem, jnp.float32(delta))
    return state, summarize(static, problem, state, delta)


def _family_values(family, h):
    """``family.values(h)`` as a module-level function, so ``eval_shape`` reuses its trace."""
    return family.values(h)


_solve_jit = jit(ogd_solve, static_argnums=0)
_solve_jit_fast = jit(ogd_solve, static_argnums=0, options=FAST_COMPILE)


def solve_block(static: OGDStatic, families, problems: OIProblem, deltas):
    """``(states, summaries)`` ``[S, J]``: Algorithm 1 vmapped over S problems and J deltas."""
    over_delta = jax.vmap(ogd_solve, in_axes=(None, None, None, 0))
    states = jax.vmap(over_delta, in_axes=(None, 0, 0, None))(static, families, problems, deltas)
    summ = jax.vmap(jax.vmap(summarize, in_axes=(None, None, 0, 0)), in_axes=(None, 0, 0, None))(
        static, problems, states, deltas
    )
    return states, summ


@program_cache
def solve_grid(static: OGDStatic):
    """``fn(families, problems, deltas)``: :func:`solve_block` for ``static``, jitted once."""
    return jit(functools.partial(solve_block, static))
