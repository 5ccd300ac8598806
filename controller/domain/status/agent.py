"""An agent's status: its bindings, work hold, session and delivery, and the Ready condition that
sums them up; and the status of an agent whose pass could not complete."""

from __future__ import annotations

from typing import Any

from bindery_session.wire import BindingState

from controller.domain.acknowledgement import Confirmation, DeliveryView
from controller.domain.results import AgentResolution
from controller.domain.status.bindings import binding_counts, binding_rows
from controller.domain.status.conditions import (
    MISSING_DEPENDENCY,
    condition,
    health_conditions,
    merge_conditions,
)
from controller.domain.status.fields import ERROR_STATE, PENDING_STATE, ref_field
from controller.domain.status.session import (
    SessionView,
    launch_status,
    session_not_ready,
    suspended_condition,
)
from controller.domain.work import WorkPlan, WorkState

DELIVERY_PENDING = "DeliveryPending"
"""Ready's reason while the session has yet to apply the current document."""
RELEASING_STATE = "Releasing"
"""An agent whose withdrawn work hold waits for its session to let go of the URI."""
SUSPENDED_STATE = "Suspended"
"""An idle agent whose session its idle policy scaled to zero."""


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
    state = _state(resolution, work)
    if delivery is not None and delivery.releasing and not errors:
        state = RELEASING_STATE
    if session is not None and session.suspended and not errors and work.state is WorkState.IDLE:
        state = SUSPENDED_STATE
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "state": state,
        "bindingsConfigMap": config_map,
        "bindings": binding_rows(resolution, work),
    }
    if delivery is not None and delivery.digest:
        status["delivery"] = delivery.as_status()
    if resolution.missing_tools:
        status["missingTools"] = list(resolution.missing_tools)
    if work.uri:
        status["work"] = _work_status(resolution.agent, work, waiting_since)
    if session is not None:
        launch, relaunch = launch_status(session, generation, old)
        status.update(launch)
        conditions.append(relaunch)
        if (suspended := suspended_condition(session, generation)) is not None:
            conditions.append(suspended)
        if (session_status := session.as_status()) is not None:
            status["session"] = session_status
        if session.workspace is not None:
            status["workspace"] = session.workspace.as_status()
    status["conditions"] = merge_conditions(old.get("conditions"), conditions, now)
    return status


def _state(resolution: AgentResolution, work: WorkPlan) -> str:
    """The ``state`` column: Error only when a person must change something (Stalled); Pending
    while it waits for an object the next apply brings (Reconciling), like a Pod or a
    PersistentVolumeClaim that waits for what it needs."""
    if resolution.conflicts:
        return ERROR_STATE
    if resolution.errors:
        return PENDING_STATE
    return work.state.value


def _work_status(agent: str, work: WorkPlan, waiting_since: str) -> dict[str, Any]:
    held = work.state is WorkState.WORKING
    out: dict[str, Any] = {"uri": work.uri, "held": held}
    if held:
        out["holder"] = ref_field(agent)
    else:
        if work.waiting_for:
            out["waitingFor"] = ref_field(work.waiting_for)
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
    suspended by its idle policy (Ready: nothing to do, no pod to ask), a session that does not
    run (yet), and only then Ready.
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
    said = _session_says(session, old, generation) if session is not None else None
    if said is not None:
        return said
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


def _session_says(
    session: SessionView, old: dict[str, Any], generation: int
) -> tuple[dict[str, Any], bool] | None:
    """Ready and Stalled from the session alone: suspended by its idle policy (Ready: nothing
    to do, no pod to ask), or not running (yet); None when it runs."""
    if session.suspended and session.health is not None:
        message = f"idle, its session suspended: {session.health.message}"
        return condition("Ready", True, "Suspended", message, generation), False
    not_running = session_not_ready(session, old)
    if not_running is None:
        return None
    stalled = session.health is not None and session.health.stalled
    return condition("Ready", False, *not_running, generation), stalled


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
        DELIVERY_PENDING,
        f"waiting for the session to apply bindings document {short}{releasing}",
        False,
    )


def waiting_since(old: dict[str, Any], plan: WorkPlan, now: str) -> str:
    """When this agent began waiting for ``plan.uri``: kept from ``old`` while it still waits."""
    if plan.state is not WorkState.WAITING:
        return ""
    work = old.get("work") or {}
    if work.get("uri") == plan.uri and not work.get("held") and work.get("since"):
        return str(work["since"])
    return now


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
        "state": ERROR_STATE if stalled else PENDING_STATE,
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
