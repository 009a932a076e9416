"""run_trials on several devices: each device plays its share of the lanes, and every lane's
outcome is the one ``vmap(play)`` gives (2 fake CPU devices, in a subprocess: the device count is
fixed when JAX starts)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO
from tests.lab.test_lab_devices import sweep_env

# Alice batched per lane: odd lanes sample few times (their means are below the sampler's fast
# range, so play_fast leaves them unresolved and run_trials replays them exactly), even lanes
# many times. 300 lanes: one slice of 2 x 256 on two devices; ~150 replays, each device replaying
# its own in buffers of 64 lanes, after the fast program (below RUN_WORK) or in it (RUN_WORK = 0).
# The reference is vmap(play) on one device.
TWO_DEVICES = """
import jax, numpy as np
from dedebate.agents.stochastic_players import honest_alice, honest_bob
from dedebate.machines.fixtures import f2_target
from dedebate.protocols import stochastic_batch as sb
from dedebate.protocols.stochastic import debate_static, lean_defaults, make_vera, play, trial_keys

T, n = 24, 300
fx = f2_target(T, 2 / 3, spread=0.2)
c = lean_defaults(2, T).constants(2, T)
alice = honest_alice(c).replace(n_samples=np.where(np.arange(n) % 2 == 1, 40, c.n_alice)
                                .astype(np.int32))
bob, vera = honest_bob(c), make_vera(c)
keys = trial_keys(jax.random.key(3), n)
axes = (None, 0, None, None)
spec = debate_static(T)
two = sb.run_trials(spec, fx.machine, alice, bob, vera, keys, axes=axes)  # fast, then replays
sb.RUN_WORK = 0
one = sb.run_trials(spec, fx.machine, alice, bob, vera, keys, axes=axes)  # one program per slice
fast = sb._program("fast", axes, tuple(jax.devices()))  # what run_trials played on two devices
idx = np.arange(512) % n
take = lambda tree, idx: jax.tree.map(lambda x: np.asarray(x)[idx], tree)
_, un = fast(spec, sb.replay_chunk(256), fx.machine, take(alice, idx), bob, vera, keys[idx])
play_all = jax.jit(jax.vmap(play, in_axes=(None,) + axes + (0,)), static_argnums=0)
ref = play_all(spec, fx.machine, alice, bob, vera, keys)
same = all(np.array_equal(np.asarray(x), np.asarray(y))
           for got in (two, one) for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(ref)))
print(len(jax.devices()), int(np.sum(un)), same, float(np.mean(two.alice_wins)))
print("programs over devices", sb._program.cache_info().currsize)
"""


def test_two_devices_play_every_lane_as_vmap_play_does():
    env = sweep_env(2)  # and the suite's compile options (conftest), which it drops
    env["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {env['XLA_FLAGS']}".strip()
    p = subprocess.run(
        [sys.executable, "-c", TWO_DEVICES],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.strip().splitlines()
    devices, replayed, same, acceptance = lines[0].split()
    assert devices == "2" and int(replayed) >= 150 and same == "True", p.stdout
    assert 0.3 < float(acceptance) < 1.0, p.stdout  # honest debates on a yes-instance
    assert lines[1:] == ["programs over devices 3"], p.stdout  # fast, replay; both in one
