"""Status documents: conditions, lastTransitionTime preservation, and idempotence.

An idle controller makes no API writes because a pass over an unchanged world computes a status
identical to the one already stored; ``test_*_is_idempotent`` pin that.
"""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
from bindery_session.wire import Access, BindingMode, BindingState

from controller.domain.acknowledgement import seconds_since
from controller.domain.launch import (
    LaunchAction,
    Launched,
    LaunchNotice,
    LaunchPlan,
    plan_launch,
    trajectory_hash,
)
from controller.domain.models import Runtime, ToolSpec, Workspace
from controller.domain.results import (
    AgentResolution,
    BoundResource,
    Candidate,
    DirectResult,
    ErrorCause,
    Problem,
    SlotResult,
    ToolValidation,
    TypeClosure,
)
from controller.domain.session_health import SessionHealth, SessionPhase
from controller.domain.status import (
    ERROR_STATE,
    MAX_CANDIDATES,
    MAX_MESSAGE,
    PENDING_STATE,
    SessionView,
    agent_status,
    binding_rows,
    blocked_status,
    condition,
    health_conditions,
    invalid_status,
    merge_conditions,
    now_micro_rfc3339,
    now_rfc3339,
    resource_status,
    resource_type_status,
    tool_status,
)
from controller.domain.work import Hold, WorkPlan, WorkState
from controller.domain.workspace import WorkspaceView

T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T00:05:00Z"
T2 = "2024-01-01T00:10:00Z"
AGENT = "team/alice"
URI = "github-issue://example/project/123"
CM = "alice-bindings"


