"""The work binding on the real API server: one holder per URI, handoff A -> no holder -> B.

Every test runs a `DeliveryWatcher` that records every version of every bindings ConfigMap in
the namespace, in the API server's own order, and fails the test if a work URI was ever
delivered to two agents at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from controller.domain.delivery import delivered_work_uris
from controller.domain.work import hold_name
from tests.integration.kube import (
    agent,
    apply,
    apply_examples,
    condition,
    get,
    must_get,
    ready,
    state,
    wait_status,
    work,
)
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

URI = "github-issue://example/project/7"


class DeliveryWatcher:
    """Replays the namespace's bindings ConfigMaps version by version, checking exclusivity."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.core = client.CoreV1Api(cluster.api_client())
        self.namespace = namespace
        self.delivered: dict[str, set[str]] = {}
        self.versions = 0
        self.violations: list[str] = []
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> DeliveryWatcher:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        while not self._stop.is_set():
            w = watch.Watch()
            self._started.set()
            for event in w.stream(
                self.core.list_namespaced_config_map,
                self.namespace,
                label_selector="app.kubernetes.io/component=bindings",
                timeout_seconds=2,
            ):
                self._record(event["type"], event["object"])
                if self._stop.is_set():
                    w.stop()
                    break

    def _record(self, kind: str, cm: Any) -> None:
        self.versions += 1
        agent = cm.metadata.labels.get("bindery.dev/agent", cm.metadata.name)
        data = (cm.data or {}).get("bindings.json", "")
        self.delivered[agent] = set() if kind == "DELETED" else delivered_work_uris(data)
        seen: dict[str, str] = {}
        for who, uris in sorted(self.delivered.items()):
            for uri in uris:
                if uri in seen:
                    self.violations.append(
                        f"{uri} delivered to {seen[uri]} and {who} at once "
                        f"(resourceVersion {cm.metadata.resource_version})"
                    )
                seen[uri] = who


@pytest.fixture
def deliveries(cluster: Cluster, namespace: str) -> Iterator[DeliveryWatcher]:
    with DeliveryWatcher(cluster, namespace) as watcher:
        yield watcher
    assert watcher.versions > 0, "the watcher saw no bindings ConfigMap at all"
    assert watcher.violations == []


def holder_of(cluster: Cluster, namespace: str, uri: str) -> str | None:
    lease = get(cluster, "lease", namespace, hold_name(uri))
    return None if lease is None else str(lease["spec"]["holderIdentity"])


def a_holds_b_waits(cluster: Cluster, namespace: str) -> None:
    """Agent a holds URI as its work; agent b asks for it too and waits."""
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))


def work_status(obj: dict[str, Any]) -> dict[str, Any]:
    return dict((obj.get("status") or {}).get("work") or {})


def test_handoff_when_the_holder_lets_go_first(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]), agent("b"))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/a"

    apply(cluster, namespace, agent("a", resources=[]))
    wait_status(cluster, "agentspec", namespace, "a", state("Idle"))
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    b = wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert work_status(b)["holder"] == {"namespace": namespace, "name": "b"}
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"


