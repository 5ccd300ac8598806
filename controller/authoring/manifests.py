"""AgentSpec and Tool manifests: the checks both front-ends share, and how they are printed.

A manifest is checked the same way whether it came from KDL (``render``) or from YAML
(``export``): Kubernetes naming rules for its metadata, the wire models for its ``spec``, and the
domain rules the models do not express (identifiers, one ``work`` binding, unique names, URIs with
a scheme and no whitespace). Every problem is reported at the position of the offending part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from controller.authoring.errors import Problems, q
from controller.authoring.yamlpos import Located
from controller.domain.models import (
    API_VERSION,
    DUPLICATE_NAMES_REPORTED,
    RULE_ERROR,
    WORK_ROLE,
    AgentSpecSpec,
    Runtime,
)
from controller.domain.rules import param_problem, qualified_name_problem, uri_problem

AGENT_KIND = "AgentSpec"
TOOL_KIND = "Tool"
_NOUN = {AGENT_KIND: "agent", TOOL_KIND: "tool"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
DNS_LABEL = re.compile(_DNS_LABEL)
IDENTIFIER = re.compile(r"[a-z][a-z0-9_-]*")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

SUBDOMAIN_RULE = (
    "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
    "starting and ending with a letter or digit, at most 253 characters"
)
LABEL_RULE = (
    "a DNS-1123 label: lowercase letters, digits and '-', "
    "starting and ending with a letter or digit, at most 63 characters"
)
IDENTIFIER_RULE = (
    "an identifier: a lowercase letter, then lowercase letters, digits, '_' or '-', "
    "at most 63 characters"
)
TYPE_RULE = f"a ResourceType name, {LABEL_RULE}"
INT64_MAX = 2**63 - 1


# --------------------------------------------------------------------------------------------
# Rules


def is_subdomain(value: str) -> bool:
    return len(value) <= 253 and DNS_SUBDOMAIN.fullmatch(value) is not None


def is_dns_label(value: str) -> bool:
    return len(value) <= 63 and DNS_LABEL.fullmatch(value) is not None


def is_identifier(value: str) -> bool:
    return len(value) <= 63 and IDENTIFIER.fullmatch(value) is not None


def label_value_problem(value: str) -> str | None:
    if value == "" or (len(value) <= 63 and _QUALIFIED_NAME.fullmatch(value)):
        return None
    return (
        "a label value must be empty or 1 to 63 letters, digits, '-', '_' or '.', "
        "starting and ending with a letter or digit"
    )


def dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


# --------------------------------------------------------------------------------------------
# Checks


def validate_model(
    model: type[BaseModel], doc: Located, prefix: tuple[str, ...], problems: Problems
) -> Any:
    """Validate ``doc.data[prefix]`` strictly as JSON against ``model``; report at positions."""
    data: Any = doc.data
    for part in prefix:
        data = data.get(part) if isinstance(data, dict) else None
    if data is None:
        data = {}
    try:
        # As kubectl does, YAML values with no JSON form (timestamps...) travel as strings.
        # Duplicate binding names are reported by _check_resources, at their positions.
        return model.model_validate_json(
            json.dumps(data, default=str),
            strict=True,
            context={DUPLICATE_NAMES_REPORTED: True},
        )
    except ValidationError as exc:
        for err in exc.errors():
            path = (*prefix, *err["loc"])
            where = doc.key_at(*path) if err["type"] == "extra_forbidden" else doc.at(*path)
            # A rule's message names the value and the fix; others need the field's path.
            message = err["msg"] if err["type"] == RULE_ERROR else f"{dotted(path)}: {err['msg']}"
            problems.add(doc.file, where, message)
        return None


def check_metadata(doc: Located, kind: str, problems: Problems) -> dict[str, Any] | None:
    """Check ``apiVersion``, ``kind`` and the metadata a manifest may carry; return its metadata.

    Only ``name``, ``namespace``, ``labels`` and ``annotations`` are kept (minus kubectl's
    last-applied annotation): what the API server adds (uid, resourceVersion, managedFields...)
    is not authored and is dropped.
    """
    obj = doc.data
    file = doc.file
    if not isinstance(obj, dict):
        problems.add(file, doc.origin, f"expected a {kind} manifest, found {_kind_of(obj)}")
        return None
    if obj.get("apiVersion") != API_VERSION or obj.get("kind") != kind:
        found = f"{obj.get('apiVersion')!s}/{obj.get('kind')!s}"
        problems.add(
            file,
            doc.at("kind") if obj.get("apiVersion") == API_VERSION else doc.at("apiVersion"),
            f"expected apiVersion {API_VERSION} and kind {kind}, found {found}",
        )
        return None
    md = obj.get("metadata")
    if not isinstance(md, dict):
        problems.add(file, doc.at("metadata"), "expected metadata with a name")
        return None
    out: dict[str, Any] = {}
    name = md.get("name")
    if not isinstance(name, str) or not is_subdomain(name):
        problems.add(
            file,
            doc.at("metadata", "name"),
            f"{_NOUN.get(kind, kind)} name {q(name)} is not a valid Kubernetes object name: "
            f"expected {SUBDOMAIN_RULE}",
        )
    else:
        out["name"] = name
    namespace = md.get("namespace")
    if namespace is not None:
        if not isinstance(namespace, str) or not is_dns_label(namespace):
            problems.add(
                file,
                doc.at("metadata", "namespace"),
                f"namespace {q(namespace)} is not valid: expected {LABEL_RULE}",
            )
        else:
            out["namespace"] = namespace
    for field in ("labels", "annotations"):
        if md.get(field) is not None and (kept := _check_map(doc, field, md[field], problems)):
            out[field] = kept
    return out


def _check_map(doc: Located, field: str, entries: object, problems: Problems) -> dict[str, str]:
    """``metadata.labels`` or ``metadata.annotations``: the entries to keep."""
    if not isinstance(entries, dict):
        problems.add(doc.file, doc.at("metadata", field), f"metadata.{field}: expected a mapping")
        return {}
    what = field[:-1]
    kept: dict[str, str] = {}
    for key, value in entries.items():
        if field == "annotations" and key == LAST_APPLIED:
            continue
        path = ("metadata", field, key)
        if why := qualified_name_problem(str(key)):
            problems.add(doc.file, doc.key_at(*path), f"{what} key {q(key)} is not valid: {why}")
        if not isinstance(value, str):
            problems.add(
                doc.file,
                doc.at(*path),
                f"{what} {q(key)}: expected a string, found {_kind_of(value)}",
            )
        elif field == "labels" and (why := label_value_problem(value)):
            problems.add(doc.file, doc.at(*path), f"label {q(key)} has value {q(value)}: {why}")
        else:
            kept[str(key)] = value
    return kept


def check_agent(doc: Located, problems: Problems) -> tuple[dict[str, Any], AgentSpecSpec] | None:
    """Check one AgentSpec manifest; return its authored metadata and its spec, or None."""
    before = len(problems)
    metadata = check_metadata(doc, AGENT_KIND, problems)
    if metadata is None:
        return None
    spec = validate_model(AgentSpecSpec, doc, ("spec",), problems)
    if isinstance(spec, AgentSpecSpec):
        who = f"agent {q(metadata.get('name', '?'))}"
        _check_resources(doc, who, spec, problems)
        _check_tools(doc, who, spec, problems)
        _check_selector(doc, spec, problems)
        _check_runtime(doc, spec, problems)
        _check_limits(doc, spec, problems)
    if len(problems) != before:
        return None
    return metadata, spec


def _check_resources(doc: Located, who: str, spec: AgentSpecSpec, problems: Problems) -> None:
    """Roles are unique identifiers (so at most one ``work``); tags name types; URIs are URIs."""
    roles: dict[str, int] = {}
    for i, binding in enumerate(spec.resources):
        at = ("spec", "resources", i)
        if not is_identifier(binding.name):
            problems.add(
                doc.file,
                doc.at(*at, "name"),
                f"resource role {q(binding.name)} is not valid: expected {IDENTIFIER_RULE}",
            )
        if binding.name in roles:
            first = doc.at("spec", "resources", roles[binding.name])
            if binding.name == WORK_ROLE:
                message = (
                    f'{who} has a second "work" resource (the first is at {first}): '
                    "expected zero or one work binding per agent"
                )
            else:
                message = (
                    f"{who} has two resources with the role {q(binding.name)} (the first is at "
                    f"{first}): expected each role once"
                )
            problems.add(doc.file, doc.at(*at), message)
        else:
            roles[binding.name] = i
        if not is_dns_label(binding.tag):
            problems.add(
                doc.file, doc.at(*at, "tag"), f"_tag {q(binding.tag)}: expected {TYPE_RULE}"
            )
        if why := uri_problem(binding.uri):
            problems.add(doc.file, doc.at(*at, "uri"), why)


def _check_tools(doc: Located, who: str, spec: AgentSpecSpec, problems: Problems) -> None:
    tools: dict[str, int] = {}
    for i, use in enumerate(spec.tools):
        at = ("spec", "tools", i)
        if not is_subdomain(use.name):
            problems.add(
                doc.file,
                doc.at(*at, "name"),
                f"tool name {q(use.name)} is not a Tool name: expected {SUBDOMAIN_RULE}",
            )
        if use.name in tools:
            first = doc.at("spec", "tools", tools[use.name])
            problems.add(
                doc.file,
                doc.at(*at),
                f"{who} uses tool {q(use.name)} twice (the first is at {first}): "
                "expected each tool once, with all its params",
            )
        else:
            tools[use.name] = i
        for slot, value in use.params.items():
            if not is_identifier(slot):
                problems.add(
                    doc.file,
                    doc.key_at(*at, "params", slot),
                    f"param {q(slot)} is not a slot name: expected {IDENTIFIER_RULE}",
                )
            if why := param_problem(value):
                problems.add(doc.file, doc.at(*at, "params", slot), f"param {q(slot)}: {why}")


def _check_selector(doc: Located, spec: AgentSpecSpec, problems: Problems) -> None:
    if spec.resource_selector is None:
        return
    sel = ("spec", "resourceSelector")
    for key, value in spec.resource_selector.match_labels.items():
        if why := qualified_name_problem(key):
            problems.add(
                doc.file, doc.key_at(*sel, "matchLabels", key), f"label key {q(key)}: {why}"
            )
        if why := label_value_problem(value):
            problems.add(doc.file, doc.at(*sel, "matchLabels", key), f"label {q(key)}: {why}")
    for i, req in enumerate(spec.resource_selector.match_expressions):
        at = (*sel, "matchExpressions", i)
        if why := qualified_name_problem(req.key):
            problems.add(doc.file, doc.at(*at, "key"), f"label key {q(req.key)}: {why}")
        if req.operator in ("In", "NotIn") and not req.values:
            problems.add(
                doc.file,
                doc.at(*at),
                f"operator {req.operator} needs values: expected at least one",
            )
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            problems.add(
                doc.file, doc.at(*at, "values"), f"operator {req.operator}: expected no values"
            )


def _check_runtime(doc: Located, spec: AgentSpecSpec, problems: Problems) -> None:
    if spec.runtime is None:
        return
    rt = ("spec", "runtime")
    if not spec.runtime.image or any(c.isspace() for c in spec.runtime.image):
        problems.add(
            doc.file,
            doc.at(*rt, "image"),
            f"runtime image {q(spec.runtime.image)}: expected a container image reference",
        )
    names: dict[str, int] = {}
    for i, var in enumerate(spec.runtime.env):
        at = (*rt, "env", i)
        if len(var.name) > 256 or not ENV_NAME.fullmatch(var.name):
            problems.add(
                doc.file,
                doc.at(*at, "name"),
                f"environment variable {q(var.name)}: expected a name of letters, digits, "
                "'_', '-' and '.', not starting with a digit",
            )
        if var.name in names:
            problems.add(
                doc.file,
                doc.at(*at),
                f"environment variable {q(var.name)} is set twice (the first is at "
                f"{doc.at(*rt, 'env', names[var.name])}): expected each name once",
            )
        else:
            names[var.name] = i


KDL_RUNTIME_FIELDS = frozenset({"image", "command", "args", "env", "model", "instructions"})
"""What the KDL ``runtime`` node can say; pod settings stay in YAML for now."""


def check_expressible_in_kdl(doc: Located, spec: AgentSpecSpec, problems: Problems) -> bool:
    """Whether KDL can carry the whole spec; each field it cannot is a problem, never dropped."""
    if spec.runtime is None:
        return True
    ok = True
    for field in sorted(spec.runtime.model_fields_set):
        alias = Runtime.model_fields[field].alias or field
        if alias in KDL_RUNTIME_FIELDS:
            continue
        pod = spec.runtime.security_context
        only_user = pod is not None and pod.model_fields_set <= {"run_as_user"}
        if alias == "securityContext" and only_user:
            continue  # `run-as-user UID`
        ok = False
        problems.add(
            doc.file,
            doc.key_at("spec", "runtime", alias),
            f"spec.runtime.{alias} has no KDL form: exporting would drop it; keep this agent "
            "in YAML, or remove the field before exporting",
        )
    return ok


def _check_limits(doc: Located, spec: AgentSpecSpec, problems: Problems) -> None:
    """The CRD's size limits, reported here with positions rather than by the API server."""
    counts: list[tuple[tuple[str | int, ...], int, int]] = [
        (("spec", "resources"), len(spec.resources), 32),
        (("spec", "tools"), len(spec.tools), 32),
    ]
    counts += [
        (("spec", "tools", i, "params"), len(u.params), 32) for i, u in enumerate(spec.tools)
    ]
    sizes: list[tuple[tuple[str | int, ...], str, int]] = []
    if spec.runtime is not None:
        rt = spec.runtime
        counts += [
            (("spec", "runtime", f), len(getattr(rt, f)), 64) for f in ("command", "args", "env")
        ]
        sizes += [
            (("spec", "runtime", "image"), rt.image, 1024),
            (("spec", "runtime", "model"), rt.model, 253),
            (("spec", "runtime", "instructions"), rt.instructions, 65536),
        ]
        sizes += [(("spec", "runtime", "command", i), w, 4096) for i, w in enumerate(rt.command)]
        sizes += [(("spec", "runtime", "args", i), w, 4096) for i, w in enumerate(rt.args)]
        sizes += [
            (("spec", "runtime", "env", i, "value"), v.value, 8192) for i, v in enumerate(rt.env)
        ]
    if spec.relaunch_generation > INT64_MAX:
        problems.add(
            doc.file,
            doc.at("spec", "relaunchGeneration"),
            f"relaunchGeneration {spec.relaunch_generation}: expected at most {INT64_MAX}",
        )
    for path, count, limit in counts:
        if count > limit:
            problems.add(
                doc.file,
                doc.at(*path),
                f"{dotted(path)} has {count} entries: expected at most {limit}",
            )
    for path, text, limit in sizes:
        if len(text) > limit:
            problems.add(
                doc.file,
                doc.at(*path),
                f"{dotted(path)} is {len(text)} characters long: expected at most {limit}",
            )


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "a number"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a mapping"),
)


