"""A work hold outlives its holder's session, whatever happens to the agent or its StatefulSet
(real API server, kube-controller-manager's garbage collector and StatefulSet controller, the
kwok node's pods).

Two routes used to release a hold while the old session still ran:

- the agent's finalizer removed by hand (at an uninstall): the controller released the vanished
  agent's hold as soon as the API server confirmed the agent gone;
- the session StatefulSet deleted with ``--cascade=orphan`` while the agent was Releasing: the
  orphaned pod no longer counted as the session (an owner check), and the recreated
  StatefulSet adopted that same pod, which never acknowledged.

The controller now finds an agent's session pods by their labels. Here the waiting agent must
not get the work while the old pod exists (kwok deletes a pod at once, so a finalizer stands in
for a real kubelet's grace period), and gets it once the pod is gone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.domain import acknowledgement as ack
from controller.domain.names import ack_lease_name, bindings_config_map_name
from tests.integration.kube import (
    agent,
    apply,
    apply_examples,
    get,
    must_get,
    state,
    wait_status,
    work,
)
from tests.integration.sessions_helpers import (
    hold_exit,
    pod_name,
    release_exit,
    running_pod,
    runtime,
    session_name,
    terminating,
    uid,
)
from tests.integration.test_work import URI, DeliveryWatcher, deliveries, holder_of
from tests.support import Cluster, ControllerProcess, controller_for, wait_for

pytestmark = pytest.mark.integration

__all__ = ["deliveries"]  # the fixture, shared with the work tests

HELD_FOR = 8.0
"""Seconds the waiting agent is watched not getting the work while the old pod exists (the
routes this guards against handed it over within 3 s)."""


@pytest.fixture
def acknowledging(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller with the delivery sidecar configured, so sessions can acknowledge: on
    kwok no process runs, so a session never does by itself and its agent stays Releasing
    (the test writes the acknowledgement the sidecar would)."""
    env = {"BINDERY_SESSION_DELIVERY_IMAGE": "localhost/bindery:dev"}
    with controller_for(cluster, namespace, tmp_path, env=env) as proc:
        yield proc


def holder_with_session_and_waiter(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """Agent a holds URI with a running session (its pod held on exit); b waits for URI. The
    pod."""
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)], runtime=runtime()))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    pod = running_pod(cluster, namespace, "a")
    hold_exit(cluster, namespace, pod)
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/a"
    return pod