def cond(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    (found,) = [c for c in conditions if c["type"] == type_]
    return found


def resolution(*, error: bool = False, work: bool = True) -> AgentResolution:
    work_res = BoundResource(uri=URI, type="github-issue", alias="work")
    direct = [
        DirectResult(
            name="work",
            tag="github-issue",
            uri=URI,
            state=BindingState.BOUND,
            resource=work_res,
        )
    ]
    if not work:
        direct = []
    slots = [
        SlotResult(
            tool="git",
            slot="repo",
            mode=BindingMode.CONTEXTUAL,
            access=Access.READ_WRITE,
            resource_type="git-checkout",
            state=BindingState.BOUND,
            resource=BoundResource(
                uri="file:///src", type="fs-directory", name="src", namespace="team", uid="u1"
            ),
        ),
        SlotResult(
            tool="git",
            slot="target",
            mode=BindingMode.PARAMETER,
            access=Access.READ_ONLY,
            resource_type="git-checkout",
            state=BindingState.DEFERRED,
        ),
        SlotResult(
            tool="notes",
            slot="log",
            mode=BindingMode.CONTEXTUAL,
            access=Access.WRITE_ONLY,
            resource_type="worklog",
            required=False,
            state=BindingState.UNBOUND,
        ),
    ]
    if error:
        slots.append(
            SlotResult(
                tool="notes",
                slot="dir",
                mode=BindingMode.STATIC,
                access=Access.READ_ONLY,
                resource_type="fs-directory",
                state=BindingState.ERROR,
                message="agent team/alice, tool 'notes', slot 'dir': no such Resource",
            )
        )
    return AgentResolution(agent=AGENT, direct=direct, slots=slots)


def status_for(
    work: WorkPlan,
    *,
    res: AgentResolution | None = None,
    waiting_since: str = "",
    session: SessionView | None = None,
    old: dict[str, Any] | None = None,
    now: str = T0,
    generation: int = 3,
) -> dict[str, Any]:
    return agent_status(
        generation=generation,
        resolution=res or resolution(),
        work=work,
        waiting_since=waiting_since,
        config_map=CM,
        session=session,
        old=old or {},
        now=now,
    )


IDLE = WorkPlan(state=WorkState.IDLE)
WORKING = WorkPlan(state=WorkState.WORKING, uri=URI, deliver=True)
WAITING = WorkPlan(state=WorkState.WAITING, uri=URI, waiting_for="team/bob")


# ------------------------------------------------------------------------------- helpers


def test_now_rfc3339_format() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", now_rfc3339())


def test_a_stamp_a_grace_is_counted_from_keeps_its_fraction() -> None:
    """A grace counted from a whole-second stamp ends up to a second early."""
    stamp = now_micro_rfc3339()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", stamp)
    then = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    later = then + timedelta(seconds=7.999)
    assert seconds_since(stamp, later) == pytest.approx(7.999, abs=1e-6)
    assert seconds_since(stamp, later) < 8.0


def test_condition_shape() -> None:
    assert condition("Ready", True, "R", "m", 4) == {
        "type": "Ready",
        "status": "True",
        "reason": "R",
        "message": "m",
        "observedGeneration": 4,
    }
    assert condition("Ready", False, "R", "m", 4)["status"] == "False"


def test_condition_messages_are_clipped_to_stay_writable() -> None:
    message = condition("Ready", False, "R", "x" * (MAX_MESSAGE + 100), 4)["message"]
    assert len(message) <= MAX_MESSAGE
    assert message.endswith("... (140 more characters)")
    assert condition("Ready", False, "R", "x" * MAX_MESSAGE, 4)["message"] == "x" * MAX_MESSAGE


# ------------------------------------------------------------------------------- merge_conditions


def test_merge_stamps_now_for_new_conditions() -> None:
    merged = merge_conditions(None, [condition("Ready", True, "R", "", 1)], T1)
    assert merged[0]["lastTransitionTime"] == T1
    assert merge_conditions([], [condition("Ready", True, "R", "", 1)], T1) == merged


def test_merge_keeps_transition_time_while_status_unchanged() -> None:
    old = merge_conditions(None, [condition("Ready", True, "A", "one", 1)], T0)
    # reason, message and generation change; status does not -> no transition
    merged = merge_conditions(old, [condition("Ready", True, "B", "two", 2)], T1)
    assert merged[0]["lastTransitionTime"] == T0
    assert merged[0]["reason"] == "B"
    assert merged[0]["message"] == "two"
    assert merged[0]["observedGeneration"] == 2


def test_merge_stamps_now_when_status_changes() -> None:
    old = merge_conditions(None, [condition("Ready", True, "A", "", 1)], T0)
    merged = merge_conditions(old, [condition("Ready", False, "A", "", 1)], T1)
    assert merged[0]["lastTransitionTime"] == T1


def test_merge_stamps_now_when_old_lacks_a_transition_time() -> None:
    old = [condition("Ready", True, "A", "", 1)]  # written by something else, no time
    merged = merge_conditions(old, [condition("Ready", True, "A", "", 1)], T1)
    assert merged[0]["lastTransitionTime"] == T1


def test_merge_is_per_type_and_keeps_new_order() -> None:
    old = merge_conditions(
        None,
        [condition("Ready", True, "A", "", 1), condition("Stalled", False, "A", "", 1)],
        T0,
    )
    merged = merge_conditions(
        old,
        [
            condition("Stalled", True, "B", "", 1),
            condition("Ready", True, "A", "", 1),
            condition("Other", True, "C", "", 1),
        ],
        T2,
    )
    assert [c["type"] for c in merged] == ["Stalled", "Ready", "Other"]
    assert [c["lastTransitionTime"] for c in merged] == [T2, T0, T2]


def test_merge_drops_conditions_no_longer_computed_and_does_not_mutate_input() -> None:
    old = merge_conditions(None, [condition("Gone", True, "A", "", 1)], T0)
    new = [condition("Ready", True, "A", "", 1)]
    before = copy.deepcopy(new)
    merged = merge_conditions(old, new, T1)
    assert [c["type"] for c in merged] == ["Ready"]
    assert new == before


# ------------------------------------------------------------------------------- agent_status


def test_idle_status() -> None:
    s = status_for(IDLE, res=resolution(work=False))
    assert s["state"] == "Idle"
    assert s["observedGeneration"] == 3
    assert s["bindingsConfigMap"] == CM
    assert "work" not in s
    assert "launch" not in s
    assert "launchStatus" not in s
    ready = cond(s["conditions"], "Ready")
    assert ready["status"] == "True"
    assert ready["reason"] == "BindingsDelivered"
    assert ready["message"] == f"1 bound, 1 deferred, 1 unbound; delivered to ConfigMap {CM}"
    assert ready["observedGeneration"] == 3
    assert ready["lastTransitionTime"] == T0
    reconciling = cond(s["conditions"], "Reconciling")
    assert (reconciling["status"], reconciling["reason"]) == ("False", "Reconciled")
    stalled = cond(s["conditions"], "Stalled")
    assert (stalled["status"], stalled["reason"], stalled["message"]) == (
        "False",
        "Reconciled",
        "",
    )
    assert "RelaunchRequired" not in {c["type"] for c in s["conditions"]}
    assert "missingTools" not in s
    assert not {"desiredLaunchGeneration", "desiredTrajectoryHash", "lastLaunchTime"} & set(s)


def test_bindings_rows() -> None:
    s = status_for(WORKING)
    rows = {r["name"]: r for r in s["bindings"]}
    assert list(rows) == ["work", "git.repo", "git.target", "notes.log"]
    assert rows["work"] == {
        "name": "work",
        "tag": "github-issue",
        "uri": URI,
        "mode": "direct",
        "state": "Bound",
        "resource": {"uri": URI, "type": "github-issue", "alias": "work"},
    }
    assert rows["git.repo"] == {
        "name": "git.repo",
        "tool": "git",
        "slot": "repo",
        "mode": "contextual",
        "access": "read_write",
        "resourceType": "git-checkout",
        "required": True,
        "state": "Bound",
        "resource": {
            "uri": "file:///src",
            "type": "fs-directory",
            "name": "src",
            "namespace": "team",
            "uid": "u1",
        },
    }
    assert "resource" not in rows["git.target"]
    assert rows["git.target"]["state"] == "Deferred"
    assert rows["notes.log"]["access"] == "write_only"
    assert rows["notes.log"]["required"] is False
    assert "candidates" not in rows["notes.log"]
    assert "message" not in rows["notes.log"]


def _ambiguous(candidates: list[Candidate]) -> SlotResult:
    return SlotResult(
        tool="git",
        slot="repo",
        mode=BindingMode.CONTEXTUAL,
        access=Access.READ_WRITE,
        resource_type="git-checkout",
        state=BindingState.ERROR,
        message="ambiguous",
        candidates=candidates,
    )


def test_binding_rows_carry_candidates() -> None:
    slot = _ambiguous(
        [
            Candidate(uri="file:///a", type="fs-directory", alias="a", reason="name differs"),
            Candidate(uri="file:///b", type="fs-directory", reason="name differs"),
        ]
    )
    s = status_for(IDLE, res=AgentResolution(agent=AGENT, slots=[slot]))
    (row,) = s["bindings"]
    assert row["message"] == "ambiguous"
    assert row["candidates"] == [
        {"uri": "file:///a", "type": "fs-directory", "alias": "a", "reason": "name differs"},
        {"uri": "file:///b", "type": "fs-directory", "reason": "name differs"},
    ]


def test_binding_rows_carry_messages() -> None:
    res = AgentResolution(
        agent=AGENT,
        direct=[
            DirectResult(
                name="src", tag="t", uri="x:y", state=BindingState.ERROR, message="bad tag"
            )
        ],
    )
    s = status_for(IDLE, res=res)
    assert s["bindings"] == [
        {
            "name": "src",
            "tag": "t",
            "uri": "x:y",
            "mode": "direct",
            "state": "Error",
            "message": "bad tag",
        }
    ]


def test_working_status() -> None:
    s = status_for(WORKING, waiting_since=T0)
    assert s["state"] == "Working"
    # no waiting fields while held
    assert s["work"] == {"uri": URI, "held": True, "holder": {"namespace": "team", "name": "alice"}}
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "BindingsDelivered")
    assert ready["message"].startswith("2 bound, 1 deferred, 1 unbound")
    assert cond(s["conditions"], "Reconciling")["status"] == "False"
    assert cond(s["conditions"], "Stalled")["status"] == "False"


