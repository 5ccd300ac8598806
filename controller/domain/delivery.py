"""The bindings document delivered to an agent's session (a JSON file in a ConfigMap).

The document holds only what the session needs to work: the resolved direct bindings and tool
slots. It carries no timestamps or generations, so its bytes change exactly when the delivered
bindings change, and an unchanged pass writes nothing.
"""

from __future__ import annotations

import json
from typing import Any

from controller.domain.models import API_VERSION, WORK_ROLE, AgentObject
from controller.domain.results import AgentResolution, BindingState, BoundResource
from controller.domain.work import Hold

BINDINGS_FILE = "bindings.json"


def _resource(resource: BoundResource | None) -> dict[str, Any] | None:
    return (
        resource.model_dump(mode="json", by_alias=True, exclude_defaults=True) if resource else None
    )


def bindings_document(
    agent: AgentObject,
    resolution: AgentResolution,
    *,
    deliver_work: bool,
    fence: Hold | None = None,
) -> dict[str, Any]:
    """The document for ``agent``.

    The ``work`` binding appears only while the agent holds its URI: ``deliver_work`` says whether
    it does. It carries the hold's identity (``fence``: the Lease's uid and resourceVersion) as a
    fencing token, so a tool that can check it refuses a holder whose hold has gone.
    Exclusivity is about the work role: a URI the agent also binds under another role (a reviewer
    reading the issue) stays delivered there, and in the slots filled from it.
    """
    work = next((d for d in resolution.direct if d.name == WORK_ROLE), None)
    hidden = work.uri if work is not None and not deliver_work else None
    carried = hidden is not None and any(
        d.name != WORK_ROLE and d.uri == hidden and d.state is BindingState.BOUND
        for d in resolution.direct
    )
    resources = [
        {
            "name": d.name,
            "tag": d.tag,
            "uri": d.uri,
            "state": d.state.value,
            **({"resource": _resource(d.resource)} if d.resource else {}),
            **(
                {"hold": {"uid": fence.uid, "resourceVersion": fence.resource_version}}
                if fence is not None and d.name == WORK_ROLE
                else {}
            ),
        }
        for d in resolution.direct
        if hidden is None or d.name != WORK_ROLE
    ]
    tools: dict[str, list[dict[str, Any]]] = {}
    for s in resolution.slots:
        slot: dict[str, Any] = {
            "name": s.slot,
            "mode": s.mode.value,
            "access": s.access.value,
            "resourceType": s.resource_type,
            "state": s.state.value,
        }
        if s.resource is not None and (s.resource.uri != hidden or carried):
            slot["resource"] = _resource(s.resource)
        tools.setdefault(s.tool, []).append(slot)
    return {
        "apiVersion": API_VERSION,
        "kind": "Bindings",
        "agent": {"namespace": agent.meta.namespace, "name": agent.meta.name},
        "resources": resources,
        "tools": [{"name": name, "slots": slots} for name, slots in tools.items()],
    }


def render(document: dict[str, Any]) -> str:
    """Canonical JSON bytes for the document (stable across passes and processes)."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def delivered_work_uris(rendered: str) -> set[str]:
    """The ``work`` URIs a delivered document contains (tolerates documents edited by hand)."""
    try:
        doc = json.loads(rendered)
    except ValueError:
        return set()
    if not isinstance(doc, dict):
        return set()
    return {
        r["uri"]
        for r in doc.get("resources") or []
        if isinstance(r, dict) and r.get("name") == WORK_ROLE and isinstance(r.get("uri"), str)
    }


def without_work(rendered: str) -> str:
    """A delivered document with its ``work`` URI withdrawn under every role and slot."""
    uris = delivered_work_uris(rendered)
    if not uris:
        return rendered
    doc = json.loads(rendered)

    def mentions(entry: dict[str, Any]) -> bool:
        return entry.get("uri") in uris or (entry.get("resource") or {}).get("uri") in uris

    doc["resources"] = [r for r in doc["resources"] if not mentions(r)]
    for tool in doc.get("tools") or []:
        for slot in tool.get("slots") or []:
            if (slot.get("resource") or {}).get("uri") in uris:
                del slot["resource"]
    return render(doc)
