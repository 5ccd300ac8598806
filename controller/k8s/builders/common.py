"""What every builder shares: Bindery's labels and the owner reference to the agent, the checks
that tell whether an object is the agent's own or one to adopt, and stable JSON for golden
files."""

from __future__ import annotations

import json
from typing import Any

from controller.domain.models import API_VERSION, AgentObject
from controller.domain.session_pods import (
    AGENT_LABEL,
    AGENT_UID_LABEL,
    COMPONENT_LABEL,
    MANAGED_BY,
    MANAGER,
)

__all__ = [
    "AGENT_LABEL",
    "AGENT_UID_LABEL",
    "COMPONENT_LABEL",
    "MANAGED_BY",
    "MANAGER",
    "adoptable",
    "adoption",
    "agent_labels",
    "canonical",
    "owned_by",
    "owner_of",
    "owner_reference",
]


def owner_reference(agent: AgentObject) -> dict[str, Any]:
    """Owner reference to the agent, so deleting it garbage-collects what it owns."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentSpec",
        "name": agent.meta.name,
        "uid": agent.meta.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def agent_labels(agent: AgentObject, component: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, AGENT_LABEL: agent.meta.name, COMPONENT_LABEL: component}


def owner_of(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """(kind, name, uid) of the object's controlling owner, if it has one."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", ""))
    return None


def owned_by(body: dict[str, Any], agent: AgentObject) -> bool:
    """Whether ``body`` is Bindery's object for ``agent`` (its label and controlling owner)."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGER and owner_of(body) == (
        "AgentSpec",
        agent.meta.name,
        agent.meta.uid,
    )


def adoptable(body: dict[str, Any], agent: AgentObject) -> bool:
    """Bindery's for ``agent`` but not (only) as :func:`owned_by` says, so Bindery adopts it:

    - its controlling owner is ``agent`` itself (by uid) though Bindery's labels are missing
      (edited away): the agent's own object, labelled again;
    - left by an earlier AgentSpec of ``agent``'s name: Bindery's label for an agent of this
      name, and no controlling owner (deleted with ``propagationPolicy: Orphan``) or an
      AgentSpec of this name with another uid, which is gone (names are unique, and ``agent``
      exists), whose objects the garbage collector has not removed yet. Like the ReplicaSet
      controller with orphaned pods, Bindery adopts it.
    """
    labels = (body.get("metadata") or {}).get("labels") or {}
    owner = owner_of(body)
    if owner is not None and owner[0] == "AgentSpec" and owner[2] == agent.meta.uid:
        return bool(agent.meta.uid) and owner[1] == agent.meta.name
    return (
        labels.get(MANAGED_BY) == MANAGER
        and labels.get(AGENT_LABEL) == agent.meta.name
        and (owner is None or owner[:2] == ("AgentSpec", agent.meta.name))
    )


def adoption(body: dict[str, Any], agent: AgentObject) -> dict[str, Any]:
    """The merge patch that makes ``agent`` the controlling owner (in place of a gone one) and
    puts Bindery's labels for it back."""
    refs = [
        r
        for r in (body.get("metadata") or {}).get("ownerReferences") or []
        if not r.get("controller")
    ]
    return {
        "metadata": {
            "labels": {MANAGED_BY: MANAGER, AGENT_LABEL: agent.meta.name},
            "ownerReferences": [*refs, owner_reference(agent)],
        }
    }


def canonical(manifest: dict[str, Any]) -> str:
    """Stable JSON for golden files."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"
