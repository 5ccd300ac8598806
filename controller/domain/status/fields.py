"""The values and shapes every kind's status shares: the Error state, a bound resource, a
reference to another object."""

from __future__ import annotations

from typing import Any

from controller.domain.results import BoundResource

ERROR_STATE = "Error"
"""The ``state`` of an agent whose bindings (or whose spec, or whose last pass) are in error that
a person must fix (kstatus Failed: Stalled=True)."""
PENDING_STATE = "Pending"
"""The ``state`` of an agent that waits for an object the next apply can bring: a missing Tool,
Resource or ResourceType, or a ResourceGrant (kstatus InProgress: Reconciling=True)."""


def resource_field(resource: BoundResource) -> dict[str, Any]:
    """A bound resource as a status shows it (its attributes are left to the bindings document)."""
    return resource.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude={"attributes"}
    )


def ref_field(key: str) -> dict[str, str]:
    """``namespace/name`` as a status's object reference."""
    namespace, _, name = key.rpartition("/")
    return {"namespace": namespace, "name": name}
