"""Host-side pytree batching: stack pytrees of one structure along a new leading axis.

Players, strategies and training rows are pytrees; a batch of them for ``vmap`` is one pytree of
the same class whose every leaf gains a leading axis. Built with numpy on the host, so stacking
never compiles anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np


def stack(items: Sequence[Any]) -> Any:
    """Stack pytrees of one structure and leaf shapes into one with a leading axis (numpy, host)."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *items)
