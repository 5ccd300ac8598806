"""A GitOps revert of a relaunch: apply, raise relaunchGeneration, revert the commit (lowering it
again), with the real controller. Each change relaunches exactly once, and the agent converges
on what Git says."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.kube import apply, condition, must_get, settle, wait_status
from tests.integration.sessions_helpers import (
    IMAGE_A,
    IMAGE_B,
    LAUNCH_GENERATION,
    TRAJECTORY_HASH,
    PodWatch,
    events,
    image,
    launched,
    pods,
    running_pod,
    session_name,
    uid,
)
from tests.integration.test_sessions import _launched_session, _session
from tests.support import (
    AuditedWrite,
    Cluster,
    ControllerProcess,
    audit_mark,
    audited_writes,
    wait_for,
)

pytestmark = pytest.mark.integration


def _pod_changes(writes: list[AuditedWrite]) -> list[tuple[str, str]]:
    """(verb, user agent) of every pod created or deleted, in the audit log's order."""
    return [
        (w.verb, w.user_agent)
        for w in writes
        if w.resource == "pods"
        and not w.subresource
        and w.verb in ("create", "delete")
        and w.code < 300
    ]


def _one_relaunch(
    cluster: Cluster, namespace: str, old: dict[str, Any], commit: dict[str, Any], to: int
) -> dict[str, Any]:
    """Apply ``commit`` (as a GitOps sync would, server-side); check it replaced the session pod
    exactly once, never two at a time, and that nothing else happens afterwards."""
    relaunches = events(cluster, namespace, "s", "Relaunched")
    mark = audit_mark(cluster)
    with PodWatch(cluster, namespace, "s") as seen:
        apply(cluster, namespace, commit)
        obj = wait_status(cluster, "agentspec", namespace, "s", launched(to), timeout=60)
        new = running_pod(cluster, namespace, "s", not_uid=uid(old))
        wait_for(lambda: seen.running() == {uid(new)}, what="the watch to see the new pod")
        settle(cluster, namespace)
    assert seen.overlaps == [], f"two session pods at once: {seen.overlaps}"
    # Replaced once: one pod made, whoever deleted what. A successor deleted before it ever ran
    # escapes the watch's Running pods, not the audit log.
    changes = _pod_changes(audited_writes(cluster, namespace, mark))
    assert [verb for verb, _ in changes].count("create") == 1, changes
    assert seen.ran == [uid(old), uid(new)], seen.ran
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(new)]
    wait_for(
        lambda: events(cluster, namespace, "s", "Relaunched") == relaunches + 1,
        what="one Relaunched event",
    )
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations[LAUNCH_GENERATION] == str(to)
    assert annotations[TRAJECTORY_HASH] == obj["status"]["launchedTrajectoryHash"]
    assert new["metadata"]["annotations"][LAUNCH_GENERATION] == str(to)
    assert condition(obj, "RelaunchRequired")["status"] == "False"
    return new


def test_a_reverted_relaunch_relaunches_once_more_and_converges(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    base = _session(image_=IMAGE_A, relaunch=1)  # commit 1
    _, first = _launched_session(cluster, namespace, base)
    first_hash = must_get(cluster, "agentspec", namespace, "s")["status"]["launchedTrajectoryHash"]

    bump = _session(image_=IMAGE_B, relaunch=2)  # commit 2: new image, generation raised
    second = _one_relaunch(cluster, namespace, first, bump, 2)
    assert image(second) == IMAGE_B

    # `git revert` of commit 2: the generation goes back down to 1, the image back to A. The API
    # server accepts it, and the controller relaunches once with what Git now says.
    third = _one_relaunch(cluster, namespace, second, base, 1)
    assert image(third) == IMAGE_A
    reverted = must_get(cluster, "agentspec", namespace, "s")
    assert reverted["spec"]["relaunchGeneration"] == 1
    assert reverted["status"]["launchedTrajectoryHash"] == first_hash
    assert reverted["status"]["launch"] == "1/1"

    # Converged: re-applying the same commit (a GitOps resync) changes nothing.
    apply(cluster, namespace, base)
    settle(cluster, namespace)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(third)]
    assert events(cluster, namespace, "s", "Relaunched") == 2
    assert events(cluster, namespace, "s", "Launched") == 1
