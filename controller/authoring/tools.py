"""``import-tool``: a tool definition in the source's snake_case YAML to a Tool manifest.

The source format (one tool per YAML document)::

    name: apply-config            # optional when the file holds one tool: the file name is used
    description: ...              # optional
    resource_slots:
      - name: repo                # the slot name: an identifier
        resource_type: git-checkout
        access: read_write        # read_only | read_write | write_only (default read_write)
        binding: contextual       # contextual (default) | static | parameter
        static_resource: shared-config   # static only: NAME or NAMESPACE/NAME of a Resource
        required: true            # default true
        description: ...

becomes ``apiVersion: bindery.dev/v1alpha1``, ``kind: Tool`` with ``spec.resourceSlots`` in the
camelCase of the API. Every problem is reported at its file, line and column.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePath
from typing import Any

from bindery_session.wire import Access
from pydantic.alias_generators import to_camel

from controller.authoring.convert import Source
from controller.authoring.errors import AuthoringError, Pos, Problems, q
from controller.authoring.manifests import (
    IDENTIFIER_RULE,
    SUBDOMAIN_RULE,
    TOOL_KIND,
    TYPE_RULE,
    dotted,
    is_dns_label,
    is_identifier,
    is_subdomain,
    validate_model,
)
from controller.authoring.yamlpos import Located, load
from controller.domain.models import API_VERSION, ToolSpec

TOOL_KEYS = ("name", "description", "resource_slots")
SLOT_KEYS = (
    "name",
    "resource_type",
    "access",
    "binding",
    "static_resource",
    "required",
    "description",
)
BINDINGS = ("contextual", "static", "parameter")
ACCESSES = tuple(a.value for a in Access)
MAX_SLOTS = 32


def _unknown_keys(
    doc: Located,
    path: tuple[str | int, ...],
    mapping: dict[Any, Any],
    allowed: tuple[str, ...],
    problems: Problems,
) -> None:
    for key in mapping:
        if key in allowed:
            continue
        hint = ""
        for known in allowed:
            if to_camel(known) == key and known != key:
                hint = f' (the source format is snake_case: "{known}")'
        problems.add(
            doc.file,
            doc.key_at(*path, str(key)),
            f"unknown key {q(key)}{hint}: expected one of {', '.join(allowed)}",
        )


def _type_error(doc: Located, path: tuple[str | int, ...], what: str, problems: Problems) -> None:
    problems.add(doc.file, doc.at(*path), f"{dotted(path) or 'the document'}: expected {what}")


def _slot(doc: Located, i: int, raw: object, problems: Problems) -> dict[str, Any] | None:
    """One slot in the API's camelCase, or None after reporting every problem it has."""
    at: tuple[str | int, ...] = ("resource_slots", i)
    if not isinstance(raw, dict):
        _type_error(doc, at, "a mapping with name, resource_type, access and binding", problems)
        return None
    before = len(problems)
    _unknown_keys(doc, at, raw, SLOT_KEYS, problems)

    def text(key: str) -> str | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            _type_error(doc, (*at, key), f"a string, found {q(value)}", problems)
            return None
        return value

    name = text("name")
    label = f"resource slot {q(name)}" if name else f"resource slot {i + 1}"
    for key in ("name", "resource_type"):
        if key not in raw:
            problems.add(doc.file, doc.at(*at), f'{label} has no {key}: expected "{key}: ..."')
    rtype = text("resource_type")
    _check_names(doc, at, name, rtype, problems)
    modes: dict[str, str] = {}
    for key, allowed, default in (
        ("access", ACCESSES, "read_write"),
        ("binding", BINDINGS, "contextual"),
    ):
        modes[key] = text(key) or default
        if modes[key] not in allowed:
            problems.add(
                doc.file,
                doc.at(*at, key),
                f"{key} {q(modes[key])}: expected one of {', '.join(allowed)}",
            )
    access, binding = modes["access"], modes["binding"]
    static = text("static_resource")
    _check_static(
        doc,
        at,
        label,
        binding=binding,
        present="static_resource" in raw,
        static=static,
        problems=problems,
    )
    required = raw.get("required", True)
    if not isinstance(required, bool):
        _type_error(doc, (*at, "required"), f"true or false, found {q(required)}", problems)
    description = text("description")
    if description and len(description) > 1024:
        _type_error(doc, (*at, "description"), "at most 1024 characters", problems)
    if len(problems) != before:
        return None
    slot: dict[str, Any] = {
        "name": name,
        "resourceType": rtype,
        "access": access,
        "binding": binding,
    }
    if static is not None:
        slot["staticResource"] = static
    if required is False:
        slot["required"] = False
    if description:
        slot["description"] = description
    return slot


def _check_names(
    doc: Located, at: tuple[str | int, ...], name: str | None, rtype: str | None, problems: Problems
) -> None:
    if name is not None and not is_identifier(name):
        problems.add(
            doc.file,
            doc.at(*at, "name"),
            f"slot name {q(name)} is not valid: expected {IDENTIFIER_RULE}",
        )
    if rtype is not None and not is_dns_label(rtype):
        problems.add(
            doc.file,
            doc.at(*at, "resource_type"),
            f"resource_type {q(rtype)}: expected {TYPE_RULE}",
        )


