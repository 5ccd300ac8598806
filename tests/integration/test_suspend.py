"""Suspending idle sessions and resuming them (issue 29), against the real control plane.

An agent with ``spec.runtime.idle.suspendAfterSeconds`` whose session has had no work for that
long is scaled to zero (no pod; the kwok node runs the pods here); status, kstatus and the Argo
CD health script read it as healthy; a work binding resumes it with the launch it had.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import pytest

from tests.argocd_health import argo_health
from tests.integration.kstatus import kstatus
from tests.integration.kube import (
    agent,
    apply,
    bindings_document,
    condition,
    must_get,
    ready,
    settle,
    wait_status,
    work,
)
from tests.integration.sessions_helpers import (
    IMAGE_A,
    IMAGE_B,
    LAUNCH_GENERATION,
    apply_types,
    drifted,
    events,
    image,
    launched,
    pods,
    running_pod,
    runtime,
    session_name,
    uid,
)
from tests.support import Cluster, ControllerProcess, audit_mark, controller_writes, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/29"}
WORK = work("github-issue://example/project/29")


def _idle(seconds: int = 3, *, has_work: bool = False, image_: str = IMAGE_A) -> dict[str, Any]:
    resources = [NOTES, WORK] if has_work else [NOTES]
    idle = {"suspendAfterSeconds": seconds}
    return agent("s", resources=resources, runtime=runtime(image_, idle=idle), relaunch=1)


def suspended(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    return bool(
        st.get("observedGeneration") == obj["metadata"]["generation"]
        and st.get("state") == "Suspended"
        and (st.get("session") or {}).get("phase") == "Suspended"
    )


def replicas(cluster: Cluster, namespace: str) -> int:
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    return int(sts["spec"]["replicas"])


def no_pod_left(cluster: Cluster, namespace: str) -> None:
    wait_for(lambda: not pods(cluster, namespace, "s"), timeout=60, what="no session pod left")


def _stamp(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _suspend(cluster: Cluster, namespace: str, seconds: int = 3) -> tuple[dict[str, Any], ...]:
    """Launch an idle agent ``s``; wait for its suspension; (agent before, agent after,
    StatefulSet before)."""
    apply_types(cluster)
    apply(cluster, namespace, _idle(seconds))
    before = wait_status(cluster, "agentspec", namespace, "s", launched(1), what="s launched")
    running_pod(cluster, namespace, "s")
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    after = wait_status(
        cluster, "agentspec", namespace, "s", suspended, timeout=seconds + 30, what="suspended"
    )
    return before, after, sts


def test_an_idle_session_is_suspended_after_its_policy_seconds_and_reads_healthy(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    before, obj, sts = _suspend(cluster, namespace, seconds=3)
    no_pod_left(cluster, namespace)
    settle(cluster, namespace)
    obj = must_get(cluster, "agentspec", namespace, "s")
    st = obj["status"]
    assert suspended(obj), st  # no pod: still Suspended, not Starting
    idle_since = st["session"]["idleSince"]
    assert _stamp(idle_since) <= _stamp(condition(obj, "Suspended")["lastTransitionTime"]) - 2
    assert ready(obj)
    assert condition(obj, "Ready")["reason"] == "Suspended"
    assert condition(obj, "Suspended")["status"] == "True"
    assert condition(obj, "Stalled")["status"] == "False"
    assert condition(obj, "Reconciling")["status"] == "False"
    assert kstatus(cluster, "agentspec", namespace, "s")["status"] == "Current"
    assert argo_health(obj)["status"] == "Healthy"
    for key in ("launchedGeneration", "launchedTrajectoryHash", "lastLaunchTime"):
        assert st[key] == before["status"][key], key
    now = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert now["spec"]["replicas"] == 0
    assert now["spec"]["template"] == sts["spec"]["template"]  # scaled, not relaunched
    columns = cluster.kubectl("get", "agentspec", "-n", namespace, "s").stdout
    assert "Suspended" in columns.splitlines()[1], columns
    assert events(cluster, namespace, "s", "Relaunched") == 0


def test_a_work_binding_resumes_the_same_launch_and_drift_while_suspended_stays_drift(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    before, _, sts = _suspend(cluster, namespace)
    no_pod_left(cluster, namespace)
    launched_hash = before["status"]["launchedTrajectoryHash"]

    apply(cluster, namespace, _idle(image_=IMAGE_B))  # the runtime changes while suspended
    obj = wait_status(cluster, "agentspec", namespace, "s", drifted, what="drift while suspended")
    assert suspended(obj), obj["status"]
    assert condition(obj, "RelaunchRequired")["reason"] == "TrajectoryChanged"
    assert replicas(cluster, namespace) == 0

    apply(cluster, namespace, _idle(has_work=True, image_=IMAGE_B))  # work arrives
    obj = wait_status(
        cluster,
        "agentspec",
        namespace,
        "s",
        lambda o: (o.get("status") or {}).get("state") == "Working",
        what="s holds its work",
    )
    pod = running_pod(cluster, namespace, "s", timeout=60)
    assert image(pod) == IMAGE_A  # the launched trajectory, not the drifted spec
    assert pod["metadata"]["annotations"][LAUNCH_GENERATION] == "1"
    now = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert now["spec"]["replicas"] == 1
    assert now["spec"]["template"] == sts["spec"]["template"]
    document = bindings_document(cluster, namespace, "s")
    assert document is not None
    assert WORK["uri"] in str(document)
    obj = wait_status(cluster, "agentspec", namespace, "s", drifted, what="still drifted")
    st = obj["status"]
    assert (st["launch"], st["launchedTrajectoryHash"]) == ("1/1", launched_hash)
    assert "idleSince" not in st["session"]
    assert condition(obj, "Suspended")["status"] == "False"
    assert events(cluster, namespace, "s", "Relaunched") == 0

    # Losing the work again: released, then idle, then suspended once more.
    apply(cluster, namespace, _idle(image_=IMAGE_B))
    wait_status(cluster, "agentspec", namespace, "s", suspended, timeout=40, what="re-suspended")
    no_pod_left(cluster, namespace)
    assert uid(must_get(cluster, "statefulset", namespace, session_name("s"))) == uid(sts)


def test_a_restarted_controller_keeps_the_idle_clock_and_a_suspended_session_suspended(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_types(cluster)
    apply(cluster, namespace, _idle(seconds=5))
    obj = wait_status(
        cluster,
        "agentspec",
        namespace,
        "s",
        lambda o: bool(((o.get("status") or {}).get("session") or {}).get("idleSince")),
        what="the idle clock recorded",
    )
    idle_since = obj["status"]["session"]["idleSince"]
    controller.kill()
    time.sleep(6)  # due while the controller is down
    assert replicas(cluster, namespace) == 1
    controller.start()
    obj = wait_status(cluster, "agentspec", namespace, "s", suspended, timeout=30)
    assert obj["status"]["session"]["idleSince"] == idle_since  # not restarted by the restart
    no_pod_left(cluster, namespace)
    settle(cluster, namespace)

    controller.kill()
    mark = audit_mark(cluster)
    controller.start()
    time.sleep(4)
    writes = controller_writes(cluster, namespace, mark)
    assert not [w for w in writes if w.resource == "statefulsets"], writes
    obj = must_get(cluster, "agentspec", namespace, "s")
    assert suspended(obj), obj["status"]
    assert obj["status"]["session"]["idleSince"] == idle_since
    assert replicas(cluster, namespace) == 0
    assert pods(cluster, namespace, "s") == []