def exists(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> bool:
    """``pod`` itself (that uid) still exists."""
    current = get(cluster, "pod", namespace, pod["metadata"]["name"])
    return current is not None and uid(current) == uid(pod)


def still_held_while_the_pod_exists(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> None:
    """For :data:`HELD_FOR` seconds: a keeps the hold, b waits, and the old pod exists."""
    deadline = time.monotonic() + HELD_FOR
    while time.monotonic() < deadline:
        assert exists(cluster, namespace, pod), "the old session pod went early"
        held = holder_of(cluster, namespace, URI)
        assert held == f"{namespace}/a", f"the hold went to {held} while the old session ran"
        b = must_get(cluster, "agentspec", namespace, "b")
        assert (b.get("status") or {}).get("state") != "Working", b["status"]
        time.sleep(0.3)


def test_a_holder_whose_finalizer_is_removed_keeps_the_work_until_its_pod_is_gone(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    pod = holder_with_session_and_waiter(cluster, namespace)
    try:
        cluster.kubectl("delete", "agentspec", "a", "-n", namespace, "--wait=false")
        # The deleted agent's session is being stopped (its pod terminating, held on exit).
        wait_for(lambda: terminating(cluster, namespace, pod), what="a's session to be stopped")
        # An operator strips the finalizer (as at a hurried uninstall): the agent goes at once.
        cluster.kubectl(
            "patch", "agentspec", "a", "-n", namespace, "--type=json",
            "-p", json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
        )  # fmt: skip
        wait_for(lambda: get(cluster, "agentspec", namespace, "a") is None, what="a to be gone")
        still_held_while_the_pod_exists(cluster, namespace, pod)
        release_exit(cluster, namespace, pod)
        wait_for(lambda: not exists(cluster, namespace, pod), what="a's pod to be gone")
        wait_status(cluster, "agentspec", namespace, "b", state("Working"))
        assert holder_of(cluster, namespace, URI) == f"{namespace}/b"
    finally:
        release_exit(cluster, namespace, pod)


def test_a_releasing_holders_orphaned_session_keeps_the_work_until_it_is_gone(
    cluster: Cluster,
    namespace: str,
    acknowledging: ControllerProcess,
    deliveries: DeliveryWatcher,
) -> None:
    pod = holder_with_session_and_waiter(cluster, namespace)
    try:
        # a lets go of the URI: withdrawn from its document, the hold waits for its session.
        apply(cluster, namespace, agent("a", resources=[], runtime=runtime()))
        wait_status(cluster, "agentspec", namespace, "a", state("Releasing"))
        cluster.kubectl(
            "delete", "statefulset", session_name("a"), "-n", namespace, "--cascade=orphan",
            "--wait=false",
        )  # fmt: skip

        first_owner = {r["uid"] for r in pod["metadata"].get("ownerReferences") or []}

        def orphaned() -> bool:
            """The same pod, no longer owned by the StatefulSet that was deleted: orphaned, or
            already adopted by the recreated StatefulSet (which can happen between two polls)."""
            current = get(cluster, "pod", namespace, pod_name("a"))
            refs = ((current or {}).get("metadata") or {}).get("ownerReferences") or []
            return (
                current is not None
                and uid(current) == uid(pod)
                and not first_owner & {r["uid"] for r in refs}
            )

        wait_for(orphaned, what="a's pod to be orphaned")
        still_held_while_the_pod_exists(cluster, namespace, pod)
        # The pod goes (the recreated StatefulSet may have replaced it already).
        cluster.kubectl(
            "delete", "pod", pod_name("a"), "-n", namespace, "--wait=false", check=False
        )
        release_exit(cluster, namespace, pod)
        wait_for(lambda: not exists(cluster, namespace, pod), what="a's old pod to be gone")
        # No session pod runs now (the hold goes), or its successor already does: that one
        # started from the document without the URI, and the hold goes once it acknowledges
        # (as its delivery sidecar would).
        acknowledged: set[str] = set()

        def handed_over() -> bool:
            if holder_of(cluster, namespace, URI) == f"{namespace}/b":
                return True
            current = get(cluster, "pod", namespace, pod_name("a"))
            live = current is not None and (current.get("status") or {}).get("phase") == "Running"
            if live and current is not None and uid(current) not in acknowledged | {uid(pod)}:
                acknowledge(cluster, namespace, "a", current)
                acknowledged.add(uid(current))
            return False

        wait_for(handed_over, timeout=60, interval=0.3, what="b to get the work")
        wait_status(cluster, "agentspec", namespace, "b", state("Working"))
        assert holder_of(cluster, namespace, URI) == f"{namespace}/b"
    finally:
        release_exit(cluster, namespace, pod)


def acknowledge(cluster: Cluster, namespace: str, name: str, pod: dict[str, Any]) -> None:
    """Record on the agent's acknowledgement Lease what its delivery sidecar records: ``pod``
    has the agent's current document in place."""
    config_map = must_get(cluster, "configmap", namespace, bindings_config_map_name(name))
    document = str((config_map.get("data") or {}).get("bindings.json", ""))
    assert URI not in document, "the document still carries the work"
    record = ack.Acknowledgement(
        pod_uid=uid(pod),
        pod_name=pod["metadata"]["name"],
        delivered_digest=ack.digest(document),
        delivered_at="2026-01-01T00:00:00Z",
    )
    patch = {
        "metadata": {"annotations": record.annotations()},
        "spec": {"holderIdentity": pod["metadata"]["name"]},
    }
    cluster.kubectl(
        "patch", "lease", ack_lease_name(name), "-n", namespace, "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip


def test_an_agents_bindings_config_map_stripped_of_its_labels_is_still_its_own(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    """Ownership is by uid: the ConfigMap the holder controls, its labels removed, is labelled
    again (not reported as a transient object of an earlier agent), and deleting the holder
    withdraws the URI from it before the hold goes."""
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))
    name = bindings_config_map_name("a")
    cluster.kubectl(
        "label", "configmap", name, "-n", namespace, "app.kubernetes.io/managed-by-"
    )  # fmt: skip

    def labelled_again() -> bool:
        labels = must_get(cluster, "configmap", namespace, name)["metadata"].get("labels") or {}
        return labels.get("app.kubernetes.io/managed-by") == "bindery"

    wait_for(labelled_again, timeout=30, what="a's ConfigMap to be labelled again")
    a = wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    reasons = {c.get("reason") for c in a["status"].get("conditions") or []}
    assert "ForeignObject" not in reasons, a["status"]
    cluster.kubectl("delete", "agentspec", "a", "-n", namespace, "--wait=false")
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"
