"""Lazy re-exports for the packages' ``__init__`` (PEP 562): importing a package stays cheap, and a
name's module is imported on its first use."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[list[str], Callable]:
    """``(__all__, __getattr__)`` of ``package`` re-exporting ``{module: "name name ..."}``.

    ``__getattr__`` imports the module of a re-exported name, or a listed module itself, on
    first access (``from package import name`` included); other names raise AttributeError.
    """
    module_of = {name: module for module, names in exports.items() for name in names.split()}

    def __getattr__(name: str):
        if name in exports:
            return importlib.import_module(f"{package}.{name}")
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)

    return sorted(module_of), __getattr__
