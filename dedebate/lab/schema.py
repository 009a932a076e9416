"""JSON Schemas of what the lab writes: ``results.json`` (a run), ``report.json`` (reproduce)
and a sweep's ``results.json``. The schema files live in ``dedebate/lab/schemas/``; the
``schema_version`` / ``result_schema_version`` fields in the outputs name their version.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
KINDS = ("results", "report", "sweep")


@cache
def _registry():
    from referencing import Registry, Resource

    resources = []
    for path in sorted(SCHEMA_DIR.glob("*.schema.json")):
        doc = json.loads(path.read_text())
        resources.append((path.name, Resource.from_contents(doc)))
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources)


def load_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of output.

    Args:
        kind: one of :data:`KINDS` (``"results"``, ``"report"``, ``"sweep"``).

    Raises:
        ValueError: an unknown kind.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r}: must be one of {KINDS}")
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())


def validation_errors(data: Any, kind: str) -> list[str]:
    """Every way ``data`` breaks the ``kind`` schema (needs the ``jsonschema`` test dependency).

    Returns ``path: message`` lines, sorted by path; empty when ``data`` is valid.
    """
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(load_schema(kind), registry=_registry())
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
        for e in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    ]
