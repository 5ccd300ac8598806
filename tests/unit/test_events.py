"""Which Events a status transition posts (pure: no API server)."""

from __future__ import annotations

from typing import Any

from controller.domain.launch import LaunchAction
from controller.domain.status import agent_events, condition, health_conditions, tool_events


def st(
    ready: bool, reason: str, message: str, *, state: str = "", stalled: bool = False
) -> dict[str, Any]:
    conditions = health_conditions(
        condition("Ready", ready, reason, message, 1), progressing=not stalled, stalled=stalled
    )
    out: dict[str, Any] = {"conditions": conditions}
    if state:
        out["state"] = state
    return out


def reasons(notes: list[Any]) -> list[tuple[str, bool]]:
    return [(n.reason, n.warning) for n in notes]


def test_a_first_pass_that_is_simply_ready_posts_nothing() -> None:
    assert agent_events({}, st(True, "BindingsDelivered", "1 bound", state="Idle"), None) == []


def test_a_new_reason_posts_an_event_even_when_the_state_stays() -> None:
    old = st(False, "MissingDependency", "tool fmt is missing", state="Pending")
    new = st(
        False, "BindingError", "2 linked resources are compatible", state="Error", stalled=True
    )
    assert reasons(agent_events(old, new, None)) == [("BindingError", True)]


def test_a_new_message_while_not_ready_posts_an_event() -> None:
    old = st(False, "MissingDependency", "tool fmt is missing", state="Pending")
    new = st(False, "MissingDependency", "tool lint is missing", state="Pending")
    notes = agent_events(old, new, None)
    assert reasons(notes) == [("MissingDependency", False)]
    assert notes[0].message == "tool lint is missing"


def test_a_ready_agent_whose_counts_change_posts_nothing() -> None:
    old = st(True, "BindingsDelivered", "1 bound", state="Idle")
    new = st(True, "BindingsDelivered", "2 bound", state="Idle")
    assert agent_events(old, new, None) == []


def test_recovering_and_acquiring_and_launching_are_said() -> None:
    broken = st(False, "MissingDependency", "tool fmt is missing", state="Pending")
    fixed = st(True, "BindingsDelivered", "1 bound", state="Idle")
    assert reasons(agent_events(broken, fixed, None)) == [("BindingsDelivered", False)]
    waiting = st(False, "WaitingForWork", "held by b", state="Waiting")
    working = {**st(True, "BindingsDelivered", "1 bound", state="Working"), "work": {"uri": "x"}}
    assert reasons(agent_events(waiting, working, None)) == [("AcquiredWork", False)]
    assert reasons(agent_events(fixed, fixed, LaunchAction.RELAUNCH)) == [("Relaunched", False)]


def test_a_tool_posts_each_new_reason_it_is_not_ready_for() -> None:
    ok = st(True, "Valid", "all static slots valid")
    missing = st(False, "MissingDependency", "resource cfg does not exist")
    wrong = st(False, "InvalidStaticSlot", "resource cfg is a issue", stalled=True)
    assert reasons(tool_events(ok, missing)) == [("MissingDependency", False)]
    assert reasons(tool_events(missing, wrong)) == [("InvalidStaticSlot", True)]
    assert tool_events(wrong, wrong) == []
    assert tool_events(wrong, ok) == []


def drifting(status: dict[str, Any], desired: str, *, drift: bool) -> dict[str, Any]:
    """``status`` with launch fields: spec.runtime hashes to ``desired``; ``drift``: the session
    runs another trajectory."""
    relaunch = condition(
        "RelaunchRequired",
        drift,
        "TrajectoryChanged" if drift else "UpToDate",
        f"spec.runtime changed (desired {desired}, launched sha256:a); change "
        "spec.relaunchGeneration to relaunch the session with spec.runtime"
        if drift
        else "the session runs the current spec.runtime",
        1,
    )
    return {
        **status,
        "desiredTrajectoryHash": desired,
        "drift": drift,
        "conditions": [*status["conditions"], relaunch],
    }


def test_a_drift_posts_one_normal_relaunch_required_event_and_no_more() -> None:
    ready = st(True, "BindingsDelivered", "1 bound", state="Idle")
    running = drifting(ready, "sha256:a", drift=False)
    drifted = drifting(ready, "sha256:b", drift=True)
    notes = agent_events(running, drifted, None)
    assert reasons(notes) == [("RelaunchRequired", False)]
    assert "change spec.relaunchGeneration" in notes[0].message
    # The next pass over the same drift, or a restarted controller finding it: nothing.
    assert agent_events(drifted, drifted, None) == []
    # spec.runtime changed again while drifting: a new drift, said once more.
    again = drifting(ready, "sha256:c", drift=True)
    assert reasons(agent_events(drifted, again, None)) == [("RelaunchRequired", False)]
    # Reverted to what runs: no drift, nothing to say.
    assert agent_events(again, running, None) == []


def test_a_drift_found_at_once_is_said_beside_the_other_events() -> None:
    waiting = st(False, "MissingDependency", "tool fmt is missing", state="Pending")
    drifted = drifting(st(True, "BindingsDelivered", "1 bound", state="Idle"), "b", drift=True)
    assert reasons(agent_events(waiting, drifted, None)) == [
        ("RelaunchRequired", False),
        ("BindingsDelivered", False),
    ]


def test_a_session_taking_in_a_new_document_posts_nothing() -> None:
    """The everyday transition of every agent a binding change reaches: status says it, the
    changed object counts the rollout; no Event either way (a fleet's worth per edit)."""
    ready = st(True, "BindingsDelivered", "1 bound", state="Idle")
    pending = st(False, "DeliveryPending", "waiting for the session to apply ...", state="Idle")
    again = st(False, "DeliveryPending", "waiting for the session to apply other", state="Idle")
    assert agent_events(ready, pending, None) == []
    assert agent_events(pending, again, None) == []
    assert agent_events(pending, ready, None) == []


def test_a_handoff_and_a_session_that_stops_acknowledging_are_still_said() -> None:
    ready = st(True, "BindingsDelivered", "1 bound", state="Working")
    releasing = st(False, "DeliveryPending", "... is released once it has", state="Releasing")
    idle = st(True, "BindingsDelivered", "1 bound", state="Idle")
    assert reasons(agent_events(ready, releasing, None)) == [("DeliveryPending", False)]
    assert reasons(agent_events(releasing, idle, None)) == [("BindingsDelivered", False)]
    pending = st(False, "DeliveryPending", "waiting for the session", state="Idle")
    silent = st(False, "SessionNotAcknowledging", "has not acknowledged", stalled=True)
    assert reasons(agent_events(pending, silent, None)) == [("SessionNotAcknowledging", True)]
    assert reasons(agent_events(silent, idle, None)) == [("BindingsDelivered", False)]