def _kind_of(value: object) -> str:
    if value is None:
        return "null"
    for kind, name in _KINDS:
        if isinstance(value, kind):
            return f"{name} ({q(value)})" if kind in (bool, int, float, str) else name
    return type(value).__name__


# --------------------------------------------------------------------------------------------
# Building and printing


def agent_manifest(metadata: dict[str, Any], spec: AgentSpecSpec) -> dict[str, Any]:
    """The AgentSpec object for ``kubectl apply``: empty and default fields are left out."""
    return {
        "apiVersion": API_VERSION,
        "kind": AGENT_KIND,
        "metadata": metadata,
        "spec": spec.model_dump(mode="json", by_alias=True, exclude_defaults=True),
    }


class _Dumper(yaml.SafeDumper):
    """Block style, lists indented under their key, multi-line strings as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


_YAML_BREAKS = frozenset("\x85\u2028\u2029\r")
"""Characters YAML reads as line breaks: plain, quoted or literal, they would fold or vanish."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if _YAML_BREAKS.intersection(value):
        style: str | None = '"'  # double quotes escape them: the text survives byte for byte
    else:
        style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(objects: Iterable[dict[str, Any]]) -> str:
    """A YAML stream, each document starting with ``---``."""
    return yaml.dump_all(
        list(objects),
        Dumper=_Dumper,
        explicit_start=True,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


def dump_json(objects: Iterable[dict[str, Any]]) -> str:
    """One object as itself; several as a ``v1`` ``List`` (what ``kubectl apply -f -`` reads)."""
    items = list(objects)
    doc: Any = items[0] if len(items) == 1 else {"apiVersion": "v1", "kind": "List", "items": items}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