def test_waiting_status() -> None:
    s = status_for(WAITING, waiting_since=T1)
    assert s["state"] == "Waiting"
    assert s["work"] == {
        "uri": URI,
        "held": False,
        "waitingFor": {"namespace": "team", "name": "bob"},
        "since": T1,
    }
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "WaitingForWork")
    assert URI in ready["message"]
    assert "team/bob" in ready["message"]
    reconciling = cond(s["conditions"], "Reconciling")
    assert (reconciling["status"], reconciling["reason"]) == ("True", "WaitingForWork")
    assert reconciling["message"] == ready["message"]
    stalled = cond(s["conditions"], "Stalled")
    assert stalled["status"] == "False"


def test_waiting_without_a_named_holder() -> None:
    plan = WorkPlan(state=WorkState.WAITING, uri=URI, acquire=True)
    s = status_for(plan, waiting_since=T1)
    assert s["work"] == {"uri": URI, "held": False, "since": T1}
    assert "its release" in cond(s["conditions"], "Ready")["message"]


def test_waiting_without_a_known_start_says_no_since() -> None:
    s = status_for(WAITING)
    assert s["work"] == {
        "uri": URI,
        "held": False,
        "waitingFor": {"namespace": "team", "name": "bob"},
    }


def test_error_status() -> None:
    s = status_for(WORKING, res=resolution(error=True))
    assert s["state"] == ERROR_STATE == "Error"
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "BindingError")
    assert "no such Resource" in ready["message"]
    stalled = cond(s["conditions"], "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "BindingError")
    assert stalled["message"] == ready["message"]
    assert cond(s["conditions"], "Reconciling")["status"] == "False"


def test_error_messages_are_joined() -> None:
    res = resolution(error=True).model_copy(update={"missing_tools": ["ghost"]})
    s = status_for(IDLE, res=res)
    message = cond(s["conditions"], "Ready")["message"]
    assert "no such Resource; agent team/alice: tool 'ghost'" in message
    assert s["missingTools"] == ["ghost"]


def test_error_while_waiting_is_stalled_not_reconciling() -> None:
    s = status_for(WAITING, res=resolution(error=True), waiting_since=T1)
    assert s["state"] == "Error"
    assert cond(s["conditions"], "Ready")["reason"] == "BindingError"
    assert cond(s["conditions"], "Stalled")["status"] == "True"
    assert cond(s["conditions"], "Reconciling")["status"] == "False"
    assert s["work"]["waitingFor"] == {"namespace": "team", "name": "bob"}


def test_reconciling_reason_agrees_with_its_status_when_stalled() -> None:
    """A False Reconciling condition must not say WaitingForWork and carry the binding errors.

    With errors the agent is Stalled, not progressing; ``Reconciling=False`` with reason
    ``WaitingForWork`` and the binding-error text as its message contradicts itself.
    """
    s = status_for(WAITING, res=resolution(error=True), waiting_since=T1)
    reconciling = cond(s["conditions"], "Reconciling")
    assert reconciling["status"] == "False"
    assert reconciling["reason"] != "WaitingForWork"
    assert "no such Resource" not in reconciling["message"]


def _session(
    desired: Runtime, generation: int, launched: Launched | None, when: str = T0
) -> SessionView:
    plan = plan_launch(desired, generation, launched)
    return SessionView(
        plan,
        launched.generation if launched else None,
        launched.trajectory_hash if launched else None,
        when if launched else "",
    )


RT = Runtime(image="img:1")
LAUNCH_KEYS = (
    "desiredLaunchGeneration",
    "observedLaunchGeneration",
    "desiredTrajectoryHash",
    "launchedTrajectoryHash",
    "lastLaunchTime",
)
RT2 = Runtime(image="img:2")


def test_launch_column_and_status_without_drift() -> None:
    h = trajectory_hash(RT)
    s = status_for(IDLE, session=_session(RT, 2, Launched(2, h, T0)))
    assert s["launch"] == "2/2"
    assert {k: s[k] for k in LAUNCH_KEYS if k in s} == {
        "desiredLaunchGeneration": 2,
        "observedLaunchGeneration": 2,
        "desiredTrajectoryHash": h,
        "launchedTrajectoryHash": h,
        "lastLaunchTime": T0,
    }
    relaunch = cond(s["conditions"], "RelaunchRequired")
    assert (relaunch["status"], relaunch["reason"]) == ("False", "UpToDate")


def test_launch_column_before_any_launch() -> None:
    s = status_for(IDLE, session=_session(RT, 4, None))
    assert s["launch"] == "-/4"
    assert {k: s[k] for k in LAUNCH_KEYS if k in s} == {
        "desiredLaunchGeneration": 4,
        "desiredTrajectoryHash": trajectory_hash(RT),
    }
    relaunch = cond(s["conditions"], "RelaunchRequired")
    assert relaunch["status"] == "False"


def test_relaunch_required_on_drift() -> None:
    launched = Launched(1, trajectory_hash(RT), T0)
    session = _session(RT2, 1, launched)
    assert session.plan.drift
    s = status_for(IDLE, session=session)
    assert s["launch"] == "1/1"
    assert s["desiredTrajectoryHash"] == trajectory_hash(RT2)
    assert s["launchedTrajectoryHash"] == trajectory_hash(RT)
    relaunch = cond(s["conditions"], "RelaunchRequired")
    assert (relaunch["status"], relaunch["reason"]) == ("True", "TrajectoryChanged")
    assert "change spec.relaunchGeneration to relaunch" in relaunch["message"]
    assert trajectory_hash(RT2)[:19] in relaunch["message"]
    assert trajectory_hash(RT)[:19] in relaunch["message"]
    # drift alone does not make the agent unready: the session keeps working
    assert cond(s["conditions"], "Ready")["status"] == "True"
    assert s["drift"] is True  # the DRIFT column


def test_the_drift_column_says_false_while_the_session_runs_spec_runtime() -> None:
    h = trajectory_hash(RT)
    assert status_for(IDLE, session=_session(RT, 2, Launched(2, h, T0)))["drift"] is False
    assert status_for(IDLE, session=_session(RT, 4, None))["drift"] is False
    assert "drift" not in status_for(IDLE)  # no runtime, no launch: the column stays empty


def test_relaunch_clears_the_drift_column() -> None:
    plan = LaunchPlan(LaunchAction.RELAUNCH, 2, "sha256:new", 1, "sha256:old")
    assert status_for(IDLE, session=SessionView(plan, 2, "sha256:new", T1))["drift"] is False


def test_relaunch_clears_drift() -> None:
    """After a relaunch the reconciler reports what it just launched: no drift."""
    plan = LaunchPlan(LaunchAction.RELAUNCH, 2, "sha256:new", 1, "sha256:old")
    s = status_for(IDLE, session=SessionView(plan, 2, "sha256:new", T1))
    assert s["launch"] == "2/2"
    assert cond(s["conditions"], "RelaunchRequired")["status"] == "False"
    assert s["lastLaunchTime"] == T1
    assert s["observedLaunchGeneration"] == 2


def test_relaunch_required_transition_time() -> None:
    h = trajectory_hash(RT)
    first = status_for(IDLE, session=_session(RT, 1, Launched(1, h, T0)), now=T0)
    drifted = status_for(IDLE, session=_session(RT2, 1, Launched(1, h, T0)), old=first, now=T1)
    assert cond(drifted["conditions"], "RelaunchRequired")["lastTransitionTime"] == T1
    assert cond(drifted["conditions"], "Ready")["lastTransitionTime"] == T0


@pytest.mark.parametrize(
    ("work", "session_gen"),
    [(IDLE, None), (WORKING, 0), (WAITING, 3), (WORKING, None)],
)
def test_agent_status_is_idempotent(work: WorkPlan, session_gen: int | None) -> None:
    session = (
        None
        if session_gen is None
        else _session(RT2, session_gen, Launched(session_gen, trajectory_hash(RT), T0))
    )
    for res in (resolution(), resolution(error=True)):
        first = status_for(work, res=res, session=session, waiting_since=T0, now=T1)
        second = status_for(
            work, res=res, session=session, waiting_since=T0, old=copy.deepcopy(first), now=T2
        )
        assert second == first


def test_transition_when_waiting_becomes_working() -> None:
    waiting = status_for(WAITING, waiting_since=T0, now=T0)
    working = status_for(WORKING, old=waiting, now=T1)
    assert cond(working["conditions"], "Ready")["lastTransitionTime"] == T1
    assert cond(working["conditions"], "Reconciling")["lastTransitionTime"] == T1
    assert cond(working["conditions"], "Stalled")["lastTransitionTime"] == T0


# ------------------------------------------------------------------------------- tool_status

TOOL = ToolSpec.model_validate(
    {
        "resourceSlots": [
            {
                "name": "config",
                "resourceType": "fs-directory",
                "binding": "static",
                "staticResource": "etc",
            },
            {"name": "repo", "resourceType": "git-checkout"},
            {"name": "target", "resourceType": "git-checkout", "binding": "parameter"},
        ]
    }
)


def _static(state: BindingState, message: str = "", bound: bool = False) -> SlotResult:
    return SlotResult(
        tool="git",
        slot="config",
        mode=BindingMode.STATIC,
        access=Access.READ_ONLY,
        resource_type="fs-directory",
        state=state,
        message=message,
        resource=BoundResource(uri="file:///etc", type="fs-directory", name="etc")
        if bound
        else None,
    )


def test_tool_status_valid() -> None:
    v = ToolValidation(tool="team/git", static_slots=[_static(BindingState.BOUND, bound=True)])
    s = tool_status(generation=2, tool=TOOL, validation=v, old={}, now=T0)
    assert s["observedGeneration"] == 2
    assert s["slotCount"] == 3
    assert s["staticSlotsValid"] is True
    assert s["staticSlots"] == [
        {
            "name": "config",
            "resourceType": "fs-directory",
            "staticResource": "etc",
            "state": "Bound",
            "resource": {"uri": "file:///etc", "type": "fs-directory", "name": "etc"},
        }
    ]
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Valid")
    assert ready["message"] == (
        "the resourceType of each of its 3 slot(s) is registered; 1 static slot(s) valid"
    )


def test_tool_status_without_static_slots() -> None:
    tool = ToolSpec()
    s = tool_status(
        generation=1, tool=tool, validation=ToolValidation(tool="team/x"), old={}, now=T0
    )
    assert s["slotCount"] == 0
    assert s["staticSlots"] == []
    assert s["staticSlotsValid"] is True
    assert cond(s["conditions"], "Ready")["message"] == (
        "the resourceType of each of its 0 slot(s) is registered; 0 static slot(s) valid"
    )


def test_tool_status_invalid_static_slot() -> None:
    v = ToolValidation(
        tool="team/git",
        static_slots=[
            _static(BindingState.ERROR, "slot 'config': Resource 'etc' not found"),
            _static(BindingState.ERROR, "second problem"),
        ],
    )
    s = tool_status(generation=2, tool=TOOL, validation=v, old={}, now=T0)
    assert s["staticSlotsValid"] is False
    assert s["staticSlots"][0] == {
        "name": "config",
        "resourceType": "fs-directory",
        "staticResource": "etc",
        "state": "Error",
        "message": "slot 'config': Resource 'etc' not found",
    }
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidStaticSlot")
    assert ready["message"] == "slot 'config': Resource 'etc' not found; second problem"


def test_tool_status_is_idempotent() -> None:
    v = ToolValidation(tool="team/git", static_slots=[_static(BindingState.ERROR, "x")])
    first = tool_status(generation=1, tool=TOOL, validation=v, old={}, now=T0)
    assert tool_status(generation=1, tool=TOOL, validation=v, old=first, now=T1) == first


# ------------------------------------------------------------------------------- resource types


def test_resource_type_status_valid() -> None:
    closure = TypeClosure(name="fs-directory", ancestors=["git-checkout", "path"])
    s = resource_type_status(generation=1, closure=closure, old={}, now=T0)
    assert s["ancestors"] == ["git-checkout", "path"]
    assert "cycle" not in s
    assert "unknownParents" not in s
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "True",
        "Valid",
        "2 ancestor type(s)",
    )


