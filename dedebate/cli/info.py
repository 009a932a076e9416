"""The commands that describe this installation: ``dedebate list``, ``config`` and ``doctor``."""

from __future__ import annotations

import argparse
import json
import sys

from dedebate.cli.common import EXIT_OK, die_usage, load_registry, warn_import_errors


def cmd_config(args: argparse.Namespace) -> int:
    """``dedebate config NAME [--yaml]``: the documented config keys, or the config file.

    Args:
        args: the parsed command line.

    Returns:
        0, or 2 for an unknown experiment.
    """
    from dedebate.lab.config_docs import render_config_docs, render_config_file

    reg = load_registry()
    if args.name not in reg.experiments:
        warn_import_errors(reg)
        return die_usage(
            f"unknown experiment {args.name!r}; registered: {', '.join(reg.names()) or '(none)'}"
        )
    module = reg.experiments[args.name]
    sys.stdout.write(render_config_file(module) if args.yaml else render_config_docs(module) + "\n")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    """``dedebate list``: the registered experiments, one ``NAME<TAB>TITLE`` line each.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    reg = load_registry()
    warn_import_errors(reg)
    for name in reg.names():
        print(f"{name}\t{getattr(reg.experiments[name], 'TITLE', '')}")
    if not reg.experiments:
        print("(no experiments registered)", file=sys.stderr)
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    """``dedebate doctor [--json]``: backend, devices, caches and versions.

    Args:
        args: the parsed command line.

    Returns:
        0.
    """
    from dedebate.lab import doctor

    info = doctor.report()
    print(json.dumps(info, indent=2) if args.json else doctor.render(info))
    return EXIT_OK
