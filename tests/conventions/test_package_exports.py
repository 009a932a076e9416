"""Each library package re-exports its public names from ``__init__`` (``__all__``), lazily:
importing a package imports none of its modules, and a name resolves to its module's object."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from dedebate.core.lazy import lazy_exports

LIBRARY = ("core", "protocols", "agents", "estimators", "training", "exact", "machines", "trees")


@pytest.mark.parametrize("pkg", LIBRARY)
def test_every_exported_name_is_its_modules_object(pkg):
    package = importlib.import_module(f"dedebate.{pkg}")
    assert len(package.__all__) >= 15 and package.__all__ == sorted(set(package.__all__))
    for name in package.__all__:
        obj = getattr(package, name)
        home = getattr(obj, "__module__", None)
        if home and home.startswith(f"dedebate.{pkg}."):  # classes and functions: where defined
            assert getattr(importlib.import_module(home), name) is obj, (pkg, name)


def test_importing_the_packages_imports_none_of_their_modules():
    code = (
        "import sys\n"
        + "".join(f"import dedebate.{pkg}\n" for pkg in LIBRARY)
        + "print(*sorted(sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = [m for m in out.stdout.split() if m.startswith("dedebate.") and m.count(".") > 1]
    assert loaded == ["dedebate.core.lazy"]


def test_lazy_exports_resolve_names_and_modules_and_reject_others():
    all_, getattr_ = lazy_exports(
        "dedebate.trees", {"tree": "MAX_Q n_nodes", "library": "and_table"}
    )
    assert all_ == ["MAX_Q", "and_table", "n_nodes"]
    from dedebate.trees import library, tree

    assert getattr_("n_nodes") is tree.n_nodes and getattr_("library") is library
    with pytest.raises(AttributeError, match="module 'dedebate.trees' has no attribute 'x'"):
        getattr_("x")