def test_resource_type_status_cycle() -> None:
    closure = TypeClosure(name="a", cycle=["a", "b", "a"])
    s = resource_type_status(generation=5, closure=closure, old={}, now=T0)
    assert s["cycle"] == ["a", "b", "a"]
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ParentCycle")
    assert ready["message"] == (
        "parentTypes form a cycle: a -> b -> a; remove one of these parentTypes entries"
    )
    assert ready["observedGeneration"] == 5


def test_resource_type_status_cycle_wins_over_unknown_parents() -> None:
    closure = TypeClosure(name="a", cycle=["a", "a"], unknown_parents=["ghost"])
    s = resource_type_status(generation=1, closure=closure, old={}, now=T0)
    assert cond(s["conditions"], "Ready")["reason"] == "ParentCycle"


def test_resource_type_status_unknown_parents() -> None:
    closure = TypeClosure(name="a", ancestors=["b"], unknown_parents=["ghost", "phantom"])
    s = resource_type_status(generation=1, closure=closure, old={}, now=T0)
    assert "cycle" not in s
    assert s["unknownParents"] == ["ghost", "phantom"]
    assert s["ancestors"] == ["b"]
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "UnknownParentType")
    assert ready["message"] == (
        "parentTypes names unregistered ResourceType(s): ghost, phantom; "
        "create them or fix spec.parentTypes"
    )


