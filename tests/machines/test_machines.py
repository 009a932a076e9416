"""dedebate.machines.program and .lean: step-program validation, exact enumeration, the Lean
prefix model, and sampling (vmap over trials and inputs equals a per-trial loop, bit for bit)."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dedebate.machines import fixtures as fxs
from dedebate.machines.lean import f2_lean, lean_machine, polya_urn
from dedebate.machines.lipschitz import prefix_tree
from dedebate.machines.oracles import affine_mean_oracle, position_oracle, table_oracle
from dedebate.machines.program import (
    COIN,
    DET,
    ORACLE,
    exact_output_prob,
    make_step_program,
    sample_transcript,
    sample_transcripts,
    step_uniforms,
    transcript_from_uniforms,
    transcript_log_prob,
)

ORC = position_oracle([0.5, 0.5, 0.5])


# -- make_step_program validation -------------------------------------------------------------------  # noqa: E501
def test_step_program_rejects_non_causal_deps():
    with pytest.raises(ValueError, match=r"deps\[1\]\[0\]=1: step 1 may read only.*causal"):
        make_step_program([COIN, DET], [[], [1]], ORC, rule=[None, [1, 0]])
    with pytest.raises(ValueError, match=r"deps\[2\]\[1\]=5"):
        make_step_program([COIN, COIN, DET], [[], [], [0, 5]], ORC, rule=[None, None, [0] * 4])
    with pytest.raises(ValueError, match=r"deps\[0\]\[0\]=-1"):
        make_step_program([ORACLE], [[-1]], ORC)


def test_step_program_rejects_bad_kind_and_shapes():
    with pytest.raises(ValueError, match=r"kind\[1\]=7: allowed kinds are DET=0, ORACLE=1, COIN=2"):
        make_step_program([COIN, 7], [[], []], ORC)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        make_step_program([], [], ORC)
    with pytest.raises(ValueError, match="deps has 1 rows.*T=2"):
        make_step_program([COIN, COIN], [[]], ORC)
    with pytest.raises(ValueError, match="x: the input must be"):
        make_step_program([COIN], [[]], ORC, x=[0, 2])
    # a per-step oracle shorter than the program would answer its last entry at the later steps
    with pytest.raises(ValueError, match=r"oracle.probs has shape \(2,\).*T=4 steps"):
        make_step_program([ORACLE] * 4, [[]] * 4, position_oracle([1.0, 0.0]))
    with pytest.raises(ValueError, match=r"oracle.base has shape \(5,\).*T=4 steps"):
        make_step_program([ORACLE] * 4, [[]] * 4, affine_mean_oracle([0.0] * 5, [0.0] * 5))
    make_step_program([ORACLE] * 4, [[]] * 4, position_oracle([1.0, 0.0, 1.0, 0.0]))


def test_step_program_rejects_missing_or_malformed_rules():
    with pytest.raises(ValueError, match=r"rule\[1\] is missing: DET step 1"):
        make_step_program([COIN, DET], [[], [0]], ORC)
    with pytest.raises(ValueError, match=r"rule\[1\] is missing"):
        make_step_program([COIN, DET], [[], [0]], ORC, rule=[None, None])
    with pytest.raises(ValueError, match=r"rule\[1\] has shape \(3,\).*length 2"):
        make_step_program([COIN, DET], [[], [0]], ORC, rule=[None, [0, 1, 1]])
    with pytest.raises(ValueError, match=r"rule\[1\].*0/1 table"):
        make_step_program([COIN, DET], [[], [0]], ORC, rule=[None, [0, 2]])
    with pytest.raises(ValueError, match="at most 12 dependencies"):
        make_step_program(
            [COIN] * 13 + [DET],
            [[]] * 13 + [list(range(13))],
            ORC,
            rule=[None] * 13 + [[0] * 2**13],
        )


# -- exact enumeration ------------------------------------------------------------------------------  # noqa: E501
def test_step_program_enumeration_matches_hand_formulas():
    """y0 ~ pi(x0), y1 ~ coin, y2 = y0 XOR y1 (P = 1/2), y3 = x1 AND y0 (P = x1 * pi)."""
    o = table_oracle([0.3, 0.8])  # query = x0
    for x, want in [([1, 1], 0.8), ([0, 1], 0.3), ([1, 0], 0.0)]:
        prog = make_step_program(
            [ORACLE, COIN, DET, DET],
            [[0], [], [2, 3], [1, 2]],
            o,
            rule=[None, None, [0, 1, 1, 0], [0, 0, 0, 1]],
            x=x,
        )
        assert float(exact_output_prob(prog)) == pytest.approx(want, abs=1e-6)
        xor = make_step_program(
            [ORACLE, COIN, DET], [[0], [], [2, 3]], o, rule=[None, None, [0, 1, 1, 0]], x=x
        )
        assert float(exact_output_prob(xor)) == pytest.approx(0.5, abs=1e-6)


def test_transcript_probabilities_sum_to_one():
    m = polya_urn(9, 1.0, 2.0)
    ys = jnp.asarray(list(itertools.product([0, 1], repeat=9)), jnp.int8)
    total = float(jnp.sum(jnp.exp(jax.vmap(transcript_log_prob, in_axes=(None, 0))(m, ys))))
    assert total == pytest.approx(1.0, abs=1e-5)


def test_exact_enumeration_at_T16_for_a_whole_prefix_machine():
    """Polya's urn reads the whole prefix at every step; by exchangeability P_M(1) = a/(a+b)."""
    assert float(exact_output_prob(polya_urn(16, 2.0, 1.0))) == pytest.approx(2 / 3, abs=1e-5)


