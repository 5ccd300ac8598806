"""The session's workspace claim: what to change on it, and what its status says.

The claim outlives the session pod, so it is created once and then only adjusted: its owner
follows the reclaim policy, its size only grows (and only where its class allows expansion), and
its class is never changed (a claim's class is immutable). Everything it cannot apply is
reported, never forced.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.domain import rules
from controller.domain.models import Workspace

RETAINED = "reclaimPolicy Retain: the claim has no owner and is left when the agent is deleted"


class SizeChange(StrEnum):
    SAME = "Same"
    GROW = "Grow"
    SHRINK = "Shrink"


def requested(claim: dict[str, Any]) -> str:
    """The storage the claim requests now (as written on it)."""
    spec = claim.get("spec") or {}
    return str(((spec.get("resources") or {}).get("requests") or {}).get("storage", ""))


def size_change(claim: dict[str, Any], workspace: Workspace) -> SizeChange:
    """How the desired size compares with what the claim requests."""
    have = rules.quantity_value(requested(claim))
    want = rules.quantity_value(workspace.size)
    if have is None or want is None or want == have:
        return SizeChange.SAME
    return SizeChange.GROW if want > have else SizeChange.SHRINK


def resize_patch(workspace: Workspace) -> dict[str, Any]:
    """The merge patch that asks for the desired size."""
    return {"spec": {"resources": {"requests": {"storage": workspace.size}}}}


def unchangeable(claim: dict[str, Any], workspace: Workspace, change: SizeChange) -> str:
    """What of ``workspace`` cannot be applied to ``claim`` without an expansion ("" if all)."""
    notes = []
    name = (claim.get("metadata") or {}).get("name", "")
    have = str((claim.get("spec") or {}).get("storageClassName") or "")
    if workspace.storage_class_name and workspace.storage_class_name != have:
        notes.append(
            f"claim {name} has storage class {have or '(none)'}, not "
            f"{workspace.storage_class_name}: a claim's class cannot change; delete the claim "
            "(its data goes with it) to have it made anew"
        )
    if change is SizeChange.SHRINK:
        notes.append(
            f"claim {name} requests {requested(claim)}; a claim never shrinks, so size "
            f"{workspace.size} is not applied"
        )
    return "; ".join(notes)


def not_expandable(claim: dict[str, Any], workspace: Workspace, storage_class: str) -> str:
    name = (claim.get("metadata") or {}).get("name", "")
    return (
        f"claim {name} requests {requested(claim)}; growing it to {workspace.size} needs a "
        f"storage class that allows volume expansion, and {storage_class or '(none)'} does not"
    )


@dataclass(frozen=True)
class WorkspaceView:
    """The workspace claim as status reports it."""

    claim: dict[str, Any]
    workspace: Workspace
    message: str = ""

    def as_status(self) -> dict[str, Any]:
        md = self.claim.get("metadata") or {}
        st = self.claim.get("status") or {}
        out: dict[str, Any] = {
            "claimName": md.get("name", ""),
            "phase": st.get("phase") or "Pending",
            "reclaimPolicy": self.workspace.reclaim_policy,
        }
        if capacity := (st.get("capacity") or {}).get("storage"):
            out["capacity"] = str(capacity)
        notes = [self.message] if self.message else []
        if self.workspace.reclaim_policy == "Retain":
            notes.append(RETAINED)
        if notes:
            out["message"] = "; ".join(notes)
        return out