def test_resource_type_status_is_idempotent_and_transitions() -> None:
    bad = TypeClosure(name="a", cycle=["a", "a"])
    first = resource_type_status(generation=1, closure=bad, old={}, now=T0)
    assert resource_type_status(generation=1, closure=bad, old=first, now=T1) == first
    fixed = resource_type_status(generation=2, closure=TypeClosure(name="a"), old=first, now=T2)
    assert cond(fixed["conditions"], "Ready")["lastTransitionTime"] == T2
    assert "cycle" not in fixed


# ------------------------------------------------------------------------------- resources

HOLD = Hold(uri=URI, holder="team/alice", holder_uid="uid-alice", name="bindery-work-x")


def test_resource_status_valid_with_holder() -> None:
    s = resource_status(generation=4, errors=[], holder=HOLD, old={}, now=T0)
    assert s["valid"] is True
    assert s["holder"] == {"namespace": "team", "name": "alice", "uid": "uid-alice"}
    assert s["observedGeneration"] == 4
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("True", "Valid")


def test_resource_status_invalid_without_holder() -> None:
    s = resource_status(
        generation=1, errors=["bad scheme", "bad type"], holder=None, old={}, now=T0
    )
    assert s["valid"] is False
    assert "holder" not in s
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "InvalidResource",
        "bad scheme; bad type",
    )


