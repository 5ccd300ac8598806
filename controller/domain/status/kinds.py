"""The status of a Tool, a ResourceType, a Resource and a ResourceGrant, and of an object whose spec
the models reject."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.domain.models import ToolSpec
from controller.domain.results import ErrorCause, ToolValidation, TypeClosure
from controller.domain.rollout import DELIVERED, ROLLOUT_PENDING, Rollout
from controller.domain.status.conditions import (
    MISSING_DEPENDENCY,
    condition,
    health_conditions,
    merge_conditions,
)
from controller.domain.status.fields import ERROR_STATE, ref_field, resource_field
from controller.domain.work import Hold


def tool_status(
    *,
    generation: int,
    tool: ToolSpec,
    validation: ToolValidation,
    old: dict[str, Any],
    now: str,
    rollout: Rollout | None = None,
) -> dict[str, Any]:
    errors = validation.errors
    declared = {slot.name: slot.static_resource or "" for slot in tool.resource_slots}
    static = [
        {
            "name": s.slot,
            "resourceType": s.resource_type,
            "staticResource": declared.get(s.slot, ""),
            "state": s.state.value,
            **({"resource": resource_field(s.resource)} if s.resource else {}),
            **({"message": s.message} if s.message else {}),
        }
        for s in validation.static_slots
    ]
    conflicts = validation.conflicts
    if conflicts:
        ready = condition("Ready", False, "InvalidStaticSlot", "; ".join(errors), generation)
    elif errors:
        ready = condition("Ready", False, MISSING_DEPENDENCY, "; ".join(errors), generation)
    else:
        message = (
            f"the resourceType of each of its {len(tool.resource_slots)} slot(s) is registered; "
            f"{len(static)} static slot(s) valid"
        )
        ready = condition("Ready", True, "Valid", message, generation)
    conditions = health_conditions(ready, progressing=True, stalled=bool(conflicts))
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "slotCount": len(tool.resource_slots),
        "staticSlotsValid": validation.static_valid,
        "staticSlots": static,
    }
    return _with_rollout(status, conditions, rollout, old, now)


def resource_type_status(
    *,
    generation: int,
    closure: TypeClosure,
    old: dict[str, Any],
    now: str,
    rollout: Rollout | None = None,
) -> dict[str, Any]:
    if closure.cycle:
        ready = condition(
            "Ready",
            False,
            "ParentCycle",
            "parentTypes form a cycle: "
            + " -> ".join(closure.cycle)
            + "; remove one of these parentTypes entries",
            generation,
        )
    elif closure.unknown_parents:
        ready = condition(
            "Ready",
            False,
            "UnknownParentType",
            "parentTypes names unregistered ResourceType(s): "
            + ", ".join(closure.unknown_parents)
            + "; create them or fix spec.parentTypes",
            generation,
        )
    else:
        ready = condition(
            "Ready", True, "Valid", f"{len(closure.ancestors)} ancestor type(s)", generation
        )
    # A cycle needs a person to edit parentTypes; an unknown parent is created by a later apply.
    conditions = health_conditions(ready, progressing=True, stalled=bool(closure.cycle))
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "ancestors": list(closure.ancestors),
    }
    if closure.cycle:
        status["cycle"] = list(closure.cycle)
    if closure.unknown_parents:
        status["unknownParents"] = list(closure.unknown_parents)
    return _with_rollout(status, conditions, rollout, old, now)


def resource_status(
    *,
    generation: int,
    errors: Sequence[str],
    holder: Hold | None,
    old: dict[str, Any],
    now: str,
    rollout: Rollout | None = None,
) -> dict[str, Any]:
    """A Resource's status. ``errors`` that are :class:`~controller.domain.results.Problem` say
    what clears them; any other string counts as one a person must fix."""
    conflicts = [e for e in errors if getattr(e, "cause", None) is not ErrorCause.MISSING]
    if conflicts:
        ready = condition("Ready", False, "InvalidResource", "; ".join(errors), generation)
    elif errors:
        ready = condition("Ready", False, MISSING_DEPENDENCY, "; ".join(errors), generation)
    else:
        ready = condition(
            "Ready", True, "Valid", "the resource matches its type's contract", generation
        )
    conditions = health_conditions(ready, progressing=True, stalled=bool(conflicts))
    status: dict[str, Any] = {"observedGeneration": generation, "valid": not errors}
    if holder is not None:
        status["holder"] = {**ref_field(holder.holder), "uid": holder.holder_uid}
    return _with_rollout(status, conditions, rollout, old, now)


def grant_status(
    *,
    generation: int,
    uses: Sequence[str],
    old: dict[str, Any],
    now: str,
    rollout: Rollout | None = None,
) -> dict[str, Any]:
    """A ResourceGrant's status: Ready once the controller has taken this generation into
    account (a grant cannot be wrong by itself; what it admits shows on the referrers)."""
    ready = condition("Ready", True, "Observed", f"in effect for {', '.join(uses)}", generation)
    status: dict[str, Any] = {"observedGeneration": generation}
    return _with_rollout(status, health_conditions(ready), rollout, old, now)


def _with_rollout(
    status: dict[str, Any],
    conditions: list[dict[str, Any]],
    rollout: Rollout | None,
    old: dict[str, Any],
    now: str,
) -> dict[str, Any]:
    """``status`` with its conditions, and the rollout's fields and ``Delivered`` condition when
    the rollout is known. A pending rollout keeps ``Reconciling`` True (unless the object is
    Stalled on its own): progress, never a failure."""
    if rollout is not None:
        ok, reason, message = rollout.condition_parts()
        generation = int(conditions[0]["observedGeneration"])
        stalled = any(c["type"] == "Stalled" and c["status"] == "True" for c in conditions)
        reconciling = any(c["type"] == "Reconciling" and c["status"] == "True" for c in conditions)
        if rollout.pending and not stalled and not reconciling:
            pending = condition("Reconciling", True, ROLLOUT_PENDING, message, generation)
            conditions = [pending if c["type"] == "Reconciling" else c for c in conditions]
        conditions = [*conditions, condition(DELIVERED, ok, reason, message, generation)]
        status["rollout"] = rollout.as_status()
        status["delivered"] = rollout.delivered
    status["conditions"] = merge_conditions(old.get("conditions"), conditions, now)
    return status


def invalid_status(
    generation: int, error: str, old: dict[str, Any], now: str, *, state: bool = False
) -> dict[str, Any]:
    """The status of an object whose spec the models reject: not Ready, Stalled on the spec."""
    conditions = health_conditions(
        condition("Ready", False, "InvalidSpec", error, generation), stalled=True
    )
    new: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
    if state:
        new["state"] = ERROR_STATE
    return new