def _check_static(
    doc: Located,
    at: tuple[str | int, ...],
    label: str,
    *,
    binding: str,
    present: bool,
    static: str | None,
    problems: Problems,
) -> None:
    """``static_resource`` is given exactly for static slots, as NAME or NAMESPACE/NAME."""
    if binding == "static" and not present:
        problems.add(
            doc.file,
            doc.at(*at),
            f"{label} has binding static but no static_resource: expected "
            '"static_resource: NAME" (or NAMESPACE/NAME) of a registered Resource',
        )
    if present and binding != "static":
        problems.add(
            doc.file,
            doc.key_at(*at, "static_resource"),
            f"{label} has a static_resource but binding {binding}: expected static_resource "
            "only with binding: static",
        )
    if static is not None:
        namespace, _, target = static.rpartition("/")
        if ("/" in static and not is_dns_label(namespace)) or not is_subdomain(target):
            problems.add(
                doc.file,
                doc.at(*at, "static_resource"),
                f"static_resource {q(static)}: expected NAME or NAMESPACE/NAME of a Resource "
                f"(NAME {SUBDOMAIN_RULE})",
            )


def _slots(doc: Located, problems: Problems) -> list[dict[str, Any]]:
    raw_slots = doc.data.get("resource_slots", [])
    slots: list[dict[str, Any]] = []
    if not isinstance(raw_slots, list):
        _type_error(doc, ("resource_slots",), "a list of resource slots", problems)
        return slots
    if len(raw_slots) > MAX_SLOTS:
        problems.add(
            doc.file,
            doc.at("resource_slots"),
            f"resource_slots has {len(raw_slots)} slots: expected at most {MAX_SLOTS}",
        )
    seen: dict[str, Pos] = {}
    for i, raw in enumerate(raw_slots):
        slot = _slot(doc, i, raw, problems)
        if slot is None:
            continue
        if slot["name"] in seen:
            problems.add(
                doc.file,
                doc.at("resource_slots", i, "name"),
                f"slot {q(slot['name'])} is declared twice (the first is at "
                f"{seen[slot['name']]}): expected unique slot names",
            )
            continue
        seen[slot["name"]] = doc.at("resource_slots", i, "name")
        slots.append(slot)
    return slots


def _tool(doc: Located, default_name: str | None, problems: Problems) -> dict[str, Any] | None:
    data = doc.data
    if not isinstance(data, dict):
        _type_error(doc, (), "a tool definition (a mapping with resource_slots)", problems)
        return None
    before = len(problems)
    _unknown_keys(doc, (), data, TOOL_KEYS, problems)
    name = data.get("name", default_name)
    if name is None:
        problems.add(
            doc.file,
            doc.origin,
            'this tool has no name: expected "name: ..." (only a file with one tool may omit it)',
        )
    elif not isinstance(name, str) or not is_subdomain(name):
        problems.add(
            doc.file,
            doc.at("name") if "name" in data else doc.origin,
            f"tool name {q(name)} is not a valid Kubernetes object name: expected {SUBDOMAIN_RULE}",
        )
    description = data.get("description", "")
    if not isinstance(description, str):
        _type_error(doc, ("description",), "a string", problems)
    elif len(description) > 4096:
        _type_error(doc, ("description",), "at most 4096 characters", problems)
    slots = _slots(doc, problems)
    if len(problems) != before:
        return None
    spec: dict[str, Any] = {}
    if description:
        spec["description"] = description
    spec["resourceSlots"] = slots
    checked = Located({"spec": spec}, doc.file, doc.origin)
    if validate_model(ToolSpec, checked, ("spec",), problems) is None:
        return None
    return {"apiVersion": API_VERSION, "kind": TOOL_KIND, "metadata": {"name": name}, "spec": spec}


def import_tools(sources: Iterable[Source]) -> list[dict[str, Any]]:
    """Tool manifests for every tool definition in the sources, in order."""
    problems = Problems()
    tools: list[dict[str, Any]] = []
    first: dict[str, tuple[str, Pos]] = {}
    for file, text in sources:
        try:
            docs = load(text, file)
        except AuthoringError as exc:
            problems.extend(exc.diagnostics)
            continue
        stem = PurePath(file).stem if len(docs) == 1 and file != "<stdin>" else None
        for doc in docs:
            tool = _tool(doc, stem, problems)
            if tool is None:
                continue
            name = tool["metadata"]["name"]
            where = (
                doc.at("name") if isinstance(doc.data, dict) and "name" in doc.data else doc.origin
            )
            if name in first:
                ffile, fpos = first[name]
                problems.add(
                    file, where, f'tool "{name}" is defined twice (the first is at {ffile}:{fpos})'
                )
                continue
            first[name] = (file, where)
            tools.append(tool)
    problems.raise_if_any()
    return tools
