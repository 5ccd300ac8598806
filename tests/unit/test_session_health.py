"""Session health from a pod (pure): running, starting, and the failures a person must fix."""

from __future__ import annotations

from typing import Any

import pytest

from controller.domain.session_health import SessionPhase, session_health


def pod(
    phase: str = "Running",
    *,
    ready: bool = True,
    waiting: str = "",
    last: str = "",
    restarts: int = 0,
    scheduled: dict[str, str] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    state: dict[str, Any] = (
        {"waiting": {"reason": waiting, "message": f"{waiting} detail"}}
        if waiting
        else {"running": {}}
    )
    container: dict[str, Any] = {"name": "agent", "state": state, "restartCount": restarts}
    if last:
        container["lastState"] = {"terminated": {"reason": last}}
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if scheduled:
        conditions.append({"type": "PodScheduled", **scheduled})
    md: dict[str, Any] = {"name": "a-session-0"}
    if deleting:
        md["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {
        "metadata": md,
        "status": {"phase": phase, "conditions": conditions, "containerStatuses": [container]},
    }


def test_a_ready_running_pod_runs() -> None:
    h = session_health(pod())
    assert h.running
    assert h.as_status() == {"phase": "Running", "pod": "a-session-0"}


def test_no_pod_is_starting_unless_its_creation_was_refused() -> None:
    assert session_health(None).phase is SessionPhase.STARTING
    refused = session_health(None, 'pods "a-session-0" is forbidden: violates PodSecurity')
    assert refused.stalled
    assert refused.reason == "FailedCreate"
    assert "PodSecurity" in refused.message


@pytest.mark.parametrize(
    ("waiting", "last", "reason"),
    [
        ("ImagePullBackOff", "", "ImagePullBackOff"),
        ("ErrImagePull", "", "ErrImagePull"),
        ("CrashLoopBackOff", "Error", "CrashLoopBackOff"),
        ("CrashLoopBackOff", "OOMKilled", "OOMKilled"),
        ("CreateContainerConfigError", "", "CreateContainerConfigError"),
    ],
)
def test_failures_a_person_must_fix_are_failing(waiting: str, last: str, reason: str) -> None:
    h = session_health(
        pod(
            "Pending" if "Pull" in waiting else "Running",
            ready=False,
            waiting=waiting,
            last=last,
            restarts=4,
        )
    )
    assert h.stalled
    assert h.reason == reason
    assert h.restarts == 4
    assert h.as_status()["restarts"] == 4


def test_unschedulable_and_not_ready_and_terminating_are_starting() -> None:
    unscheduled = session_health(
        pod(
            "Pending",
            ready=False,
            scheduled={"status": "False", "reason": "Unschedulable", "message": "0/1 nodes match"},
        )
    )
    assert (unscheduled.phase, unscheduled.reason) == (SessionPhase.STARTING, "Unschedulable")
    assert "0/1 nodes" in unscheduled.message
    not_ready = session_health(pod(ready=False))
    assert (not_ready.phase, not_ready.reason) == (SessionPhase.STARTING, "NotReady")
    creating = session_health(pod("Pending", ready=False, waiting="ContainerCreating"))
    assert (creating.phase, creating.reason) == (SessionPhase.STARTING, "ContainerCreating")
    old = session_health(pod(deleting=True))
    assert (old.phase, old.reason) == (SessionPhase.STARTING, "Terminating")


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_a_pod_that_has_ended_is_failing_with_its_phase(phase: str) -> None:
    health = session_health(pod(phase, ready=False))
    assert health.phase is SessionPhase.FAILING
    assert health.reason == phase
    assert health.message == f"the session pod has ended ({phase})"
    evicted = pod("Failed", ready=False)
    evicted["status"] |= {"reason": "Evicted", "message": "the node was low on memory"}
    assert (session_health(evicted).reason, session_health(evicted).message) == (
        "Evicted",
        "the node was low on memory",
    )


def exited(code: int, restarts: int, reason: str = "Error") -> dict[str, Any]:
    """A Running pod whose container's current state is its exit (between the kubelet's
    reports of a crash and of the back-off that follows)."""
    p = pod(ready=False, restarts=restarts)
    container = p["status"]["containerStatuses"][0]
    container["state"] = {"terminated": {"reason": reason, "exitCode": code}}
    container["lastState"] = {"terminated": {"reason": reason, "exitCode": code}}
    return p


def test_a_container_that_exits_again_after_restarts_is_failing_with_the_kubelets_word() -> None:
    h = session_health(exited(1, restarts=5))
    assert h.stalled
    assert h.reason == "Error"
    assert "exited with code 1 after 5 restarts" in h.message
    assert session_health(exited(137, restarts=2, reason="OOMKilled")).reason == "OOMKilled"


def test_a_first_exit_or_a_clean_one_is_not_yet_a_crash_loop() -> None:
    assert not session_health(exited(1, restarts=0)).stalled
    assert not session_health(exited(0, restarts=3, reason="Completed")).stalled