def test_exact_enumeration_rejects_long_programs():
    with pytest.raises(ValueError, match="T=21"):
        exact_output_prob(fxs.f2_target(21, 0.7).machine)


# -- the Lean model ---------------------------------------------------------------------------------  # noqa: E501
def test_lean_f2_equals_the_efficient_f2_on_every_prefix():
    pi = fxs.spread_probs(9, 0.6, 0.3)
    a, b = prefix_tree(f2_lean(pi)), prefix_tree(fxs.f2(pi).machine)
    for la, lb in zip(a, b):
        np.testing.assert_allclose(la, lb, atol=1e-6)


def test_lean_prob_fn_sees_only_the_prefix():
    m = lean_machine(lambda params, bits, n: jnp.sum(bits) / params, jnp.float32(8.0), 8)
    full = jnp.ones(8, jnp.int8)  # a tape with bits written beyond n
    got = jax.vmap(lambda n: m.prob(full, n))(jnp.arange(8))
    np.testing.assert_allclose(np.asarray(got), np.arange(8) / 8.0, atol=1e-7)


def test_step_programs_and_lean_machines_refuse_widths_and_sizes_they_misread():
    """A stored rule width below a step's fan-in broke numpy's broadcast; T=True was one step;
    F2 of no probabilities failed with an IndexError."""
    with pytest.raises(ValueError, match="rule_bits=1: a DET step reads 2 bits"):
        make_step_program(
            [COIN, COIN, DET], [[], [], [0, 1]], ORC, rule=[None, None, [0, 0, 0, 1]], rule_bits=1
        )
    with pytest.raises(ValueError, match="T=True"):
        lean_machine(lambda params, bits, n: 0.5, None, True)
    with pytest.raises(ValueError, match="F2 needs one probability per step"):
        f2_lean([])


def test_lean_machine_rejects_bad_probabilities():
    def too_big(params, bits, n):
        return jnp.where((n == 3) & (bits[1] == 1), 1.5, 0.5)

    with pytest.raises(ValueError, match=r"prob_fn\(prefix='010', n=3\)=1.5"):
        lean_machine(too_big, None, 5)

    def nan_at_start(params, bits, n):
        return jnp.where(n == 0, jnp.nan, 0.5)

    with pytest.raises(ValueError, match=r"prob_fn\(prefix='', n=0\)=nan"):
        lean_machine(nan_at_start, None, 4)
    with pytest.raises(ValueError, match="T=0"):
        lean_machine(nan_at_start, None, 0)
    with pytest.raises(ValueError, match="pseudo-counts"):
        polya_urn(4, 0.0, 1.0)


# -- sampling: vmap over trials and inputs == per-trial loop -----------------------------------------  # noqa: E501
def _stack(machines):
    return jax.tree.map(lambda *xs: jnp.stack(xs), *machines)


@pytest.mark.parametrize("kind", ["fixture", "step_program"])
def test_vmapped_sampling_equals_per_trial_loop(kind):
    if kind == "fixture":  # inputs = different F2 probability vectors
        machines = [fxs.f2_target(8, p, spread=0.2).machine for p in (0.3, 0.5, 0.7)]
    else:  # inputs = different study reports x of the meta-analysis step program
        machines = [
            fxs.meta_analysis(x, [0.9, 0.4, 0.7, 0.6], 1).step_program()
            for x in ([1, 1, 0, 1], [0, 1, 0, 0], [1, 1, 1, 1])
        ]
    keys = jax.random.split(jax.random.key(3), 6)
    batched = jax.jit(jax.vmap(sample_transcripts, in_axes=(0, None)))(_stack(machines), keys)
    one = jax.jit(sample_transcript)
    looped = np.stack([np.stack([np.asarray(one(m, k)) for k in keys]) for m in machines])
    np.testing.assert_array_equal(np.asarray(batched), looped)
    if kind == "fixture":  # the shared-uniforms path draws the same transcripts
        u = jax.vmap(step_uniforms, in_axes=(0, None))(keys, machines[0].T)
        via_u = jax.jit(
            jax.vmap(jax.vmap(transcript_from_uniforms, in_axes=(None, 0)), in_axes=(0, None))
        )(_stack(machines), u)
        np.testing.assert_array_equal(np.asarray(via_u), looped)
    assert len({tuple(r) for r in looped.reshape(-1, looped.shape[-1])}) > 3  # not constant


