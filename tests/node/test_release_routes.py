"""A work hold outlives its holder's real session process, whatever happens to the agent or its
StatefulSet (real kubelet, containerd, the delivery sidecar).

The holder's runtime is slow to stop (it ignores SIGTERM, so the kubelet's grace period runs
out before its pod goes) and never lets go of a document that gave it work. Two routes used to
hand the work to the waiting agent while that process still ran: the holder's finalizer removed
by hand, and its StatefulSet deleted with ``--cascade=orphan`` while it was Releasing. The
waiting agent's process must apply the work only after the holder's pod is gone.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from harness import probe
from tests.integration.kube import agent, apply, get, wait_status, work
from tests.integration.sessions_helpers import apply_types, pod_name, running_pod, session_name
from tests.node.test_sessions import started
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = [pytest.mark.node]

STUBBORN = r"""
import json, os, signal, time
from bindery_session import BindingsWatcher

def out(**fields):
    print(json.dumps({"t": time.time(), **fields}), flush=True)

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # slow to stop: the grace period runs out
out(event="started", pod=os.environ.get("HOSTNAME", ""))
for bindings in BindingsWatcher(interval=0.02, acknowledge=True).changes():
    out(event="applied", work=bindings.work.uri if bindings.work else None)
    if bindings.work is not None:
        time.sleep(100000)  # busy with its work: never takes up, nor acknowledges, the next
"""
"""A runtime that holds on to the first document giving it work (a session started without
work acknowledges every document, as the session library does)."""


def holder_and_waiter(cluster: Cluster, namespace: str, uri: str) -> dict[str, Any]:
    """Agent a holds ``uri`` in a stubborn session; b's session runs and waits. a's pod."""
    apply_types(cluster)
    apply(cluster, namespace, agent("a", resources=[work(uri)], runtime=probe.runtime(STUBBORN)))
    started(cluster, namespace, "a", lambda x: x.fields["work"] == uri)
    pod = running_pod(cluster, namespace, "a", timeout=120)
    apply(cluster, namespace, agent("b", resources=[work(uri)], runtime=probe.runtime()))
    started(cluster, namespace, "b", lambda x: x.fields["work"] is None)
    return pod


def last_seen(cluster: Cluster, namespace: str, pod: dict[str, Any], uri: str) -> float:
    """Watch ``pod`` until it is gone or terminal (its containers stopped); the last time it was
    seen running. Meanwhile b's process never applies ``uri``."""
    seen = time.time()
    deadline = seen + 180
    while time.time() < deadline:
        now = time.time()
        current = get(cluster, "pod", namespace, pod["metadata"]["name"])
        if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
            return seen
        if (current.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return seen  # its containers have stopped: the session no longer runs
        seen = now
        # The pod was there when read, after ``now``: b applying the work before ``now`` is
        # b working beside a. (Read next, b's log may already show the work applied after the
        # pod went in between: that is the handoff, judged by the caller.)
        got = probe.applied(cluster.kubectl, namespace, pod_name("b"))
        early = [a.t for a in got if a.fields["work"] == uri and a.t <= now]
        assert not early, f"b got the work at {early} while a's pod ran (seen at {now})"
        time.sleep(0.5)
    raise AssertionError("a's old pod never went")


def test_a_holder_whose_finalizer_is_removed_keeps_the_work_until_its_process_is_gone(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    uri = "github-issue://acme/app/21"
    pod = holder_and_waiter(cluster, namespace, uri)
    cluster.kubectl("delete", "agentspec", "a", "-n", namespace, "--wait=false")
    wait_for(
        lambda: (
            (get(cluster, "pod", namespace, pod_name("a")) or {})
            .get("metadata", {})
            .get("deletionTimestamp")
        ),
        timeout=60,
        what="a's session to be stopping",
    )
    cluster.kubectl(
        "patch", "agentspec", "a", "-n", namespace, "--type=json",
        "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
    )  # fmt: skip
    wait_for(lambda: get(cluster, "agentspec", namespace, "a") is None, what="a to be gone")
    gone = last_seen(cluster, namespace, pod, uri)
    got = started(cluster, namespace, "b", lambda x: x.fields["work"] == uri, timeout=120)
    print(f"\nfinalizer removed: b applied the work {got.t - gone:.2f} s after a's pod went")
    assert got.t > gone, "b applied the work while a's pod still existed"


def test_a_releasing_holders_orphaned_session_keeps_the_work_until_its_process_is_gone(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    uri = "github-issue://acme/app/22"
    pod = holder_and_waiter(cluster, namespace, uri)
    apply(cluster, namespace, agent("a", resources=[], runtime=probe.runtime(STUBBORN)))
    wait_status(
        cluster,
        "agentspec",
        namespace,
        "a",
        lambda o: (o.get("status") or {}).get("state") == "Releasing",
    )
    cluster.kubectl(
        "delete", "statefulset", session_name("a"), "-n", namespace, "--cascade=orphan",
        "--wait=false",
    )  # fmt: skip
    gone = last_seen(cluster, namespace, pod, uri)
    got = started(cluster, namespace, "b", lambda x: x.fields["work"] == uri, timeout=180)
    print(f"\nStatefulSet orphaned: b applied the work {got.t - gone:.2f} s after a's pod went")
    assert got.t > gone, "b applied the work while a's old pod still existed"
    successor = running_pod(cluster, namespace, "a", not_uid=pod["metadata"]["uid"], timeout=120)
    applied = wait_for(  # Running is before its process applied its first document
        lambda: probe.applied(cluster.kubectl, namespace, successor["metadata"]["name"]),
        timeout=60,
        interval=0.5,
        what="a's new session to apply its first document",
    )
    assert all(a.fields["work"] is None for a in applied), applied
