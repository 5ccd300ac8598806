"""Status tells the truth about the session, on the real API server.

A session refused by Pod Security, a crash loop, an image that cannot be pulled and a container
killed for memory each show in the agent's status with their cause; LAUNCH reads N-1/N until the
relaunched pod runs; an edited launch annotation never disables relaunching. kwok plays the
kubelet: pods become Running at once, and a test writes the pod status a real kubelet would
(as `crash_loop` does) for the failures kwok does not simulate.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.argocd_health import argo_health
from tests.integration.kstatus import kstatus_of
from tests.integration.kube import agent, apply, condition, get, must_get, ready, wait_status
from tests.integration.sessions_helpers import (
    apply_types,
    crash_loop,
    hold_exit,
    pod_name,
    release_exit,
    running_pod,
    runtime,
    session_name,
    uid,
)
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/9"}


def session_says(reason: str, *, stalled: bool) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        st = obj.get("status") or {}
        return bool(
            condition(obj, "Ready").get("status") == "False"
            and condition(obj, "Ready").get("reason") == reason
            and condition(obj, "Stalled").get("status") == ("True" if stalled else "False")
            and (st.get("session") or {}).get("reason") == reason
        )

    return check


def _set_container_status(
    cluster: Cluster, namespace: str, pod: dict[str, Any], state: dict[str, Any], **extra: Any
) -> None:
    """Write the container status a real kubelet would (kwok leaves a Running pod's alone)."""
    current = must_get(cluster, "pod", namespace, pod["metadata"]["name"])
    conditions = [
        {**c, "status": "False"} if c["type"] in ("Ready", "ContainersReady") else c
        for c in current["status"]["conditions"]
    ]
    containers = [
        {**c, "ready": False, "started": False, "state": state, **extra}
        for c in current["status"]["containerStatuses"]
    ]
    patch = {"status": {"conditions": conditions, "containerStatuses": containers}}
    cluster.kubectl(
        "patch", "pod", "-n", namespace, pod["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps(patch),
    )  # fmt: skip


def test_a_session_refused_by_pod_security_is_stalled_with_the_reason(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )  # fmt: skip
    apply_types(cluster)
    escalating = runtime(containerSecurityContext={"allowPrivilegeEscalation": True})
    apply(cluster, namespace, agent("loose", resources=[NOTES], runtime=escalating))
    obj = wait_status(
        cluster, "agentspec", namespace, "loose", session_says("FailedCreate", stalled=True)
    )
    assert "violates PodSecurity" in condition(obj, "Ready")["message"]
    assert obj["status"]["session"]["phase"] == "Failing"
    assert obj["status"]["launch"].startswith("-/")  # nothing ever ran
    # The row "a session refused by policy" of the semantics table, as GitOps tools read it.
    assert kstatus_of([obj])[0]["status"] == "Failed"
    assert argo_health(obj)["status"] == "Degraded"


FAILURES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("CrashLoopBackOff", {"waiting": {"reason": "CrashLoopBackOff"}}, {}),
    (
        "ImagePullBackOff",
        {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
        {},
    ),
    (
        "OOMKilled",
        {"waiting": {"reason": "CrashLoopBackOff"}},
        {"lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}},
    ),
]


@pytest.mark.parametrize("failure", FAILURES, ids=[f[0] for f in FAILURES])
def test_a_failing_session_pod_shows_its_cause_and_recovers(
    cluster: Cluster,
    namespace: str,
    controller: ControllerProcess,
    failure: tuple[str, dict[str, Any], dict[str, Any]],
) -> None:
    reason, state, last = failure
    apply_types(cluster)
    apply(cluster, namespace, agent("s", resources=[NOTES], runtime=runtime()))
    wait_status(cluster, "agentspec", namespace, "s", ready)
    pod = running_pod(cluster, namespace, "s")
    _set_container_status(cluster, namespace, pod, state, restartCount=5, **last)
    obj = wait_status(
        cluster, "agentspec", namespace, "s", session_says(reason, stalled=True), timeout=15
    )
    assert obj["status"]["session"]["restarts"] == 5
    assert obj["status"]["session"]["pod"] == pod_name("s")
    assert kstatus_of([obj])[0]["status"] == "Failed"  # a crash loop: Stalled
    assert argo_health(obj)["status"] == "Degraded"
    # The pod is replaced (a new one runs): the agent is Ready again.
    cluster.kubectl("delete", "pod", pod_name("s"), "-n", namespace, "--wait=false")
    running_pod(cluster, namespace, "s", not_uid=uid(pod))
    wait_status(cluster, "agentspec", namespace, "s", ready)


def test_a_crash_loop_written_by_the_shared_helper_is_reported(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_types(cluster)
    apply(cluster, namespace, agent("c", resources=[NOTES], runtime=runtime()))
    wait_status(cluster, "agentspec", namespace, "c", ready)
    crash_loop(cluster, namespace, running_pod(cluster, namespace, "c"))
    wait_status(
        cluster, "agentspec", namespace, "c", session_says("CrashLoopBackOff", stalled=True)
    )


def test_launch_reads_n_minus_one_until_the_relaunched_pod_runs(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_types(cluster)
    apply(cluster, namespace, agent("r", resources=[NOTES], runtime=runtime(), relaunch=1))
    wait_status(cluster, "agentspec", namespace, "r", lambda o: o["status"].get("launch") == "1/1")
    old = running_pod(cluster, namespace, "r")
    hold_exit(cluster, namespace, old)  # the old pod takes its time to stop, as a kubelet's would
    try:
        apply(cluster, namespace, agent("r", resources=[NOTES], runtime=runtime(), relaunch=2))
        pending = wait_status(
            cluster,
            "agentspec",
            namespace,
            "r",
            lambda o: o["status"].get("desiredLaunchGeneration") == 2,
        )
        assert pending["status"]["launch"] == "1/2"
        assert condition(pending, "Ready")["status"] == "False"
        # The row "a session starting": in progress, not failed.
        assert kstatus_of([pending])[0]["status"] == "InProgress"
        assert argo_health(pending)["status"] == "Progressing"
    finally:
        release_exit(cluster, namespace, old)
    running_pod(cluster, namespace, "r", not_uid=uid(old))
    done = wait_status(
        cluster, "agentspec", namespace, "r", lambda o: o["status"].get("launch") == "2/2"
    )
    assert condition(done, "Ready")["status"] == "True"
    assert kstatus_of([done])[0]["status"] == "Current"
    assert argo_health(done)["status"] == "Healthy"


def test_an_edited_launch_annotation_never_disables_relaunching(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_types(cluster)
    apply(cluster, namespace, agent("e", resources=[NOTES], runtime=runtime(), relaunch=5))
    wait_status(cluster, "agentspec", namespace, "e", lambda o: o["status"].get("launch") == "5/5")
    key = "bindery.dev/launch-generation"
    patch = {
        "metadata": {"annotations": {key: "99"}},
        "spec": {"template": {"metadata": {"annotations": {key: "99"}}}},
    }
    sts = session_name("e")
    cluster.kubectl(
        "patch", "statefulset", sts, "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    edited = wait_status(
        cluster,
        "agentspec",
        namespace,
        "e",
        lambda o: condition(o, "RelaunchRequired").get("reason") == "LaunchRecordEdited",
    )
    assert edited["status"]["launchedGeneration"] == 5
    assert condition(edited, "RelaunchRequired")["status"] == "True"
    before = running_pod(cluster, namespace, "e")
    apply(cluster, namespace, agent("e", resources=[NOTES], runtime=runtime(), relaunch=6))
    wait_status(cluster, "agentspec", namespace, "e", lambda o: o["status"].get("launch") == "6/6")
    after = running_pod(cluster, namespace, "e", not_uid=uid(before))
    assert after["metadata"]["annotations"][key] == "6"
    relaunched = must_get(cluster, "statefulset", namespace, sts)
    assert relaunched["spec"]["template"]["metadata"]["annotations"][key] == "6"
    wait_for(
        lambda: (
            condition(get(cluster, "agentspec", namespace, "e"), "RelaunchRequired").get("status")
            == "False"
        ),
        timeout=30,
        what="RelaunchRequired to clear",
    )
