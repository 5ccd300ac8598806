"""Status documents for the four kinds, rebuilt from the observed world on every pass.

Status is never accumulated: each pass computes it whole from the resolution, the observed holds
and the observed session workload. The only thing carried over is a condition's
``lastTransitionTime`` while its status stays the same, so an unchanged world yields a
byte-identical status and the reconciler writes nothing.

Every kind carries the three conditions kstatus reads (``Ready``, ``Reconciling``, ``Stalled``),
built by :func:`health_conditions` from one of three outcomes (the table in docs/design.md,
"Status semantics"):

- healthy: Ready=True;
- waiting for something the next apply brings without a change to this object (a missing Tool,
  Resource or ResourceType, a work hold another agent holds): Ready=False and Reconciling=True
  with the same reason, so kstatus says InProgress and Flux keeps waiting;
- needing a person to change this object or another's content (a type incompatibility, an
  ambiguity, a parentTypes cycle, an invalid spec): Ready=False and Stalled=True, so kstatus says
  Failed at once.

Reconciling and Stalled are never both True: kstatus reads whichever comes first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from controller.domain.acknowledgement import Confirmation, DeliveryView
from controller.domain.launch import LaunchAction, LaunchNotice, LaunchPlan
from controller.domain.models import ToolSpec
from controller.domain.results import (
    AgentResolution,
    BindingState,
    BoundResource,
    ErrorCause,
    ToolValidation,
    TypeClosure,
)
from controller.domain.session_health import SessionHealth
from controller.domain.work import Hold, WorkPlan, WorkState

ERROR_STATE = "Error"

MISSING_DEPENDENCY = "MissingDependency"
"""The Ready (and Reconciling) reason of an object that waits for another one to be created."""


RELEASING_STATE = "Releasing"
"""An agent whose withdrawn work hold waits for its session to let go of the URI."""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro_rfc3339() -> str:
    """Now in microseconds (the API's MicroTime form), for times a duration is counted from:
    a whole-second stamp would shorten a grace by up to a second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


MAX_MESSAGE = 8192
"""Condition messages are cut here (the API allows 32768): a status must stay writable."""


def _clip(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    cut = message[: MAX_MESSAGE - 40]
    return f"{cut}... ({len(message) - len(cut)} more characters)"


def condition(
    type_: str, status: bool, reason: str, message: str, generation: int
) -> dict[str, Any]:
    message = _clip(message)
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


RECONCILED = "Reconciled"
"""The reason of a Reconciling or Stalled condition that is False."""


def health_conditions(
    ready: dict[str, Any], *, progressing: bool = False, stalled: bool = False
) -> list[dict[str, Any]]:
    """``ready`` followed by the Reconciling and Stalled conditions that go with it.

    A Ready=False condition is either ``progressing`` (Reconciling=True: the next apply can clear
    it) or ``stalled`` (Stalled=True: a person must act), and the True one repeats Ready's reason
    and message, which is what kstatus, Flux and Argo CD show. Stalled wins if both are asked.
    """
    generation = int(ready["observedGeneration"])
    stalled = stalled and ready["status"] == "False"
    progressing = progressing and ready["status"] == "False" and not stalled
    reason, message = ready["reason"], ready["message"]
    return [
        ready,
        condition(
            "Reconciling",
            progressing,
            reason if progressing else RECONCILED,
            message if progressing else "",
            generation,
        ),
        condition(
            "Stalled",
            stalled,
            reason if stalled else RECONCILED,
            message if stalled else "",
            generation,
        ),
    ]


def merge_conditions(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """Stamp ``lastTransitionTime``: kept from ``old`` while a condition's status is unchanged."""
    previous = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        before = previous.get(cond["type"])
        same = before is not None and before.get("status") == cond["status"]
        stamp = before.get("lastTransitionTime", now) if same and before else now
        out.append({**cond, "lastTransitionTime": stamp})
    return out


def _resource(resource: BoundResource) -> dict[str, Any]:
    return resource.model_dump(
        mode="json", by_alias=True, exclude_defaults=True, exclude={"attributes"}
    )


def _ref(key: str) -> dict[str, str]:
    namespace, _, name = key.rpartition("/")
    return {"namespace": namespace, "name": name}


MAX_CANDIDATES = 20
"""Candidates listed per slot in status; the rest are counted (a status must stay writable
however many Resources an agent selects)."""


def binding_rows(resolution: AgentResolution) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for d in resolution.direct:
        row: dict[str, Any] = {
            "name": d.name,
            "tag": d.tag,
            "uri": d.uri,
            "mode": "direct",
            "state": d.state.value,
        }
        if d.resource is not None:
            row["resource"] = _resource(d.resource)
        if d.message:
            row["message"] = d.message
        rows.append(row)
    for s in resolution.slots:
        row = {
            "name": f"{s.tool}.{s.slot}",
            "tool": s.tool,
            "slot": s.slot,
            "mode": s.mode.value,
            "access": s.access.value,
            "resourceType": s.resource_type,
            "required": s.required,
            "state": s.state.value,
        }
        if s.resource is not None:
            row["resource"] = _resource(s.resource)
        if s.message:
            row["message"] = s.message
        if s.candidates:
            row["candidates"] = [
                c.model_dump(mode="json", by_alias=True, exclude_defaults=True)
                for c in s.candidates[:MAX_CANDIDATES]
            ]
            if len(s.candidates) > MAX_CANDIDATES:
                row["candidatesOmitted"] = len(s.candidates) - MAX_CANDIDATES
        rows.append(row)
    return rows


def binding_counts(resolution: AgentResolution) -> dict[str, int]:
    """How many of an agent's bindings (direct and slots) are in each state."""
    counts: dict[str, int] = {}
    for state in [d.state for d in resolution.direct] + [s.state for s in resolution.slots]:
        counts[state.value] = counts.get(state.value, 0) + 1
    return counts


@dataclass(frozen=True)
class SessionView:
    """What the reconciler observed about the agent's session workload after this pass."""

    plan: LaunchPlan
    observed_generation: int | None
    """The launch generation the running session pod was started with (None: none runs)."""
    launched_hash: str | None
    last_launch_time: str
    health: SessionHealth | None = None
    """The session pod's health; None when it was not observed (the session counts as running)."""

    @property
    def running(self) -> bool:
        return self.health is None or self.health.running


def agent_status(
    *,
    generation: int,
    resolution: AgentResolution,
    work: WorkPlan,
    waiting_since: str,
    config_map: str,
    session: SessionView | None,
    old: dict[str, Any],
    now: str,
    delivery: DeliveryView | None = None,
) -> dict[str, Any]:
    """The whole ``status`` of an AgentSpec for this pass."""
    errors = resolution.errors
    ready, stalled = _agent_ready(
        generation,
        resolution,
        work,
        config_map=config_map,
        session=session,
        old=old,
        delivery=delivery,
    )
    conditions = health_conditions(ready, progressing=True, stalled=stalled)
    state = ERROR_STATE if errors else work.state.value
    if delivery is not None and delivery.releasing and not errors:
        state = RELEASING_STATE
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "state": state,
        "bindingsConfigMap": config_map,
        "bindings": binding_rows(resolution),
    }
    if delivery is not None and delivery.digest:
        status["delivery"] = delivery.as_status()
    if resolution.missing_tools:
        status["missingTools"] = list(resolution.missing_tools)
    if work.uri:
        status["work"] = _work_status(resolution.agent, work, waiting_since)
    if session is not None:
        launch, relaunch = _launch_status(session, generation, old)
        status.update(launch)
        conditions.append(relaunch)
        if session.health is not None:
            status["session"] = session.health.as_status()
    status["conditions"] = merge_conditions(old.get("conditions"), conditions, now)
    return status


def _work_status(agent: str, work: WorkPlan, waiting_since: str) -> dict[str, Any]:
    held = work.state is WorkState.WORKING
    out: dict[str, Any] = {"uri": work.uri, "held": held}
    if held:
        out["holder"] = _ref(agent)
    else:
        if work.waiting_for:
            out["waitingFor"] = _ref(work.waiting_for)
        if waiting_since:
            out["since"] = waiting_since
    return out


def _agent_ready(
    generation: int,
    resolution: AgentResolution,
    work: WorkPlan,
    *,
    config_map: str,
    session: SessionView | None,
    old: dict[str, Any],
    delivery: DeliveryView | None = None,
) -> tuple[dict[str, Any], bool]:
    """The agent's Ready condition, and whether what it says needs a person (Stalled).

    In order: binding conflicts, missing dependencies, waiting for the work URI, a session
    that does not run (yet), and only then Ready.
    """
    errors = resolution.errors
    if resolution.conflicts:
        # Every error is listed (the missing ones too): the message says all there is to fix.
        return condition("Ready", False, "BindingError", "; ".join(errors), generation), True
    if errors:
        return condition("Ready", False, MISSING_DEPENDENCY, "; ".join(errors), generation), False
    if work.state is WorkState.WAITING:
        who = work.waiting_for or "its release"
        message = f"work URI {work.uri!r} is held by another agent; waiting for {who}"
        return condition("Ready", False, "WaitingForWork", message, generation), False
    not_running = _session_not_ready(session, old) if session is not None else None
    if not_running is not None:
        stalled = session is not None and session.health is not None and session.health.stalled
        return condition("Ready", False, *not_running, generation), stalled
    undelivered = _delivery_not_ready(delivery) if delivery is not None else None
    if undelivered is not None:
        reason, message, stalled = undelivered
        return condition("Ready", False, reason, message, generation), stalled
    counts = binding_counts(resolution)
    message = (
        f"{counts.get(BindingState.BOUND.value, 0)} bound, "
        f"{counts.get(BindingState.DEFERRED.value, 0)} deferred, "
        f"{counts.get(BindingState.UNBOUND.value, 0)} unbound; delivered to ConfigMap "
        f"{config_map}"
    )
    return condition("Ready", True, "BindingsDelivered", message, generation), False


def _delivery_not_ready(delivery: DeliveryView) -> tuple[str, str, bool] | None:
    """Why the session has not taken the current document in (reason, message, stalled)."""
    short = delivery.digest[:19]
    releasing = (
        f"; work URI {', '.join(repr(u) for u in delivery.releasing)} is released once it has"
        if delivery.releasing
        else ""
    )
    if delivery.confirmation is Confirmation.REFUSED:
        refusal = delivery.record.refusal if delivery.record else ""
        return (
            "DocumentRefused",
            f"the session refused bindings document {short}: {refusal}; change the bindings "
            "(or the runtime) so that it accepts them",
            True,
        )
    if not delivery.pending:
        return None
    if delivery.overdue:
        return (
            "SessionNotAcknowledging",
            f"session pod {delivery.pod_uid} has not acknowledged bindings document {short} "
            f"written at {delivery.written_at}{releasing}; relaunch the session (raise "
            "spec.relaunchGeneration) or delete its pod",
            True,
        )
    return (
        "DeliveryPending",
        f"waiting for the session to apply bindings document {short}{releasing}",
        False,
    )


def _observed(session: SessionView, old: dict[str, Any]) -> int | None:
    """The generation the running pod was started with; while none runs (a relaunch between
    the old pod's end and the new one's start), the last one that ran."""
    if session.observed_generation is not None or session.health is None:
        return session.observed_generation
    last = old.get("observedLaunchGeneration")
    return last if isinstance(last, int) else None


def _session_not_ready(session: SessionView, old: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) when the session the spec asks for does not run yet, else None."""
    health = session.health
    if health is None:
        return None
    if not health.running:
        where = f"session pod {health.pod}" if health.pod else "the session"
        restarts = f" ({health.restarts} restarts)" if health.restarts else ""
        detail = f": {health.message}" if health.message else ""
        return health.reason, f"{where} is not running: {health.reason}{restarts}{detail}"
    plan = session.plan
    if plan.notice is LaunchNotice.NONE and _observed(session, old) != plan.observed_generation:
        return (
            "Relaunching",
            f"the session pod runs launch generation {session.observed_generation}; "
            f"generation {plan.observed_generation} is starting",
        )
    return None


def _launch_status(
    session: SessionView, generation: int, old: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The launch fields of an agent's status, and its RelaunchRequired condition."""
    plan, observed = session.plan, _observed(session, old)
    fields: dict[str, Any] = {
        "launch": f"{'-' if observed is None else observed}/{plan.desired_generation}",
        "desiredLaunchGeneration": plan.desired_generation,
        "desiredTrajectoryHash": plan.desired_hash,
    }
    if observed is not None:
        fields["observedLaunchGeneration"] = observed
    if plan.observed_generation is not None:
        fields["launchedGeneration"] = plan.observed_generation
    if session.launched_hash:
        fields["launchedTrajectoryHash"] = session.launched_hash
    if session.last_launch_time:
        fields["lastLaunchTime"] = session.last_launch_time
    drift = session.launched_hash is not None and session.launched_hash != plan.desired_hash
    change = "change spec.relaunchGeneration to relaunch the session with spec.runtime"
    if plan.notice is LaunchNotice.UNKNOWN:
        reason, drift = "LaunchUnknown", True
        message = (
            "the session workload carries no launch record Bindery can read (made outside "
            f"Bindery, edited, or by an older version); it is kept as found: {change}"
        )
    elif plan.notice is LaunchNotice.EDITED:
        reason, drift = "LaunchRecordEdited", True
        message = (
            "the session workload's launch annotations differ from what Bindery launched "
            f"(generation {plan.observed_generation}); they are not obeyed: {change}"
        )
    elif drift:
        reason = "TrajectoryChanged"
        message = (
            f"spec.runtime changed (desired {plan.desired_hash[:19]}, launched "
            f"{(session.launched_hash or '')[:19]}); {change}"
        )
    else:
        reason, message = "UpToDate", "the session runs the current spec.runtime"
    return fields, condition("RelaunchRequired", drift, reason, message, generation)


def tool_status(
    *, generation: int, tool: ToolSpec, validation: ToolValidation, old: dict[str, Any], now: str
) -> dict[str, Any]:
    errors = validation.errors
    declared = {slot.name: slot.static_resource or "" for slot in tool.resource_slots}
    static = [
        {
            "name": s.slot,
            "resourceType": s.resource_type,
            "staticResource": declared.get(s.slot, ""),
            "state": s.state.value,
            **({"resource": _resource(s.resource)} if s.resource else {}),
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
        ready = condition("Ready", True, "Valid", f"{len(static)} static slot(s) valid", generation)
    conditions = health_conditions(ready, progressing=True, stalled=bool(conflicts))
    return {
        "observedGeneration": generation,
        "slotCount": len(tool.resource_slots),
        "staticSlotsValid": not errors,
        "staticSlots": static,
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }


def resource_type_status(
    *, generation: int, closure: TypeClosure, old: dict[str, Any], now: str
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
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
    if closure.cycle:
        status["cycle"] = list(closure.cycle)
    if closure.unknown_parents:
        status["unknownParents"] = list(closure.unknown_parents)
    return status


def resource_status(
    *,
    generation: int,
    errors: Sequence[str],
    holder: Hold | None,
    old: dict[str, Any],
    now: str,
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
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "valid": not errors,
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
    if holder is not None:
        status["holder"] = {**_ref(holder.holder), "uid": holder.holder_uid}
    return status


# ---------------------------------------------------------------------- shared by every kind


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


def ready_condition(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})


def is_ready(st: dict[str, Any]) -> bool:
    return ready_condition(st).get("status") == "True"


def ready_message(st: dict[str, Any]) -> str:
    return str(ready_condition(st).get("message", ""))


def waiting_since(old: dict[str, Any], plan: WorkPlan, now: str) -> str:
    """When this agent began waiting for ``plan.uri``: kept from ``old`` while it still waits."""
    if plan.state is not WorkState.WAITING:
        return ""
    work = old.get("work") or {}
    if work.get("uri") == plan.uri and not work.get("held") and work.get("since"):
        return str(work["since"])
    return now


# ---------------------------------------------------------------------- events


@dataclass(frozen=True)
class Note:
    """One Event to post about an object."""

    reason: str
    message: str
    warning: bool = False


def _stalled(st: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Stalled" and c.get("status") == "True" for c in st.get("conditions") or []
    )


def _news(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the Ready condition says something new: another status or reason, or, while not
    Ready, another message (``kubectl describe`` then shows why it is not Ready *now*)."""
    before, after = ready_condition(old), ready_condition(new)
    if (before.get("status"), before.get("reason")) != (after.get("status"), after.get("reason")):
        return True
    return after.get("status") != "True" and before.get("message") != after.get("message")


def agent_events(
    old: dict[str, Any], new: dict[str, Any], launched: LaunchAction | None
) -> list[Note]:
    """The Events an agent's status transition from ``old`` to ``new`` posts: a launch, and
    every change of what its Ready condition says (none for a first pass that is simply Ready)."""
    notes: list[Note] = []
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
    if is_ready(new):
        notes.append(Note(str(after.get("reason", "")), ready_message(new)))
        return notes
    notes.append(Note(str(after.get("reason", "")), ready_message(new), warning=_stalled(new)))
    return notes


def tool_events(old: dict[str, Any], new: dict[str, Any]) -> list[Note]:
    """The Events a Tool's status transition posts: each new reason it is not Ready for."""
    if is_ready(new) or not _news(old, new):
        return []
    reason = str(ready_condition(new).get("reason", ""))
    return [Note(reason, ready_message(new), warning=_stalled(new))]


def rejected_status(
    generation: int, old: dict[str, Any], now: str, *, what: str, error: str
) -> dict[str, Any]:
    """The status of an agent whose pass the API server refused (a bindings document over the
    ConfigMap limit, a name too long for its session, a quota): Stalled, naming the refusal."""
    message = f"the API server refused {what}: {error}"
    return blocked_status(generation, old, now, reason="ApiRejected", message=message)


def blocked_status(
    generation: int,
    old: dict[str, Any],
    now: str,
    *,
    reason: str,
    message: str,
    stalled: bool = True,
) -> dict[str, Any]:
    """The status of an agent whose pass could not complete (refused by the API server, or an
    object in the way that Bindery does not own): Ready=False with ``reason``.

    The fields of ``old`` that describe the world as last observed are kept; only the
    conditions and state say the pass could not complete.
    """
    conditions = health_conditions(
        condition("Ready", False, reason, message, generation),
        progressing=not stalled,
        stalled=stalled,
    )
    kept = {k: v for k, v in old.items() if k not in ("conditions", "state", "observedGeneration")}
    return {
        **kept,
        "observedGeneration": generation,
        "state": ERROR_STATE,
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
