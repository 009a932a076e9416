"""Players of the deterministic debates (spec DED 6, 7, 8): builders and the adversary zoo.

The strategy pytrees and their moves are the protocols' player interface
(:mod:`dedebate.protocols.deterministic_players`); this module builds them on the host (numpy
leaves): one strategy (:func:`make_alice`, :func:`make_bob`), batches, the named zoos
(:func:`det_alice_zoo`, :func:`configuration_lies`, :func:`det_bob_zoo`), a debate grid's pairs
(:func:`zoo_pairs`) and its host-side verdict (:func:`judge_grid`). ``det_`` marks builders that
take a step count ``T``.
"""

from __future__ import annotations

import jax
import numpy as np

from dedebate.core.pytrees import stack  # noqa: F401 (re-exported: batches of players)
from dedebate.machines.configurations import ConfigMachine, clog2
from dedebate.protocols.deterministic_players import BOB_MODES, Alice, Bob


def det_honest_alice(T: int) -> Alice:
    """The honest Alice of a ``T``-step machine: she reports the true transcript."""
    return make_alice(T)


def make_alice(
    T: int,
    flip_prop=(),
    flip_raw=(),
    prop_oracle_from: int = -1,
    force_last: bool = False,
    lie_round: int = -1,
    lie_shift: int = 0,
    lie_flip: int = -1,
) -> Alice:
    """One Alice strategy with numpy leaves (host side); with the defaults she is honest.

    Its fields are those of :class:`~dedebate.protocols.deterministic_players.Alice`; ``flip_prop``
    and ``flip_raw`` take step indices in ``0..T-1`` or a bool ``[T]`` mask.
    """

    def as_mask(v, name):
        v = np.asarray(v)
        if v.dtype == bool:  # a mask, never read as the step indices 0 and 1
            if v.shape != (T,):
                raise ValueError(f"{name}: a bool mask of shape {v.shape}; a mask has shape ({T},)")
            return v
        idx = v.astype(np.int64).ravel()
        if ((idx < 0) | (idx >= T)).any():
            raise ValueError(f"{name}={v.tolist()}: step indices must lie in 0..{T - 1}")
        mask = np.zeros((T,), bool)
        mask[idx] = True
        return mask

    return Alice(
        flip_prop=as_mask(flip_prop, "flip_prop"),
        flip_raw=as_mask(flip_raw, "flip_raw"),
        prop_oracle_from=np.int32(prop_oracle_from),
        force_last=np.bool_(force_last),
        lie_round=np.int32(lie_round),
        lie_shift=np.int32(lie_shift),
        lie_flip=np.int32(lie_flip),
    )


def _host_rng(key: jax.Array) -> np.random.Generator:
    """A numpy generator seeded by the raw bits of an explicit typed key (host-side draws)."""
    return np.random.default_rng(np.asarray(jax.random.key_data(key), np.uint32).ravel())


def make_bob(mode: str = "honest", arg: int = 0, key: jax.Array | None = None) -> Bob:
    """One Bob strategy (host side); ``mode="random"`` draws ``arg`` from ``key`` (required)."""
    if mode not in BOB_MODES:
        raise ValueError(f"mode={mode!r}: allowed Bob modes are {sorted(BOB_MODES)}")
    if mode == "random":
        if key is None:
            raise ValueError("key=None: a random Bob needs an explicit jax.random.key")
        arg = int(_host_rng(key).integers(0, 2**30))
    return Bob(mode=np.int32(BOB_MODES[mode]), arg=np.int32(arg))


def concat(*batches):
    """Concatenate strategy batches along axis 0 (host side)."""
    return jax.tree.map(lambda *v: np.concatenate([np.asarray(u) for u in v]), *batches)


def repeat(strategy, k: int):
    """An unbatched strategy repeated ``k`` times on a new axis 0 (to pair it with k opponents)."""
    return jax.tree.map(lambda v: np.broadcast_to(np.asarray(v), (k,) + np.shape(v)), strategy)


