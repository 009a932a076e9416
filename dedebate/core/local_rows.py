"""Rows computed where they are held: a batched function run by each device on its own rows.

A batch of independent rows (a stochastic debate's lanes; the lab's sweep programs do the same in
``dedebate/lab/devices.py``) spread over several devices needs no communication: each device can
compute its rows alone. ``jit`` with a sharded
input leaves the split to XLA's SPMD partitioner, which keeps the program's global meaning, so a
vmapped data-dependent loop (e.g. the binomial sampler's, whose batched condition is "any row
still open") gets an all-reduce of its condition at every iteration and every device waits for
the slowest. :func:`local_rows` states the split instead (``jax.shard_map``): each device runs
the batched function on the rows it holds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax.sharding import PartitionSpec


def local_rows(batched_fn: Callable[..., Any], mesh: Any,
               in_axes: Sequence[int | None] | None = None) -> Callable[..., Any]:
    """``batched_fn`` run by each device of ``mesh`` on the rows it holds.

    Args:
        batched_fn: a function of arrays with the rows on their leading axis (e.g. a ``vmap``);
            every output leaf has the rows first.
        mesh: a 1-D ``jax.sharding.Mesh`` (its one axis splits the rows).
        in_axes: per positional argument, 0 (rows on the leading axis, split over the devices)
            or None (the same for every row: each device gets all of it); None = all 0.

    Returns:
        The function of the whole row axis (its row arguments sharded over ``mesh`` or placed
        there by ``jit``), with the same results as ``batched_fn`` on one device.

    Raises:
        ValueError: ``mesh`` is not 1-D, or an entry of ``in_axes`` is not 0 or None.
    """
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh axes {mesh.axis_names!r}: need exactly one axis (the rows)")
    if in_axes is not None and any(a not in (0, None) for a in in_axes):
        raise ValueError(f"in_axes={tuple(in_axes)!r}: each entry must be 0 (rows) or None "
                         "(shared)")
    rows = PartitionSpec(mesh.axis_names[0])

    @functools.wraps(batched_fn)
    def over_rows(*args):
        axes = (0,) * len(args) if in_axes is None else tuple(in_axes)
        specs = tuple(rows if a == 0 else PartitionSpec() for a in axes)
        # check_vma=False: the sampler's custom batching rules do not track which values vary
        # over the mesh axis; the outputs all have the rows first, so nothing is lost.
        return jax.shard_map(batched_fn, mesh=mesh, in_specs=specs, out_specs=rows,
                             check_vma=False)(*args)

    return over_rows