def test_resource_status_is_idempotent() -> None:
    first = resource_status(generation=1, errors=["x"], holder=HOLD, old={}, now=T0)
    assert resource_status(generation=1, errors=["x"], holder=HOLD, old=first, now=T1) == first


# ------------------------------------------------------------------------------- kstatus rule


def _missing_slot() -> SlotResult:
    return SlotResult(
        tool="notes",
        slot="dir",
        mode=BindingMode.STATIC,
        access=Access.READ_ONLY,
        resource_type="fs-directory",
        state=BindingState.ERROR,
        message="agent team/alice, tool 'notes', slot 'dir': Resource team/dir does not exist",
        cause=ErrorCause.MISSING,
    )


def test_an_agent_missing_only_objects_is_reconciling_not_stalled() -> None:
    res = resolution().model_copy(update={"slots": [_missing_slot()], "missing_tools": ["ghost"]})
    s = status_for(WAITING, res=res, waiting_since=T1)
    # STATE says it waits (Pending), not that a person must fix it (Error, which is Stalled)
    assert s["state"] == PENDING_STATE == "Pending"
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MissingDependency")
    assert "does not exist" in ready["message"]
    assert "tool 'ghost'" in ready["message"]
    reconciling = cond(s["conditions"], "Reconciling")
    assert (reconciling["status"], reconciling["reason"]) == ("True", "MissingDependency")
    assert reconciling["message"] == ready["message"]
    stalled = cond(s["conditions"], "Stalled")
    assert (stalled["status"], stalled["reason"], stalled["message"]) == ("False", "Reconciled", "")


def test_one_conflict_among_missing_objects_stalls_the_agent_and_lists_everything() -> None:
    res = resolution(error=True)
    res = res.model_copy(update={"slots": [*res.slots, _missing_slot()]})
    s = status_for(IDLE, res=res)
    ready = cond(s["conditions"], "Ready")
    assert ready["reason"] == "BindingError"
    assert "no such Resource" in ready["message"]
    assert "does not exist" in ready["message"]
    assert cond(s["conditions"], "Stalled")["status"] == "True"
    assert s["state"] == ERROR_STATE
    assert cond(s["conditions"], "Reconciling")["status"] == "False"


def test_a_tool_whose_static_resource_is_missing_is_reconciling() -> None:
    missing = _static(BindingState.ERROR, "Resource team/etc does not exist").model_copy(
        update={"cause": ErrorCause.MISSING}
    )
    v = ToolValidation(tool="team/git", static_slots=[missing])
    s = tool_status(generation=2, tool=TOOL, validation=v, old={}, now=T0)
    assert s["staticSlotsValid"] is False
    assert cond(s["conditions"], "Ready")["reason"] == "MissingDependency"
    assert cond(s["conditions"], "Reconciling")["status"] == "True"
    assert cond(s["conditions"], "Stalled")["status"] == "False"