# -- the adversary zoo -----------------------------------------------------------------------------
def det_alice_zoo(T: int, m: int, key: jax.Array, n_random: int = 4) -> tuple[list[str], Alice]:
    """``(names, alices)``: named lying provers for a T-step machine, ``honest`` first, stacked.

    Every liar claims acceptance (``force_last``) except ``honest``: a liar that claims 0 is
    rejected by the final-bit check alone. Families: one flipped bit (early, middle, late: the
    last step whose flip the claimed acceptance does not overwrite), many flipped bits
    (``n_random`` random masks, all bits), a wrong oracle answer propagated consistently (first,
    middle, last ORACLE step), wrong answers at random steps propagated (each random mask holds a
    step before the last, :func:`_early_steps`), and
    for Figure 3 (``m`` rounds) a wrong midpoint configuration at a chosen round (the configuration
    one step later or earlier; none with ``m = 0``, for Figure 4, which reads no midpoint); see
    :func:`configuration_lies` for corrupted configuration bits.
    """
    names, items = [], []

    def add(name, **kw):
        names.append(name)
        items.append(make_alice(T, **kw))

    add("honest")
    add("claim_one", force_last=True)
    for where, t in (("early", 0), ("middle", T // 2), ("late", max(0, T - 2))):
        add(f"flip_{where}", flip_raw=[t], force_last=True)
    add("flip_all", flip_raw=np.ones((T,), bool), force_last=True)
    add("oracle_wrong_first", prop_oracle_from=0, force_last=True)
    add("oracle_wrong_middle", prop_oracle_from=T // 2, force_last=True)
    add("oracle_wrong_late", prop_oracle_from=max(0, T - 3), force_last=True)
    rng = _host_rng(key)
    for i in range(n_random):
        add(f"flip_many_{i}", flip_raw=_early_steps(rng, T, 0.25), force_last=True)
        add(
            f"wrong_answers_{i}", flip_prop=_early_steps(rng, T, min(1.0, 2.0 / T)), force_last=True
        )
    for r in sorted({1, max(1, m // 2), max(1, m)}):
        if r > m:
            continue
        add(f"midpoint_shift_r{r}", force_last=True, lie_round=r, lie_shift=1)
        add(f"midpoint_back_r{r}", force_last=True, lie_round=r, lie_shift=-1)
    return names, stack(items)


def _early_steps(rng: np.random.Generator, T: int, p: float) -> np.ndarray:
    """A bool ``[T]`` mask, each step with probability ``p``, holding a step before the last."""
    # claiming acceptance overwrites the last step, so a mask without an earlier one would copy
    # claim_one; it takes the step of its least draw (one draw per step: other masks are as drawn)
    u = rng.random(T)
    mask = u < p
    if T > 1 and not mask[:-1].any():
        mask[np.argmin(u[:-1])] = True
    return mask


def configuration_lies(T: int, m: int, S: int, w_c: int, n: int) -> tuple[list[str], Alice]:
    """``(names, alices)``: Figure 3 liars flipping a bit of a message, ``cfg_<region>_r<round>``.

    Regions: the buffer, the ``w_c``-bit counter and the ``n``-bit input of an S-bit configuration;
    every liar claims acceptance. ``z_output_only`` is the simplest: the honest messages but the
    final configuration's output bit (buffer cell ``(T - 1) mod W``).
    """
    W = S - w_c - n
    names, items = ["z_output_only"], [make_alice(T, lie_round=0, lie_flip=w_c + n + (T - 1) % W)]
    positions = {"counter": 0, "buffer_first": w_c + n, "buffer_last": S - 1}
    if n:
        positions["input"] = w_c
    for r in sorted({0, 1, max(1, m // 2), m}):
        if r > m:
            continue
        for pname, p in positions.items():
            names.append(f"cfg_{pname}_r{r}")
            items.append(make_alice(T, force_last=True, lie_round=r, lie_flip=p))
    return names, stack(items)


def det_bob_zoo(
    T: int,
    m: int,
    key: jax.Array,
    n_random: int = 4,
    all_fixed: bool = False,
    protocol: str = "cross_exam",
) -> tuple[list[str], Bob]:
    """``(names, bobs)``: honest, last, first, ``random_i``, with ``all_fixed`` ``fixed_a``."""
    names, items = (
        ["honest", "last", "first"],
        [make_bob("honest"), make_bob("last"), make_bob("first")],
    )
    for i in range(n_random):
        names.append(f"random_{i}")
        items.append(make_bob("random", key=jax.random.fold_in(key, i)))
    if all_fixed:
        count = T if protocol == "cross_exam" else 2**m
        for a in range(count):
            names.append(f"fixed_{a}")
            items.append(make_bob("fixed", arg=a))
    return names, stack(items)


# -- strategy batches of a debate grid -------------------------------------------------------------
def zoo_pairs(
    T: int,
    key: jax.Array,
    *,
    n_random: int,
    all_fixed: bool,
    protocol: str,
    cm: ConfigMachine | None = None,
    exhaustive: bool = False,
):
    """``(alices[K], bobs[K], n_comp)``: the zipped strategy pairs of one debate grid (host side).

    Pairs ``0 .. n_comp-1``: honest A against the B zoo (:func:`det_bob_zoo` with
    ``fold_in(key, 0)``; completeness). Then the A zoo (:func:`det_alice_zoo` with
    ``fold_in(key, 1)``), with ``cm`` also the Figure 3 :func:`configuration_lies`, and with
    ``exhaustive`` every claimed transcript (``a = y XOR code`` for all 2^T codes), each against
    honest B (soundness).
    """
    from dedebate.core.bits import bit_table

    m = clog2(T)
    bnames, bobs = det_bob_zoo(T, m, jax.random.fold_in(key, 0), n_random, all_fixed, protocol)
    n_comp = len(bnames)
    rounds = m if protocol == "binary_search" else 0  # Figure 4: midpoint liars would be copies
    _, alices = det_alice_zoo(T, rounds, jax.random.fold_in(key, 1), n_random)
    batches = [alices]
    if cm is not None:
        batches.append(configuration_lies(T, m, cm.S, cm.w_c, cm.n)[1])
    if exhaustive:
        codes = bit_table(T).astype(bool)
        batches.append(repeat(make_alice(T), codes.shape[0]).replace(flip_raw=codes))
    alices = concat(*batches)
    k_sound = alices.flip_raw.shape[0]
    A = concat(repeat(det_honest_alice(T), n_comp), alices)
    B = concat(bobs, repeat(make_bob("honest"), k_sound))
    return A, B, n_comp


JUDGED = ("comp_debates", "comp_accepts", "sound_debates", "sound_accepts")


def judge_grid(out, n_comp: int, y_last, comp_mask=None, sound_mask=None) -> dict[str, int]:
    """Completeness / soundness / cost summary of an outcome grid ``[M, K]`` of :func:`zoo_pairs`.

    Completeness is judged on the honest-A pairs (the first ``n_comp``) where ``y_last == 1`` (or
    ``comp_mask``), soundness on the honest-B pairs elsewhere (or ``sound_mask``). Returns ints
    ``comp_debates`` / ``comp_accepts``, ``sound_debates`` / ``sound_accepts``, ``v_queries_max``
    and ``bits_max``.
    """
    acc = np.asarray(out.alice_wins)
    y1 = np.asarray(y_last) == 1
    comp = acc[y1 if comp_mask is None else comp_mask, :n_comp]
    sound = acc[~y1 if sound_mask is None else sound_mask, n_comp:]
    return {
        "comp_debates": int(comp.size),
        "comp_accepts": int(comp.sum()),
        "sound_debates": int(sound.size),
        "sound_accepts": int(sound.sum()),
        "v_queries_max": int(np.asarray(out.costs.verifier_queries).max()),
        "bits_max": int(np.asarray(out.costs.bits_read).max()),
    }


def merge_judged(stats) -> dict[str, float]:
    """:func:`judge_grid` counts summed, with the largest ``v_queries_max`` (NaN fails closed)."""
    import math

    tot = {k: sum(s[k] for s in stats) for k in JUDGED}
    qs = [float(s["v_queries_max"]) for s in stats]
    tot["v_queries_max"] = math.nan if not qs or any(math.isnan(q) for q in qs) else max(qs)
    return tot
