"""The CRD YAML under ``crds/`` is the source of the wire shapes; the pydantic models must match it.

Each CRD's ``spec`` schema is walked together with its model (``ResourceTypeSpec``,
``ResourceSpec``, ``ToolSpec``, ``AgentSpecSpec``, ``ResourceGrantSpec`` and everything nested):
same property names (the models' camelCase aliases), same required sets, same types, same enums,
and the same defaults wherever either side states one. The rest of this file checks the CRDs' own
contract: names, scope, status subresource, printer columns, a description on every field,
list-maps, and a size limit on every list, map and string a user writes.
"""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from controller.domain.grants import ResourceGrantSpec
from controller.domain.models import (
    API_VERSION,
    GROUP,
    VERSION,
    AgentSpecSpec,
    ResourceSpec,
    ResourceTypeSpec,
    ToolSpec,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"
VALID_CASES = REPO_ROOT / "tests" / "integration" / "cases" / "valid.yaml"

# kind -> (file, plural, scope, spec model)
KINDS: dict[str, tuple[str, str, str, type[BaseModel]]] = {
    "ResourceType": ("resourcetypes.yaml", "resourcetypes", "Cluster", ResourceTypeSpec),
    "Resource": ("resources.yaml", "resources", "Namespaced", ResourceSpec),
    "Tool": ("tools.yaml", "tools", "Namespaced", ToolSpec),
    "AgentSpec": ("agentspecs.yaml", "agentspecs", "Namespaced", AgentSpecSpec),
    "ResourceGrant": ("resourcegrants.yaml", "resourcegrants", "Namespaced", ResourceGrantSpec),
}


def words(text: str) -> set[str]:
    """The set of space-separated words in ``text``."""
    return set(text.split())


# Short names a user types. None may shadow a built-in resource's name or short name.
BUILTIN_NAMES = words(
    "all cm configmaps cs csr ds deploy ep eps ev events hpa ing jobs limits netpol no nodes ns pc "
    "pdb po pods pv pvc quota rc rs sa sc secrets services sts svc crd crds cj roles role"
)

MISSING = object()


def load_crd(kind: str) -> dict[str, Any]:
    data = yaml.safe_load((CRD_DIR / KINDS[kind][0]).read_text())
    assert isinstance(data, dict)
    return data


def root_schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert isinstance(schema, dict)
    return schema


def spec_schema(kind: str) -> dict[str, Any]:
    spec = root_schema(load_crd(kind))["properties"]["spec"]
    assert isinstance(spec, dict)
    return spec


# --------------------------------------------------------------------------------------------
# Schema <-> model walk


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        assert len(args) == 1, f"unsupported union {annotation!r}"
        return args[0]
    return annotation


def _wire(value: Any) -> Any:
    """A model default as it would appear in JSON (enum members by value)."""
    if isinstance(value, enum.Enum):
        return value.value
    return value


def _compare_default(schema: dict[str, Any], field: FieldInfo, path: str) -> list[str]:
    if field.is_required():
        if "default" in schema:
            return [f"{path}: CRD states default {schema['default']!r} on a required model field"]
        return []
    model_default = _wire(field.get_default(call_default_factory=True))
    crd_default = schema.get("default", MISSING)
    if crd_default is not MISSING:
        if model_default != crd_default:
            return [f"{path}: CRD default {crd_default!r} != model default {model_default!r}"]
        return []
    # No default stated by the CRD: the model may only fall back to "absent" or an empty value.
    if model_default is None or model_default in ("", [], {}):
        return []
    return [f"{path}: model defaults to {model_default!r} but the CRD states no default"]


def _compare_bounds(schema: dict[str, Any], field: FieldInfo, path: str) -> list[str]:
    problems: list[str] = []
    for meta in field.metadata:
        if isinstance(meta, annotated_types.Ge) and schema.get("minimum") != meta.ge:
            problems.append(f"{path}: model ge={meta.ge} but CRD minimum={schema.get('minimum')}")
    return problems


def compare_type(schema: dict[str, Any], annotation: Any, path: str) -> list[str]:
    """Compare one schema node with one (unwrapped) Python annotation."""
    if get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is Annotated:  # constraints ride along; the type is what counts
        annotation = get_args(annotation)[0]
    if schema.get("x-kubernetes-int-or-string"):
        if set(get_args(annotation)) != {int, str}:
            return [f"{path}: CRD is int-or-string, the model {annotation!r}"]
        return []
    annotation = _unwrap_optional(annotation)
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    origin = get_origin(annotation)
    stype = schema.get("type")
    problems: list[str] = []
    if origin is list:
        if stype == "array":
            problems += compare_type(schema["items"], get_args(annotation)[0], f"{path}[]")
        else:
            problems.append(f"{path}: model is a list, CRD type is {stype!r}")
    elif origin is dict:
        if stype == "object" and "additionalProperties" in schema:
            value = get_args(annotation)[1]
            problems += compare_type(schema["additionalProperties"], value, f"{path}{{}}")
        else:
            problems.append(f"{path}: model is a dict, CRD is not an additionalProperties map")
    elif origin is Literal:
        problems += _compare_enum(schema, {str(a) for a in get_args(annotation)}, path)
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        problems += _compare_enum(schema, {str(m.value) for m in annotation}, path)
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if stype == "object":
            problems += compare_model(schema, annotation, path)
        else:
            problems.append(f"{path}: model is {annotation.__name__}, CRD type is {stype!r}")
    else:
        expected = {str: "string", int: "integer", bool: "boolean"}.get(annotation)
        if expected is None:
            problems.append(f"{path}: unsupported model annotation {annotation!r}")
        elif stype != expected:
            problems.append(f"{path}: model is {expected}, CRD is {stype!r}")
        if "enum" in schema:
            problems.append(f"{path}: CRD states enum {schema['enum']}, the model a plain type")
    return problems


def _compare_enum(schema: dict[str, Any], values: set[str], path: str) -> list[str]:
    problems = [] if schema.get("type") == "string" else [f"{path}: enum is not a CRD string"]
    crd_values = set(schema.get("enum", []))
    if crd_values != values:
        problems.append(f"{path}: CRD enum {sorted(crd_values)} != model {sorted(values)}")
    return problems


def compare_model(schema: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    """Compare an object schema with a pydantic model, recursively."""
    props: dict[str, Any] = schema.get("properties", {})
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    problems: list[str] = []
    if set(props) != set(fields):
        problems.append(
            f"{path} ({model.__name__}): CRD-only properties {sorted(set(props) - set(fields))}, "
            f"model-only fields {sorted(set(fields) - set(props))}"
        )
    crd_required = set(schema.get("required", []))
    model_required = {alias for alias, f in fields.items() if f.is_required()}
    if crd_required != model_required:
        problems.append(
            f"{path} ({model.__name__}): CRD required {sorted(crd_required)} != "
            f"model required {sorted(model_required)}"
        )
    for alias in sorted(set(props) & set(fields)):
        field = fields[alias]
        sub = f"{path}.{alias}"
        problems += compare_type(props[alias], field.annotation, sub)
        problems += _compare_default(props[alias], field, sub)
        problems += _compare_bounds(props[alias], field, sub)
    return problems


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_spec_schema_matches_model(kind: str) -> None:
    model = KINDS[kind][3]
    assert compare_model(spec_schema(kind), model, "spec") == []


def test_walker_notices_drift() -> None:
    """The comparison itself catches renamed, retyped, re-required and re-defaulted fields."""
    schema = spec_schema("Tool")
    slot = schema["properties"]["resourceSlots"]["items"]
    slot["properties"]["resourceTypo"] = slot["properties"].pop("resourceType")
    slot["properties"]["access"]["enum"].append("admin")
    slot["properties"]["binding"]["default"] = "static"
    slot["properties"]["required"]["type"] = "string"
    slot["required"] = ["name"]
    problems = "\n".join(compare_model(schema, ToolSpec, "spec"))
    assert "CRD-only properties ['resourceTypo']" in problems
    assert "model-only fields ['resourceType']" in problems
    assert "spec.resourceSlots[].access: CRD enum" in problems
    assert "binding: CRD default 'static' != model default 'contextual'" in problems
    assert "spec.resourceSlots[].required: model is boolean" in problems
    assert "CRD required ['name'] != model required ['name', 'resourceType']" in problems


# --------------------------------------------------------------------------------------------
# The CRDs' own contract


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_identity(kind: str) -> None:
    _, plural, scope, _ = KINDS[kind]
    crd = load_crd(kind)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.{GROUP}"
    spec = crd["spec"]
    assert spec["group"] == GROUP
    assert spec["scope"] == scope
    names = spec["names"]
    assert names["kind"] == kind
    assert names["plural"] == plural
    assert names["singular"] == kind.lower()
    assert names["listKind"] == f"{kind}List"
    assert names["categories"] == ["bindery"]
    assert names["shortNames"], "every kind has a short name"
    assert not set(names["shortNames"]) & BUILTIN_NAMES
    (version,) = spec["versions"]
    assert f"{GROUP}/{version['name']}" == API_VERSION == f"{GROUP}/{VERSION}"
    assert version["served"] is True
    assert version["storage"] is True
    assert version["subresources"] == {"status": {}}


# Names other projects' CRDs are known to use as plurals, singulars or short names: a Bindery short
# name equal to one would make `kubectl get NAME` list Bindery objects instead of theirs (kubectl
# expands short names before it matches plurals). kagent.dev has Agents; Gloo has RouteTables (rt).
FOREIGN_NAMES = {"agent", "agents", "tool", "tools", "resource", "model", "models", "rt", "res"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_short_names_do_not_shadow_other_projects_kinds(kind: str) -> None:
    names = load_crd(kind)["spec"]["names"]
    assert not set(names["shortNames"]) & FOREIGN_NAMES
    assert names["categories"] == ["bindery"]


def test_short_names_are_unique_across_kinds() -> None:
    seen: list[str] = []
    for kind in KINDS:
        seen += load_crd(kind)["spec"]["names"]["shortNames"]
    assert len(seen) == len(set(seen))


PRINTER_COLUMNS = {
    "AgentSpec": {
        "Work": ".status.work.uri",
        "State": ".status.state",
        "Synced": ".status.delivery.synced",
        "Launch": ".status.launch",
        "Drift": ".status.drift",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Age": ".metadata.creationTimestamp",
    },
    "Resource": {
        "Type": ".spec.type",
        "URI": ".spec.uri",
        "Holder": ".status.holder.name",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Delivered": ".status.delivered",
        "Age": ".metadata.creationTimestamp",
    },
    "Tool": {
        "Slots": ".status.slotCount",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Delivered": ".status.delivered",
        "Age": ".metadata.creationTimestamp",
    },
    "ResourceType": {
        "Parents": ".spec.parentTypes",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Delivered": ".status.delivered",
        "Age": ".metadata.creationTimestamp",
    },
    "ResourceGrant": {
        "From": ".spec.from[*].namespace",
        "To": ".spec.to[*].name",
        "Uses": ".spec.uses",
        "Ready": '.status.conditions[?(@.type=="Ready")].status',
        "Reason": '.status.conditions[?(@.type=="Ready")].reason',
        "Delivered": ".status.delivered",
        "Age": ".metadata.creationTimestamp",
    },
}


def _resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    """The schema node a simple printer-column JSONPath points at (filters step into items)."""
    node: dict[str, Any] | None = schema
    for part in json_path.lstrip(".").split("."):
        if node is None:
            return None
        name, _, rest = part.partition("[")
        node = node.get("properties", {}).get(name)
        if node is not None and rest:
            node = node.get("items")
    return node


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_printer_columns(kind: str) -> None:
    crd = load_crd(kind)
    (version,) = crd["spec"]["versions"]
    columns = version["additionalPrinterColumns"]
    default_columns = {c["name"]: c["jsonPath"] for c in columns if not c.get("priority")}
    assert default_columns == PRINTER_COLUMNS[kind]
    schema = root_schema(crd)
    for column in columns:
        assert column.get("description") or column["name"] == "Age"
        if column["jsonPath"].startswith(".metadata"):
            continue
        path = re.sub(r'\[\?\(@\.type=="Ready"\)\]', "[]", column["jsonPath"])
        assert _resolve(schema, path) is not None, f"{kind} column {column['name']}: no such field"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_ready_message_is_a_wide_column(kind: str) -> None:
    """``kubectl get -o wide`` shows why an object is not Ready (the default view its reason)."""
    (version,) = load_crd(kind)["spec"]["versions"]
    wide = {c["name"]: c for c in version["additionalPrinterColumns"] if c.get("priority")}
    assert wide["Message"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].message'
    assert wide["Message"]["priority"] == 1


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_status_defaults_to_not_yet_observed(kind: str) -> None:
    """A new object's status reads ``observedGeneration: -1`` until the controller writes it, so
    kstatus never computes Current for an object the controller has not seen."""
    status = root_schema(load_crd(kind))["properties"]["status"]
    assert status["default"] == {"observedGeneration": -1}
    assert status["properties"]["observedGeneration"]["minimum"] == -1


def _walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_field_has_a_description(kind: str) -> None:
    missing = [
        path
        for path, node in _walk(root_schema(load_crd(kind)), kind)
        if path != f"{kind}.metadata" and not str(node.get("description", "")).strip()
    ]
    assert missing == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_spec_sizes_are_bounded(kind: str) -> None:
    """Every string, list and map a user writes has a limit (CEL cost and sanity both need it)."""
    unbounded = []
    for path, node in _walk(spec_schema(kind), "spec"):
        kind_of = node.get("type")
        if kind_of == "string" and "enum" not in node and "maxLength" not in node:
            unbounded.append(f"{path}: maxLength")
        if kind_of == "array" and "maxItems" not in node:
            unbounded.append(f"{path}: maxItems")
        if kind_of == "object" and "additionalProperties" in node and "maxProperties" not in node:
            unbounded.append(f"{path}: maxProperties")
    assert unbounded == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_structural_and_not_preserving_unknown_fields(kind: str) -> None:
    """Unknown fields are pruned (structural schema), never preserved, anywhere in the schema."""
    for path, node in _walk(root_schema(load_crd(kind)), kind):
        assert "x-kubernetes-preserve-unknown-fields" not in node, path
        if path != f"{kind}.metadata" and not node.get("x-kubernetes-int-or-string"):
            assert "type" in node, f"{path}: a structural schema states a type on every node"


LIST_MAPS = {
    "AgentSpec": [
        "spec.resources",
        "spec.tools",
        "spec.runtime.env",
        "spec.runtime.imagePullSecrets",
        "spec.runtime.volumes",
    ],
    "Tool": ["spec.resourceSlots"],
}


@pytest.mark.parametrize("kind", sorted(LIST_MAPS))
def test_lists_keyed_by_name_are_list_maps(kind: str) -> None:
    nodes = dict(_walk(spec_schema(kind), "spec"))
    for path in LIST_MAPS[kind]:
        node = nodes[path]
        assert node["x-kubernetes-list-type"] == "map", path
        assert node["x-kubernetes-list-map-keys"] == ["name"], path
        assert "name" in node["items"]["required"], path


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_status_has_observed_generation_and_standard_conditions(kind: str) -> None:
    status = root_schema(load_crd(kind))["properties"]["status"]["properties"]
    assert status["observedGeneration"]["type"] == "integer"
    conditions = status["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["properties"]) == words(
        "type status reason message lastTransitionTime observedGeneration"
    )
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert {"type", "status"} <= set(item["required"])


def test_agent_status_fields() -> None:
    status = root_schema(load_crd("AgentSpec"))["properties"]["status"]["properties"]
    assert status["state"]["enum"] == [
        "Idle",
        "Working",
        "Waiting",
        "Releasing",
        "Suspended",
        "Pending",
        "Error",
    ]
    session = status["session"]["properties"]
    assert "Suspended" in session["phase"]["enum"]
    assert session["idleSince"]["format"] == "date-time"
    assert {"uri", "holder", "waitingFor"} <= set(status["work"]["properties"])
    binding = status["bindings"]["items"]["properties"]
    assert words("name tool slot mode access state resource message") <= set(binding)
    resource = set(binding["resource"]["properties"])
    assert resource == words("uri type alias name namespace uid grant")
    assert words(
        "desiredLaunchGeneration observedLaunchGeneration desiredTrajectoryHash "
        "launchedTrajectoryHash lastLaunchTime launch bindingsConfigMap"
    ) <= set(status)


def test_other_status_fields() -> None:
    tool = root_schema(load_crd("Tool"))["properties"]["status"]["properties"]
    assert {"slotCount", "staticSlotsValid", "staticSlots"} <= set(tool)
    rtype = root_schema(load_crd("ResourceType"))["properties"]["status"]["properties"]
    assert {"ancestors", "cycle"} <= set(rtype)
    resource = root_schema(load_crd("Resource"))["properties"]["status"]["properties"]
    assert {"holder", "valid"} <= set(resource)
    assert {"namespace", "name"} <= set(resource["holder"]["properties"])


def test_transition_rules_are_where_the_contract_needs_them() -> None:
    uri = spec_schema("Resource")["properties"]["uri"]
    assert "self == oldSelf" in [r["rule"] for r in uri["x-kubernetes-validations"]]
    relaunch = spec_schema("AgentSpec")["properties"]["relaunchGeneration"]
    # Any change relaunches, so a GitOps revert (lowering it) must be accepted: no transition rule.
    assert "x-kubernetes-validations" not in relaunch
    assert relaunch["minimum"] == 0


def test_every_cel_rule_carries_a_message() -> None:
    for kind in KINDS:
        for path, node in _walk(root_schema(load_crd(kind)), kind):
            for rule in node.get("x-kubernetes-validations", []):
                assert str(rule.get("message", "")).strip(), f"{path}: {rule['rule']}"


def test_valid_fixtures_read_as_models() -> None:
    """What the integration test shows the API server accepts, the models read too."""
    docs = [d for d in yaml.safe_load_all(VALID_CASES.read_text()) if d]
    assert {d["kind"] for d in docs} == set(KINDS)
    for doc in docs:
        assert doc["apiVersion"] == API_VERSION
        KINDS[doc["kind"]][3].model_validate(doc.get("spec", {}))


def _example_docs() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((REPO_ROOT / "examples").rglob("*.yaml")):
        docs += [
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and str(d.get("apiVersion", "")).startswith(f"{GROUP}/")
        ]
    return docs


def test_examples_read_as_models() -> None:
    docs = _example_docs()
    if not docs:
        pytest.skip(f"no {GROUP} objects under examples/ yet")
    for doc in docs:
        assert doc["apiVersion"] == API_VERSION, doc["metadata"]
        KINDS[doc["kind"]][3].model_validate(doc.get("spec", {}))