def test_a_tool_whose_other_slot_asks_for_an_unregistered_type_waits_for_it() -> None:
    """Valid static slots, and a contextual slot asking for a type nobody registered: the Tool is
    not Ready (MissingDependency, Reconciling: creating the type fixes it), its static slots
    stay valid."""
    v = ToolValidation(
        tool="team/git",
        static_slots=[_static(BindingState.BOUND, bound=True)],
        unregistered_slots=[
            _static(BindingState.ERROR, "its resourceType 'ghost' is not registered").model_copy(
                update={"cause": ErrorCause.MISSING, "slot": "repo", "resource_type": "ghost"}
            )
        ],
    )
    s = tool_status(generation=2, tool=TOOL, validation=v, old={}, now=T0)
    assert s["staticSlotsValid"] is True
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "MissingDependency")
    assert ready["message"] == "its resourceType 'ghost' is not registered"
    assert cond(s["conditions"], "Reconciling")["status"] == "True"
    assert cond(s["conditions"], "Stalled")["status"] == "False"


def test_a_tool_with_an_incompatible_static_resource_is_stalled() -> None:
    wrong = _static(BindingState.ERROR, "type 'issue' cannot fill it").model_copy(
        update={"cause": ErrorCause.CONFLICT}
    )
    v = ToolValidation(tool="team/git", static_slots=[wrong])
    s = tool_status(generation=2, tool=TOOL, validation=v, old={}, now=T0)
    assert cond(s["conditions"], "Ready")["reason"] == "InvalidStaticSlot"
    assert cond(s["conditions"], "Stalled")["status"] == "True"
    assert cond(s["conditions"], "Reconciling")["status"] == "False"


def test_a_type_cycle_stalls_and_an_unknown_parent_reconciles() -> None:
    cycle = resource_type_status(
        generation=1, closure=TypeClosure(name="a", cycle=["a", "a"]), old={}, now=T0
    )
    assert cond(cycle["conditions"], "Stalled")["reason"] == "ParentCycle"
    assert cond(cycle["conditions"], "Reconciling")["status"] == "False"
    orphan = resource_type_status(
        generation=1, closure=TypeClosure(name="a", unknown_parents=["ghost"]), old={}, now=T0
    )
    assert cond(orphan["conditions"], "Reconciling")["reason"] == "UnknownParentType"
    assert cond(orphan["conditions"], "Stalled")["status"] == "False"


def test_a_resource_whose_type_is_missing_reconciles_and_a_refused_scheme_stalls() -> None:
    missing = resource_status(
        generation=1,
        errors=[Problem("type 'ghost' is not registered", ErrorCause.MISSING)],
        holder=None,
        old={},
        now=T0,
    )
    assert cond(missing["conditions"], "Ready")["reason"] == "MissingDependency"
    assert cond(missing["conditions"], "Reconciling")["status"] == "True"
    refused = resource_status(
        generation=1,
        errors=[Problem("scheme 'https' refused", ErrorCause.CONFLICT)],
        holder=None,
        old={},
        now=T0,
    )
    assert cond(refused["conditions"], "Ready")["reason"] == "InvalidResource"
    assert cond(refused["conditions"], "Stalled")["status"] == "True"


@pytest.mark.parametrize(("progressing", "stalled"), [(True, True), (True, False), (False, True)])
def test_health_conditions_are_never_both_true_and_never_on_a_ready_object(
    progressing: bool, stalled: bool
) -> None:
    not_ready = condition("Ready", False, "Why", "what to do", 4)
    got = {
        c["type"]: c for c in health_conditions(not_ready, progressing=progressing, stalled=stalled)
    }
    assert got["Stalled"]["status"] == ("True" if stalled else "False")
    assert got["Reconciling"]["status"] == ("True" if progressing and not stalled else "False")
    assert all(c["observedGeneration"] == 4 for c in got.values())
    ready = condition("Ready", True, "Valid", "", 4)
    flags = health_conditions(ready, progressing=progressing, stalled=stalled)[1:]
    assert [(c["status"], c["reason"]) for c in flags] == [("False", "Reconciled")] * 2


# ------------------------------------------------------------------------------- session health


def _health_view(
    health: SessionHealth, running_generation: int | None, launched: int = 2
) -> SessionView:
    rt = RT
    plan = plan_launch(rt, launched, Launched(launched, trajectory_hash(rt)))
    return SessionView(plan, running_generation, plan.launched_hash, T0, health)


