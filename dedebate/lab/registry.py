"""Experiment and benchmark discovery: no registering by hand.

An experiment is any module of an experiment package that defines ``NAME`` and ``report``
(``dedebate/lab/experiment.py``). The packages are dedebate's own (the checkout's
``experiments/`` folder, installed as ``dedebate_experiments``) and those other installed
distributions register in the ``dedebate.experiments`` entry-point group;
``DEDEBATE_EXPERIMENTS`` (comma-separated package or module names) replaces them all, which is
how the tests point the CLI at fakes. A module that fails to import, or defines ``NAME`` but no
``report``, is not silently dropped: its error is kept in :attr:`Registry.errors`, so ``dedebate
reproduce`` reports it as a failing row."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import types
from collections.abc import Iterable
from pathlib import Path

DEFAULT_PACKAGES = ("dedebate_experiments",)
ENTRY_POINT_GROUP = "dedebate.experiments"


@dataclasses.dataclass
class Registry:
    """Experiments by ``NAME`` and the modules that failed to import (module name -> error)."""

    experiments: dict[str, types.ModuleType] = dataclasses.field(default_factory=dict)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)

    def names(self) -> list[str]:
        """The registered experiment names."""
        return sorted(self.experiments)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _import(name_or_module: str | types.ModuleType) -> types.ModuleType:
    if isinstance(name_or_module, types.ModuleType):
        return name_or_module
    return importlib.import_module(name_or_module)


def _add(reg: Registry, module: types.ModuleType) -> None:
    """Register ``module`` if it defines ``NAME``; one without ``report`` is an error."""
    name = getattr(module, "NAME", None)
    if not isinstance(name, str):  # a helper module, not an experiment
        return
    if not callable(getattr(module, "report", None)):
        reg.errors[module.__name__] = f"experiment {name!r} defines no report(cfg, measured, host)"
        return
    other = reg.experiments.get(name)
    if other is not None and other is not module:
        reg.errors[module.__name__] = (
            f"duplicate experiment NAME {name!r} (also defined by {other.__name__})"
        )
        return
    reg.experiments[name] = module


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def entry_point_packages() -> tuple[str, ...]:
    """Experiment modules or packages registered by installed distributions.

    They are the values of the ``dedebate.experiments`` entry-point group (the entry point's
    value is the module name).
    """
    return tuple(
        ep.value.split(":")[0].strip()
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    )


def experiment_packages() -> tuple[str, ...]:
    """The packages experiments are discovered in.

    ``$DEDEBATE_EXPERIMENTS`` (comma-separated) if set; else dedebate's own experiments
    (``dedebate_experiments`` as installed, or the checkout's ``experiments`` folder) and every
    package registered in the ``dedebate.experiments`` entry-point group.
    """
    env = os.environ.get("DEDEBATE_EXPERIMENTS", "").strip()
    named = tuple(p.strip() for p in env.split(",") if p.strip())
    if named:
        return named
    own = DEFAULT_PACKAGES if _installed(DEFAULT_PACKAGES[0]) else ("experiments",)
    return tuple(dict.fromkeys((*own, *entry_point_packages())))


def discover_experiments(
    packages: Iterable[str | types.ModuleType] | None = None,
    modules: Iterable[str | types.ModuleType] = (),
) -> Registry:
    """Import every module of ``packages`` and every module in ``modules``.

    A package that defines ``NAME`` is one experiment (its modules are its own helpers).

    Modules that define ``NAME`` and ``report`` are kept; a module that fails to import, defines
    ``NAME`` but no ``report``, or repeats another's ``NAME``, is kept as an error instead (never
    dropped silently).

    Args:
        packages: package names or modules; None = :func:`experiment_packages`.
        modules: further module names or modules.

    Returns the :class:`Registry`.
    """
    if packages is None:
        packages = experiment_packages()
    reg = Registry()
    for pkg in packages:
        label = pkg if isinstance(pkg, str) else pkg.__name__
        try:
            package = _import(pkg)
        except Exception as err:  # noqa: BLE001 - reported, never swallowed
            reg.errors[label] = _one_line(err)
            continue
        if not hasattr(package, "__path__") or hasattr(package, "NAME"):  # one experiment
            _add(reg, package)
            continue
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
            if info.name.startswith("_"):
                continue
            full = f"{package.__name__}.{info.name}"
            try:
                module = importlib.import_module(full)
            except Exception as err:  # noqa: BLE001
                reg.errors[full] = _one_line(err)
                continue
            _add(reg, module)
    for mod in modules:
        label = mod if isinstance(mod, str) else mod.__name__
        try:
            _add(reg, _import(mod))
        except Exception as err:  # noqa: BLE001
            reg.errors[label] = _one_line(err)
    return reg


def bench_package() -> str:
    """The benchmark package's name.

    Returns ``$DEDEBATE_BENCH`` (used by the tests), else ``dedebate_bench`` as installed, else
    ``bench`` (the checkout's folder).
    """
    named = os.environ.get("DEDEBATE_BENCH", "").strip()
    if named:
        return named
    return "dedebate_bench" if _installed("dedebate_bench") else "bench"


def _benchmarks(package: str | None) -> list[tuple[str, types.ModuleType | None, str]]:
    """``(name, module, error)`` for each module of the benchmark package that defines ``run``."""
    # ``(name, module, error)`` for each module of the benchmark package that defines ``run``
    # (``module`` None and ``error`` its one-line import error for one that fails to import).
    package = package or bench_package()
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return []
    out: list[tuple[str, types.ModuleType | None, str]] = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{package}.{info.name}")
        except Exception as err:  # noqa: BLE001 - listed; running it shows the import error
            out.append((info.name, None, _one_line(err)))
            continue
        if callable(getattr(module, "run", None)):  # helpers such as numpy references are not
            out.append((info.name, module, ""))
    return out


def list_benchmarks(package: str | None = None) -> list[str]:
    """Names of the benchmark modules (each defines ``run(full)``).

    Args:
        package: the benchmark package; None = :func:`bench_package`.

    Returns the module names, sorted (a module that fails to import is listed too).
    """
    return [name for name, _, _ in _benchmarks(package)]


def describe_benchmarks(package: str | None = None) -> dict[str, str]:
    """One line per benchmark of :func:`list_benchmarks`.

    Args:
        package: the benchmark package; None = :func:`bench_package`.

    Returns ``{name: the first line of the module's docstring}``; ``"(no description)"`` without
    one, ``"cannot import: ERROR"`` for a module that fails to import.
    """
    out = {}
    for name, module, error in _benchmarks(package):
        if module is None:
            out[name] = f"cannot import: {error}"
            continue
        lines = (module.__doc__ or "").strip().splitlines()
        out[name] = lines[0].strip() if lines and lines[0].strip() else "(no description)"
    return out


def shipped_configs_dir() -> Path | None:
    """The folder of dedebate's shipped configs.

    Returns ``dedebate_configs`` as installed (or the checkout's ``configs/``), or None.
    """
    try:
        spec = importlib.util.find_spec("dedebate_configs")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return None


def config_path(arg: str) -> Path:
    """The config file ``arg`` names.

    A path if one exists there, else a shipped config by name (``NAME`` or ``NAME.yaml`` ->
    ``configs/NAME.yaml``, ``sweeps/NAME`` -> a sweep file), else ``arg`` unchanged (reading
    it then reports it missing).
    """
    given = Path(arg).expanduser()
    if given.exists():
        return given
    shipped = shipped_configs_dir()
    if shipped is not None and not given.is_absolute():
        name = arg.removeprefix("configs/")
        for candidate in (shipped / name, shipped / f"{name}.yaml"):
            if candidate.is_file():
                return candidate
    return given