def test_sampling_frequencies_match_enumerated_transcript_probabilities():
    """Each of the 2^T transcripts of a small Lean machine appears at its exact rate."""
    m = polya_urn(4, 1.0, 1.0)  # every transcript with k ones has prob k!(4-k)!/5!
    n = 20000
    ys = np.asarray(jax.jit(sample_transcripts)(m, jax.random.split(jax.random.key(5), n)))
    codes = (ys.astype(np.int64) << np.arange(4)).sum(axis=1)
    counts = np.bincount(codes, minlength=16)
    all_ys = jnp.asarray(((np.arange(16)[:, None] >> np.arange(4)) & 1), jnp.int8)
    probs = np.exp(np.asarray(jax.vmap(transcript_log_prob, in_axes=(None, 0))(m, all_ys)))
    sd = np.sqrt(n * probs * (1 - probs))
    assert np.all(np.abs(counts - n * probs) <= 4.5 * sd)


def test_affine_oracle_step_program_equals_fixture_machine_tree():
    """The F3 cascade as a step program (AffineMeanOracle) has the same prefix tree."""
    fx = fxs.f3_cascade(9, 0.3, 0.8, 0.1)
    for la, lb in zip(prefix_tree(fx.machine), prefix_tree(fx.step_program())):
        np.testing.assert_allclose(la, lb, atol=1e-6)
    assert isinstance(affine_mean_oracle([0.5], [0.0]).base, jax.Array)


@pytest.mark.parametrize("trials", [14, 17, 10])
def test_count_ones_counts_every_transcript_of_its_chunks(monkeypatch, trials):
    """``count_ones`` with chunks of 7 (full chunks in its loop, then the rest) equals the last
    bits of the transcripts of its documented key schedule, drawn chunk by chunk here."""
    from dedebate.machines import program

    monkeypatch.setattr(program, "MC_CHUNK", 7)
    machine, key = fxs.f2_target(6, 0.6, spread=0.2).machine, jax.random.key(5)
    want = 0
    for i, n in enumerate([7] * (trials // 7) + ([trials % 7] if trials % 7 else [])):
        u = jax.vmap(program.step_uniforms, (0, None))(
            jax.random.split(jax.random.fold_in(key, i), n), machine.T
        )
        want += int(jax.vmap(program.transcript_from_uniforms, (None, 0))(machine, u)[:, -1].sum())
    assert int(program.count_ones(machine, key, trials)) == want
    assert 0 < want < trials  # both outcomes occur (a count of all or none could hide a bug)


def test_random_programs_read_each_window_position_equally_often():
    """Each step reads ``l`` distinct positions drawn uniformly from its window: with no inputs,
    a window of 8 and l = 3, every offset 1..8 back is read by a step past the first 8 with
    probability 3/8. 128 machines x 7 steps: each offset's count within 5 binomial standard
    deviations of 336 (under-sampling the farthest offset gave it 118)."""
    from dedebate.machines.configurations import random_programs

    progs = random_programs(0, 256, 16, n_deps=3, dep_window=8)
    deps = np.asarray(progs.deps)[::2, 9:]  # one member of each complement pair; steps 9..15
    mask = np.asarray(progs.dep_mask)[::2, 9:]
    offsets = (np.arange(9, 16)[None, :, None] - deps)[mask]
    counts = np.bincount(offsets, minlength=9)[1:]
    n = deps.shape[0] * deps.shape[1]
    assert offsets.size == 3 * n and counts.size == 8
    sd = np.sqrt(n * 3 / 8 * 5 / 8)
    assert np.all(np.abs(counts - n * 3 / 8) <= 5 * sd), counts


def test_a_step_reading_step_zero_sets_the_window():
    """Step 2 reads y_0, two steps back: the dependency distance is 2 and a window of 1 is
    refused (a distance that skipped step 0 accepted it, and Step read the wrong slot)."""
    from dedebate.machines.configurations import config_machine, max_dep_distance
    from dedebate.machines.oracles import position_oracle
    from dedebate.machines.program import DET, ORACLE, make_step_program

    p = make_step_program(
        [ORACLE, DET, DET], [[], [0], [0]], position_oracle([1, 0, 0]), rule=[None, [0, 1], [0, 1]]
    )
    assert max_dep_distance(p) == 2
    with pytest.raises(ValueError, match=r"^window=1: a step reads the bit 2 steps back"):
        config_machine(p, window=1)
    config_machine(p, window=2)


def test_a_step_of_probability_zero_emits_zero_even_at_u_zero():
    """y_t = 1[u_t < p_t] (docs): u = 0 against p = 0 gives 0, against p = 1 or 1/2 gives 1."""
    from dedebate.machines.fixtures import f1
    from dedebate.machines.program import transcript_from_uniforms

    machine = f1([0.0, 1.0, 0.5], 0.0).machine
    assert transcript_from_uniforms(machine, jnp.zeros(4)).tolist() == [0, 1, 1, 0]