def test_a_session_whose_pod_was_refused_is_not_ready_and_stalled() -> None:
    refused = SessionHealth(SessionPhase.FAILING, "FailedCreate", "violates PodSecurity")
    s = status_for(IDLE, session=_health_view(refused, None))
    ready = cond(s["conditions"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "FailedCreate")
    assert "violates PodSecurity" in ready["message"]
    assert cond(s["conditions"], "Stalled")["status"] == "True"
    assert s["session"] == {
        "phase": "Failing",
        "reason": "FailedCreate",
        "message": "violates PodSecurity",
    }


def test_a_starting_session_is_reconciling_not_stalled() -> None:
    starting = SessionHealth(SessionPhase.STARTING, "ContainerCreating", "", "a-session-0")
    s = status_for(IDLE, session=_health_view(starting, None))
    assert cond(s["conditions"], "Ready")["status"] == "False"
    assert cond(s["conditions"], "Reconciling")["status"] == "True"
    assert cond(s["conditions"], "Stalled")["status"] == "False"


def test_launch_reads_the_old_generation_until_the_new_pod_runs() -> None:
    running = SessionHealth(SessionPhase.RUNNING, pod="a-session-0")
    old_pod = status_for(IDLE, session=_health_view(running, 1, launched=2))
    assert old_pod["launch"] == "1/2"
    assert cond(old_pod["conditions"], "Ready")["reason"] == "Relaunching"
    # Between the old pod's end and the new one's start, the last one that ran is shown.
    gap = SessionHealth(SessionPhase.STARTING, "PodNotCreated")
    between = status_for(IDLE, session=_health_view(gap, None, launched=2), old=old_pod)
    assert between["launch"] == "1/2"
    new_pod = status_for(IDLE, session=_health_view(running, 2, launched=2), old=between)
    assert new_pod["launch"] == "2/2"
    assert cond(new_pod["conditions"], "Ready")["status"] == "True"
    assert new_pod["launchedGeneration"] == 2


# ------------------------------------------------------------------------------- edges


def test_a_slot_lists_at_most_max_candidates_and_counts_the_rest() -> None:
    many = [
        Candidate(uri=f"file:///r{i:02}", type="fs-directory", reason="!= slot name 'repo'")
        for i in range(MAX_CANDIDATES + 5)
    ]
    slot = _ambiguous(many)
    (row,) = binding_rows(AgentResolution(agent=AGENT, slots=[slot]))
    assert [c["uri"] for c in row["candidates"]] == [c.uri for c in many[:MAX_CANDIDATES]]
    assert row["candidatesOmitted"] == 5


def test_an_invalid_spec_is_stalled_and_only_an_agent_shows_the_error_state() -> None:
    agent_like = invalid_status(4, "spec.tools: bad", {}, T0, state=True)
    assert agent_like["state"] == ERROR_STATE
    assert cond(agent_like["conditions"], "Stalled")["reason"] == "InvalidSpec"
    assert "state" not in invalid_status(4, "spec.tools: bad", {}, T0)


def test_a_pass_blocked_for_now_reads_pending_and_one_blocked_for_good_reads_error() -> None:
    old = {"state": "Idle", "bindingsConfigMap": "alice-bindings"}
    transient = blocked_status(4, old, T0, reason="ForeignObject", message="m", stalled=False)
    assert transient["state"] == PENDING_STATE
    assert cond(transient["conditions"], "Reconciling")["status"] == "True"
    assert transient["bindingsConfigMap"] == "alice-bindings"
    lasting = blocked_status(4, old, T0, reason="ForeignObject", message="m")
    assert lasting["state"] == ERROR_STATE
    assert cond(lasting["conditions"], "Stalled")["status"] == "True"


def test_a_session_counts_as_running_unless_its_pod_is_seen_not_to() -> None:
    plan = plan_launch(RT, 1, Launched(1, trajectory_hash(RT)))
    assert SessionView(plan, 1, plan.launched_hash, T0).running
    failing = SessionHealth(SessionPhase.FAILING, "CrashLoopBackOff")
    assert not SessionView(plan, 1, plan.launched_hash, T0, failing).running


@pytest.mark.parametrize(
    ("notice", "reason"),
    [(LaunchNotice.UNKNOWN, "LaunchUnknown"), (LaunchNotice.EDITED, "LaunchRecordEdited")],
)
def test_a_launch_record_bindery_cannot_trust_asks_for_a_relaunch(
    notice: LaunchNotice, reason: str
) -> None:
    plan = replace(plan_launch(RT, 2, Launched(2, trajectory_hash(RT))), notice=notice)
    s = status_for(IDLE, session=SessionView(plan, 2, plan.launched_hash, T0))
    relaunch = cond(s["conditions"], "RelaunchRequired")
    assert (relaunch["status"], relaunch["reason"]) == ("True", reason)
    assert relaunch["message"].endswith(
        "change spec.relaunchGeneration to relaunch the session with spec.runtime"
    )


def test_the_session_workspace_claim_is_reported_in_status() -> None:
    h = trajectory_hash(RT)
    without = status_for(IDLE, session=_session(RT, 2, Launched(2, h, T0)))
    assert "workspace" not in without
    claim = {
        "metadata": {"name": "alice-workspace"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}},
    }
    view = WorkspaceView(claim, Workspace(size="1Gi"))
    session = replace(_session(RT, 2, Launched(2, h, T0)), workspace=view)
    s = status_for(IDLE, session=session)
    assert s["workspace"] == {
        "claimName": "alice-workspace",
        "phase": "Bound",
        "capacity": "1Gi",
        "reclaimPolicy": "Delete",
    }
