"""What the fork server of ``dedebate reproduce`` imports once for all its workers.

Importing this module imports :data:`LIBRARIES` (JAX, Flax, Optax, Orbax, SciPy's optimisers, W&B
with the launch module its run start imports, Matplotlib) and then every module of the dedebate
package but the command line (the lab's runner included), so that each worker forked from the server
(:mod:`dedebate.lab.parallel`) starts with what an experiment imports already loaded. None of them
starts a JAX backend, which a forked process could not use (``tests/lab/test_lab_parallel.py``
checks this for every module and experiment). A module that fails to import, whatever the
exception, is left out: the worker imports it, or fails on it, as without the server.
"""

from __future__ import annotations

import importlib
import pkgutil

LIBRARIES = (
    "jax",
    "flax.linen",
    "optax",
    "orbax.checkpoint",
    "scipy.optimize",
    "wandb",
    "wandb.sdk.launch",
    "matplotlib.pyplot",
)
SKIPPED = ("dedebate.cli", "dedebate.__main__")  # the command line, and running it


def _import_all(names) -> list[str]:
    """Import ``names``; returns the ones that failed."""
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - never the server's failure (see the docstring)
            failed.append(name)
    return failed


def package_modules() -> list[str]:
    """Every module of the dedebate package but :data:`SKIPPED` (subpackages are imported to
    be walked)."""
    import dedebate

    return [
        info.name
        for info in pkgutil.walk_packages(
            dedebate.__path__, "dedebate.", onerror=lambda _name: None
        )
        if not info.name.startswith(SKIPPED)
    ]


FAILED = _import_all(LIBRARIES)
FAILED += _import_all(package_modules())
