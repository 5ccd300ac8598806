"""The Events an object's status transition posts: a drift from spec.runtime, a launch, work
acquired, and each change of what its Ready condition says, but for a session taking in a new
document (see :func:`routine`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.domain.launch import LaunchAction
from controller.domain.status.agent import DELIVERY_PENDING, RELEASING_STATE
from controller.domain.status.conditions import is_ready, is_stalled, ready_condition, ready_message
from controller.domain.work import WorkState


@dataclass(frozen=True)
class Note:
    """One Event to post about an object."""

    reason: str
    message: str
    warning: bool = False


def _news(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the Ready condition says something new: another status or reason, or, while not
    Ready, another message (``kubectl describe`` then shows why it is not Ready *now*)."""
    before, after = ready_condition(old), ready_condition(new)
    if (before.get("status"), before.get("reason")) != (after.get("status"), after.get("reason")):
        return True
    return after.get("status") != "True" and before.get("message") != after.get("message")


def routine(st: dict[str, Any]) -> bool:
    """Whether the agent is not Ready only because its session has yet to apply a new document
    (and no work hold waits for it: a handoff is news). That is what every binding change brings
    to every agent it reaches, for a second or so: status says it, and the object the change was
    made to counts the rollout; an Event per agent, twice per change, would be a fleet's worth of
    Events (and API writes) for one edit."""
    ready = ready_condition(st)
    return (
        ready.get("status") == "False"
        and ready.get("reason") == DELIVERY_PENDING
        and st.get("state") != RELEASING_STATE
    )


def _relaunch_required(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c.get("type") == "RelaunchRequired"), {})


def _new_drift(old: dict[str, Any], new: dict[str, Any]) -> Note | None:
    """The RelaunchRequired Event, once per drift: when the session's trajectory starts to differ
    from spec.runtime, or spec.runtime changes again while it differs (not on every pass, nor
    after a restart that finds the same drift). Normal: the session runs on as launched, and
    nothing fails until the relaunch is asked for."""
    if not new.get("drift"):
        return None
    # Read from the condition, which statuses written before the drift field carry too.
    drifted = _relaunch_required(old).get("status") == "True"
    if drifted and old.get("desiredTrajectoryHash") == new.get("desiredTrajectoryHash"):
        return None
    return Note("RelaunchRequired", str(_relaunch_required(new).get("message", "")))


def agent_events(
    old: dict[str, Any], new: dict[str, Any], launched: LaunchAction | None
) -> list[Note]:
    """The Events an agent's status transition from ``old`` to ``new`` posts: a new drift from
    spec.runtime, a launch, and every change of what its Ready condition says (none for a first
    pass that is simply Ready)."""
    notes: list[Note] = []
    if (drifted := _new_drift(old, new)) is not None:
        notes.append(drifted)
    if launched is not None:
        notes.append(
            Note(
                "Launched" if launched is LaunchAction.LAUNCH else "Relaunched",
                f"session launched at generation {new.get('desiredLaunchGeneration')}"
                f" with trajectory {str(new.get('desiredTrajectoryHash'))[:19]}",
            )
        )
    before, after = ready_condition(old), ready_condition(new)
    working = new.get("state") == WorkState.WORKING.value
    if working and old.get("state") != WorkState.WORKING.value:
        uri = (new.get("work") or {}).get("uri", "")
        return [*notes, Note("AcquiredWork", f"holds work URI {uri!r}")]
    if not _news(old, new) or (not before and is_ready(new)):
        return notes
    if routine(new) or (routine(old) and is_ready(new)):
        return notes
    if is_ready(new):
        notes.append(Note(str(after.get("reason", "")), ready_message(new)))
        return notes
    notes.append(Note(str(after.get("reason", "")), ready_message(new), warning=is_stalled(new)))
    return notes


def tool_events(old: dict[str, Any], new: dict[str, Any]) -> list[Note]:
    """The Events a Tool's status transition posts: each new reason it is not Ready for."""
    if is_ready(new) or not _news(old, new):
        return []
    reason = str(ready_condition(new).get("reason", ""))
    return [Note(reason, ready_message(new), warning=is_stalled(new))]
