"""Suspend and resume on a real kubelet (issue 29): the process stops while the agent is idle,
and a new work binding starts it again with the same launch, which applies the work."""

from __future__ import annotations

import time
from typing import Any

import pytest

from harness import probe
from tests.integration.kube import agent, apply, get, wait_status, work
from tests.integration.sessions_helpers import apply_types, events, pod_name, running_pod
from tests.node.test_sessions import container, delivered, diagnosis, started
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = [pytest.mark.node, pytest.mark.compat]

SUSPEND_AFTER = 20
"""Long enough for the first container to start on a busy node before the agent counts as idle
long enough (the clock runs from the launch of an agent that has no work)."""


def suspended(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    return st.get("state") == "Suspended" and (st.get("session") or {}).get("phase") == "Suspended"


def test_an_idle_session_is_suspended_then_resumed_with_the_same_launch_on_new_work(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    apply_types(cluster)
    uri = "github-issue://acme/app/29"
    idle = {"suspendAfterSeconds": SUSPEND_AFTER}
    spec = agent("dev", runtime=probe.runtime(idle=idle), relaunch=1)
    apply(cluster, namespace, spec)
    first = running_pod(cluster, namespace, "dev", timeout=120)
    started(cluster, namespace, "dev", lambda a: a.fields["work"] is None)
    first_container = wait_for(
        lambda: container(get(cluster, "pod", namespace, pod_name("dev")) or {}).get("containerID"),
        what="the first container's ID",
    )

    idle_at = time.time()
    obj = wait_status(cluster, "agentspec", namespace, "dev", suspended, timeout=90)
    # The pod object goes only once the kubelet has stopped its containers: none is left.
    wait_for(
        lambda: get(cluster, "pod", namespace, pod_name("dev")) is None,
        timeout=120,
        what="the suspended session's pod (and its containers) to be gone",
    )
    print(f"\nsuspended {time.time() - idle_at:.1f} s after the process started idle")
    launch = obj["status"]["launch"]

    changed_at = time.time()
    spec["spec"]["resources"] = [work(uri)]
    apply(cluster, namespace, spec)
    pod = running_pod(cluster, namespace, "dev", not_uid=first["metadata"]["uid"], timeout=120)
    seen = started(cluster, namespace, "dev", lambda a: a.fields["work"] == uri, timeout=150)
    latency = seen.t - changed_at
    print(f"resume: work binding added -> applied in the resumed session: {latency:.2f} s")
    assert pod["metadata"]["annotations"]["bindery.dev/launch-generation"] == "1"
    try:
        applied = wait_status(cluster, "agentspec", namespace, "dev", delivered(seen), timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(cluster, namespace, 'dev')}") from exc
    st = applied["status"]
    assert st["delivery"]["podUID"] == pod["metadata"]["uid"]
    assert (st["launch"], launch) == ("1/1", "1/1")
    assert st["state"] == "Working"
    assert events(cluster, namespace, "dev", "Relaunched") == 0
    now = get(cluster, "pod", namespace, pod_name("dev")) or {}
    assert container(now).get("containerID") not in ("", None, first_container)
