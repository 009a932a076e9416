"""Random machines against the strategy zoos of Figures 3 and 4: grids, counts, cost rows."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from dedebate.agents.deterministic_grids import GRID_PLAY, grid_cells, honest_costs, judged_counts
from dedebate.agents.deterministic_players import make_bob, repeat, zoo_pairs
from dedebate.core.bits import bit_table
from dedebate.machines.configurations import clog2, config_machine, random_programs, simulate_numpy
from dedebate.protocols.deterministic_players import MessageAlice

# Figure 4, Figure 3 with a register configuration (S = w_c + n + W) and with the full tape
PROTOCOL_FAMILIES = ("fig4", "fig3_window", "fig3_full")
COST_FIELDS = (
    "rounds",
    "rounds_max_over_zoo",
    "bits_read",
    "bits_read_min",
    "bits_read_max_over_zoo",
    "v_queries_max",
    "a_message_bits",
    "a_steps",
    "b_steps",
    "machines",
)
# the exhaustive Figure 3 adversary: S = w_c + n + W = 2 + 1 + 2, 2^(3 S) message sequences
EXHAUSTIVE_S, EXHAUSTIVE_SEQUENCES, EXHAUSTIVE_MACHINES = 5, 2**15, 4  # half of them output 0


def fig3_S(cfg, T: int, family: str) -> int:
    """Figure 3's configuration size ``S = w_c + n + W`` (W: ``min(window, T)``, or T)."""
    W = min(cfg.window, T) if family == "fig3_window" else T
    return int(T).bit_length() + cfg.n_inputs + W


def pairs(cfg, T: int, key, protocol: str, **kw):
    """The strategy pairs of one grid (host side)."""
    fixed = T <= cfg.fixed_bob_max_T
    return zoo_pairs(T, key, n_random=cfg.n_random, all_fixed=fixed, protocol=protocol, **kw)


def grids(cfg, T: int, seed: int, key, exhaustive: bool) -> dict:
    """``{family: grid}`` at ``T``, without ``fig3_full`` when ``window >= T`` (the same)."""
    kw = dict(n_inputs=cfg.n_inputs, n_deps=cfg.deps, dep_window=cfg.dep_window)
    progs = random_programs(seed, cfg.n_machines, T, oracle_frac=cfg.oracle_frac, **kw)
    y1 = simulate_numpy(progs)[:, -1] == 1
    out = {"fig4": grid_cells(progs, pairs(cfg, T, key, "cross_exam", exhaustive=exhaustive), y1)}
    for fam, W in (("fig3_window", min(cfg.window, T)), ("fig3_full", None)):
        if W is None and cfg.window >= T:
            break
        cm = config_machine(progs, window=W)
        zoo = pairs(cfg, T, key, "binary_search", cm=cm, exhaustive=exhaustive)
        out[fam] = grid_cells(cm, zoo, y1)
    return out


def cost_groups(cfg, T: int) -> dict[int, np.ndarray]:
    """The machines of each l = max_t |I(t)| at ``T`` (complement pairs, l cycled over deps)."""
    ls = np.asarray(cfg.deps)[np.arange(cfg.n_machines // 2) % len(cfg.deps)]
    ls = np.repeat(np.minimum(ls, cfg.n_inputs + min(T - 1, cfg.dep_window)), 2)
    return {int(l): np.flatnonzero(ls == l) for l in sorted(set(ls.tolist()))}


def exhaustive_fig3_grid(seed: int, oracle_frac: float) -> dict:
    """Every Figure 3 message sequence on four 3-step machines against honest B (host side)."""
    m = EXHAUSTIVE_MACHINES
    progs = random_programs(seed, m, 3, n_inputs=1, n_deps=2, dep_window=2, oracle_frac=oracle_frac)
    cm = config_machine(progs, window=2)
    seqs = bit_table((cm.m + 1) * cm.S).reshape(-1, cm.m + 1, cm.S)
    alice = MessageAlice(messages=seqs)  # type: ignore[arg-type]  # numpy, typed jax.Array
    zoo = (alice, repeat(make_bob("honest"), seqs.shape[0]), 0)
    return grid_cells(cm, zoo, simulate_numpy(progs)[:, -1] == 1)


def play_families(grids: dict, groups: dict, S: dict[str, int], prefix: str) -> dict:
    """One T's judged counts ``{prefix}/{family}/...`` and honest costs per l (pure JAX)."""
    out = {}
    for fam in PROTOCOL_FAMILIES:
        g = grids.get(fam, grids["fig3_window"])
        if fam in grids:  # else fig3_full is fig3_window's play
            res = GRID_PLAY[fam[:4]](g["machines"], g["A"], g["B"])
        out.update({f"{prefix}/{fam}/{k}": v for k, v in judged_counts(res, g).items()})
        for l, rows in groups.items():
            c = honest_costs(res, rows) | {"machines": jnp.int32(rows.size)}
            if fam != "fig4":
                c["S"] = jnp.int32(S[fam])
            out.update({f"{prefix}/{fam}/l{l}/{k}": v for k, v in c.items()})
    return out


def cost_table(metrics: dict) -> list[dict]:
    """The cost rows of :func:`play_families`' metrics, one per T, family and l."""
    cells: dict = {}
    for k, v in metrics.items():
        parts = k.split("/")
        if len(parts) == 4 and parts[0][:1] == "T" and parts[2][:1] == "l" and v is not None:
            cell = (int(parts[0][1:]), PROTOCOL_FAMILIES.index(parts[1]), int(parts[2][1:]))
            cells.setdefault(cell, {})[parts[3]] = v
    return [
        {"T": T, "protocol": PROTOCOL_FAMILIES[f], "l": l, "m": clog2(T), "S": c.get("S")}
        | {k: c[k] for k in COST_FIELDS}
        for (T, f, l), c in sorted(cells.items())
    ]


def col(rows: list[dict], key: str, **where) -> list:
    """``key`` of the rows whose fields equal ``where``."""
    return [r[key] for r in rows if all(r[k] == v for k, v in where.items())]


SIDE_BY_SIDE = {  # column: (family, cost field)
    "S_register": ("fig3_window", "S"),
    "S_full": ("fig3_full", "S"),
    "fig3_register_bits": ("fig3_window", "bits_read"),
    "fig3_full_bits": ("fig3_full", "bits_read"),
    "fig4_bits": ("fig4", "bits_read"),
    "fig4_bits_worst": ("fig4", "bits_read_max_over_zoo"),
    "fig3_rounds": ("fig3_full", "rounds"),
    "fig4_rounds": ("fig4", "rounds"),
    "fig3_register_A_message_bits": ("fig3_window", "a_message_bits"),
    "fig3_full_A_message_bits": ("fig3_full", "a_message_bits"),
    "fig4_A_message_bits": ("fig4", "a_message_bits"),
    "fig3_B_steps": ("fig3_full", "b_steps"),
    "fig4_B_steps": ("fig4", "b_steps"),
    "A_steps": ("fig4", "a_steps"),
}


def side_by_side(table: list[dict]) -> list[dict]:
    """Figure 3 and Figure 4 on the same machines, one row per (T, l)."""
    by = {(r["T"], r["l"], r["protocol"]): r for r in table}
    return [
        {"T": T, "l": l, "m": clog2(T)} | {k: by[T, l, f][c] for k, (f, c) in SIDE_BY_SIDE.items()}
        for T, l in sorted({(r["T"], r["l"]) for r in table})
    ]
