"""``bindery why KIND/NAME`` for what agents depend on (a Resource, Tool, ResourceType or
ResourceGrant): its rollout, read from its status, and the dependents that lag, with why."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from controller.cli.exits import Exit
from controller.cli.why_text import columns, to_json
from controller.domain import rollout
from controller.domain.refs import Kind
from controller.k8s.api import ENDPOINTS, ApiError, KubeApi

KINDS: dict[str, Kind] = {
    **dict.fromkeys(("resource", "resources", "res"), Kind.RESOURCE),
    **dict.fromkeys(("tool", "tools"), Kind.TOOL),
    **dict.fromkeys(("resourcetype", "resourcetypes", "type", "types"), Kind.TYPE),
    **dict.fromkeys(("resourcegrant", "resourcegrants", "grant", "grants"), Kind.GRANT),
}
"""The ``KIND`` of ``KIND/NAME``, as kubectl spells it (singular, plural, short)."""


def target(given: str) -> tuple[Kind, str] | None:
    """``KIND/NAME`` of a kind agents depend on as its kind and name; None for a bare agent name.
    ValueError for a kind that is not one of them."""
    prefix, slash, name = given.partition("/")
    if not slash:
        return None
    kind = KINDS.get(prefix.lower().split(".", 1)[0])
    if kind is None or not name:
        raise ValueError(
            f"{given!r}: KIND/NAME takes one of resource, tool, resourcetype, resourcegrant "
            "(for an agent, give its name alone)"
        )
    return kind, name


def render_text(doc: dict[str, Any]) -> str:
    lines = [f"{doc['kind']} {doc['name']} (generation {doc['generation']}): {doc['verdict']}"]
    block = doc.get("rollout")
    if block:
        lines.append(
            f"  delivered {doc['delivered']}: {block['applied']} applied, {block['pending']} "
            f"pending, {block['refused']} refused, {block['suspended']} suspended "
            f"(of {block['dependents']} dependent agent(s) at generation {block['generation']})"
        )
    cond = doc.get("condition")
    if cond:
        lines.append(f"  Delivered={cond['status']} ({cond.get('reason', '')})")
    laggards = (block or {}).get("laggards") or []
    if laggards:
        lines.append("Laggards:")
        rows = [[lag["agent"], lag["state"], lag.get("message", "")] for lag in laggards]
        lines += columns(rows, indent="  ")
    if doc.get("unlisted"):
        lines.append(
            f"  ... and {doc['unlisted']} more: 'bindery why AGENT' or each agent's "
            "status.delivery says where it stands"
        )
    return "\n".join(lines) + "\n"


def run(api: Any, kind: Kind, namespace: str, name: str, output: str) -> int:
    """Print the object's rollout; the exit code."""

    async def main() -> dict[str, Any] | None:
        kube = KubeApi(api, connections=2)
        try:
            return await kube.get(ENDPOINTS[kind], namespace if kind.namespaced else "", name)
        finally:
            await kube.close()

    try:
        body = asyncio.run(main())
    except ApiError as exc:
        print(f"error: reading {kind.kind_name} {name} failed: {exc}", file=sys.stderr)
        return Exit.FAILURE
    key = f"{namespace}/{name}" if kind.namespaced else name
    if body is None:
        where = f" -n {namespace}" if kind.namespaced else ""
        print(
            f"error: {kind.kind_name} {key} not found; list them with "
            f"'kubectl get {kind.plural}.bindery.dev{where}'",
            file=sys.stderr,
        )
        return Exit.FAILURE
    doc = rollout.explain(kind, key, body)
    sys.stdout.write(to_json(doc) if output == "json" else render_text(doc))
    return 0
