"""The chart's README lists every value the schema knows, with its default and description.

The table between the README's ``values-table`` markers is checked row by row against
``values.schema.json`` (keys, types, descriptions) and ``values.yaml`` (defaults). After changing
either, regenerate it with:

    BINDERY_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_chart_readme.py
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "helm" / "bindery"
README = CHART / "README.md"
UPDATE = os.environ.get("BINDERY_UPDATE_GOLDEN") == "1"
BEGIN = "<!-- values-table: begin (tests/unit/test_chart_readme.py checks it) -->"
END = "<!-- values-table: end -->"
UNSET = object()


def leaves(
    node: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every value a user sets: the schema's leaves (objects with known keys are walked)."""
    props = node.get("properties")
    if node.get("type") == "object" and props:
        for key, child in props.items():
            yield from leaves(child, (*path, key))
    elif path != ("global",):  # Helm's own, not this chart's
        yield ".".join(path), node


def type_of(node: dict[str, Any]) -> str:
    if "anyOf" in node:
        return " or ".join(sorted({type_of(n) for n in node["anyOf"]}))
    if "const" in node:
        return json.dumps(node["const"])
    kind = node.get("type", "any")
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


def default_of(values: dict[str, Any], key: str) -> Any:
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return UNSET
        node = node[part]
    return node


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def expected_table() -> str:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, node in leaves(schema):
        default = default_of(values, key)
        shown = "(unset)" if default is UNSET else f"`{json.dumps(default)}`"
        rows.append(
            f"| `{key}` | {cell(type_of(node))} | {cell(shown)} | "
            f"{cell(node.get('description', ''))} |"
        )
    return "\n".join(rows)


def test_the_values_table_matches_the_schema_and_the_defaults() -> None:
    text = README.read_text()
    assert BEGIN in text
    assert END in text
    head, rest = text.split(BEGIN, 1)
    table, tail = rest.split(END, 1)
    want = expected_table()
    if UPDATE:
        README.write_text(f"{head}{BEGIN}\n{want}\n{END}{tail}")
        return
    assert table.strip() == want, "the chart README's values table is stale; see the docstring"


def test_every_schema_value_is_described() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    undescribed = [key for key, node in leaves(schema) if not node.get("description")]
    assert not undescribed


def test_notes_name_no_source_checkout_path() -> None:
    """NOTES.txt is read after installing from a package: no repository paths in it."""
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    for path in ("examples/", "helm/bindery", "crds/", "docs/"):
        assert path not in notes, f"NOTES.txt points at {path}, which a packaged chart lacks"
    assert "helm show crds" in notes
