"""The values and shapes every kind's status shares: the Error state, a bound resource, a
reference to another object."""

from __future__ import annotations

from typing import Any

from controller.domain.results import BoundResource, Candidate

ERROR_STATE = "Error"
"""The ``state`` of an agent whose bindings (or whose spec, or whose last pass) are in error that
a person must fix (kstatus Failed: Stalled=True)."""
PENDING_STATE = "Pending"
"""The ``state`` of an agent that waits for an object the next apply can bring: a missing Tool,
Resource or ResourceType, or a ResourceGrant (kstatus InProgress: Reconciling=True)."""


def resource_field(resource: BoundResource) -> dict[str, Any]:
    """A bound resource as a status shows it (its attributes are left to the bindings document):
    :meth:`BoundResource.fields`."""
    return resource.fields()


def candidate_field(candidate: Candidate) -> dict[str, Any]:
    """A slot's candidate as a status lists it: its ``model_dump(mode="json", by_alias=True,
    exclude_defaults=True)``, built directly (see :func:`resource_field`)."""
    out: dict[str, Any] = {"uri": candidate.uri, "type": candidate.type}
    if candidate.alias:
        out["alias"] = candidate.alias
    out["reason"] = candidate.reason
    return out


def ref_field(key: str) -> dict[str, str]:
    """``namespace/name`` as a status's object reference."""
    namespace, _, name = key.rpartition("/")
    return {"namespace": namespace, "name": name}