def test_handoff_when_the_taker_asks_first(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))

    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    b = wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))
    assert work_status(b)["waitingFor"] == {"namespace": namespace, "name": "a"}
    assert condition(b, "Ready")["reason"] == "WaitingForWork"
    assert condition(b, "Reconciling")["status"] == "True"
    assert URI not in json.dumps(must_get(cluster, "configmap", namespace, "b-bindings")["data"])

    apply(cluster, namespace, agent("a", resources=[]))
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    wait_status(cluster, "agentspec", namespace, "a", state("Idle"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"


def test_ten_agents_racing_for_one_uri_yield_one_holder(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    names = [f"racer-{i}" for i in range(12)]
    apply(cluster, namespace, *(agent(n, resources=[work(URI)]) for n in names))

    def settled() -> list[str] | None:
        states = [
            (get(cluster, "agentspec", namespace, n) or {}).get("status", {}).get("state")
            for n in names
        ]
        return states if None not in states and "Working" in states else None

    states = wait_for(settled, timeout=60, what="every racer to report a state")
    assert states.count("Working") == 1
    assert states.count("Waiting") == len(names) - 1
    winner = names[states.index("Working")]
    assert holder_of(cluster, namespace, URI) == f"{namespace}/{winner}"
    leases = cluster.kubectl("get", "lease", "-n", namespace, "-o", "name").stdout.split()
    assert f"lease.coordination.k8s.io/{hold_name(URI)}" in leases
    for loser in set(names) - {winner}:
        obj = must_get(cluster, "agentspec", namespace, loser)
        assert work_status(obj)["held"] is False
        assert "waitingFor" in work_status(obj)


def test_waiters_acquire_oldest_first(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("first", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "first", state("Working"))
    # "zed" starts waiting before "amy": name order must not beat waiting order.
    apply(cluster, namespace, agent("zed", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "zed", state("Waiting"))
    time.sleep(1.1)  # waiting times have one-second resolution
    apply(cluster, namespace, agent("amy", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "amy", state("Waiting"))

    apply(cluster, namespace, agent("first", resources=[]))
    wait_status(cluster, "agentspec", namespace, "zed", state("Working"))
    amy = must_get(cluster, "agentspec", namespace, "amy")
    assert amy["status"]["state"] == "Waiting"

    apply(cluster, namespace, agent("zed", resources=[]))
    wait_status(cluster, "agentspec", namespace, "amy", state("Working"))


def test_deleting_the_holder_releases_the_hold(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    a = wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    assert "bindery.dev/work-hold" in a["metadata"]["finalizers"]
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))

    cluster.kubectl("delete", "agentspec", "-n", namespace, "a", "--timeout=30s")
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"


def test_an_idle_agent_carries_no_finalizer(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    apply(cluster, namespace, agent("a", resources=[]))
    a = wait_status(cluster, "agentspec", namespace, "a", state("Idle"))
    assert "bindery.dev/work-hold" not in (a["metadata"].get("finalizers") or [])
    assert holder_of(cluster, namespace, URI) is None


def test_a_hold_whose_holder_is_gone_is_reclaimed(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    stale = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": hold_name(URI),
            "labels": {"app.kubernetes.io/managed-by": "bindery"},
            "annotations": {"bindery.dev/uri": URI, "bindery.dev/holder-uid": "gone-uid"},
        },
        "spec": {"holderIdentity": f"{namespace}/ghost"},
    }
    apply(cluster, namespace, stale)
    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"


def test_the_resource_with_the_work_uri_shows_its_holder(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    uri = "github-issue://example/project/100"  # the examples' registered tracking-issue
    apply(cluster, namespace, agent("a", resources=[work(uri)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))
    res = wait_status(
        cluster,
        "resource",
        namespace,
        "tracking-issue",
        lambda o: (o.get("status") or {}).get("holder", {}).get("name") == "a",
    )
    assert res["status"]["holder"]["namespace"] == namespace
    apply(cluster, namespace, agent("a", resources=[]))
    wait_status(
        cluster,
        "resource",
        namespace,
        "tracking-issue",
        lambda o: "holder" not in (o.get("status") or {}),
    )


def test_a_controller_killed_mid_handoff_converges_without_two_holders(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    a_holds_b_waits(cluster, namespace)

    # Kill the controller (SIGKILL, no cleanup) the moment A's hold is released, before B can
    # acquire it in the same process.
    leases = client.CoordinationV1Api(cluster.api_client())
    w = watch.Watch()
    killed = threading.Event()

    def kill_on_release() -> None:
        for event in w.stream(
            leases.list_namespaced_lease,
            namespace,
            timeout_seconds=30,
            field_selector=f"metadata.name={hold_name(URI)}",
        ):
            if event["type"] == "DELETED":
                controller.kill()
                killed.set()
                w.stop()

    killer = threading.Thread(target=kill_on_release, daemon=True)
    killer.start()
    time.sleep(0.5)
    apply(cluster, namespace, agent("a", resources=[]))
    assert killed.wait(30), "A's hold was never released"
    killer.join(timeout=5)

    # Whatever the instant of death, nobody holds two deliveries; a new controller finishes.
    assert len(deliveries.violations) == 0
    controller.start()
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    wait_status(cluster, "agentspec", namespace, "a", ready)
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"


def test_foreground_deletion_of_the_holder_never_frees_the_uri_early(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    a_holds_b_waits(cluster, namespace)
    # The garbage collector deletes A's dependents first; the hold is not one of them, so it
    # goes only when A's finalizer has withdrawn the URI from A's bindings.
    cluster.kubectl(
        "delete", "agentspec", "a", "-n", namespace, "--cascade=foreground", "--wait=false"
    )
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert holder_of(cluster, namespace, URI) == f"{namespace}/b"
    wait_for(
        lambda: get(cluster, "agentspec", namespace, "a") is None,
        timeout=30,
        what="the holder to be gone",
    )


def test_deleting_the_namespace_completes_with_holds_in_it(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    apply_examples(cluster, namespace)
    a_holds_b_waits(cluster, namespace)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false")
    # The agents' finalizers are released by the controller; the namespace does not hang.
    wait_for(
        lambda: get(cluster, "namespace", "", namespace) is None,
        timeout=90,
        what=f"namespace {namespace} to be deleted",
    )


def test_a_watched_namespace_being_deleted_stays_watched(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> None:
    """The namespace controller marks the agents deleted only after the namespace itself is
    marked: the controller still sees that at once and lets them go (not at its next sweep,
    an hour away here), so the namespace is not held up by the agents' finalizers."""
    proc = ControllerProcess(
        cluster, namespace, tmp_path, args=("--standalone", "--resync-seconds", "3600")
    ).start()
    try:
        apply_examples(cluster, namespace)
        a_holds_b_waits(cluster, namespace)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false")

        def marked_or_gone() -> bool:
            a = get(cluster, "agentspec", namespace, "a")
            return a is None or bool(a["metadata"].get("deletionTimestamp"))

        wait_for(marked_or_gone, timeout=60, what="the namespace controller to delete agent a")
        wait_for(
            lambda: not any(get(cluster, "agentspec", namespace, n) for n in ("a", "b")),
            timeout=15,
            what="the controller to release the agents of a namespace being deleted",
        )
        assert get(cluster, "lease", namespace, hold_name(URI)) is None
    finally:
        proc.stop()


def test_exclusivity_is_about_the_work_role(
    cluster: Cluster, namespace: str, controller: ControllerProcess, deliveries: DeliveryWatcher
) -> None:
    """While A holds X as work, B receives X under its review role; B's work binding waits."""
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    wait_status(cluster, "agentspec", namespace, "a", state("Working"))

    review = {"name": "review", "tag": "github-issue", "uri": URI}
    apply(cluster, namespace, agent("b", resources=[review, work(URI)]))
    b = wait_status(cluster, "agentspec", namespace, "b", state("Waiting"))
    assert work_status(b)["waitingFor"] == {"namespace": namespace, "name": "a"}

    def delivered_roles() -> list[str]:
        data = must_get(cluster, "configmap", namespace, "b-bindings")["data"]["bindings.json"]
        return [r["name"] for r in json.loads(data)["resources"] if r["uri"] == URI]

    assert wait_for(delivered_roles, timeout=10, what="b's bindings to carry X") == ["review"]
    assert holder_of(cluster, namespace, URI) == f"{namespace}/a"

    # Once A lets go, B holds X and receives it under both roles.
    apply(cluster, namespace, agent("a", resources=[]))
    wait_status(cluster, "agentspec", namespace, "b", state("Working"))
    assert wait_for(lambda: delivered_roles() == ["review", "work"], timeout=10)
