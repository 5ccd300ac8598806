"""Several replicas, one active: leader election on a real Lease, and fail-over."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kube import agent, apply, apply_examples, get, ready, wait_status
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

ELECTION = ("--leader-elect", "--leader-election-id", "bindery-test-leader")


def _replica(cluster: Cluster, namespace: str, tmp_path: Path, name: str) -> ControllerProcess:
    return ControllerProcess(
        cluster,
        namespace,
        tmp_path,
        name=name,
        ready_line="waiting to lead",
        args=(*ELECTION, "--leader-election-namespace", namespace),
    )


@pytest.fixture
def replicas(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[tuple[ControllerProcess, ControllerProcess]]:
    first = _replica(cluster, namespace, tmp_path, "one").start()
    second = _replica(cluster, namespace, tmp_path, "two").start()
    try:
        yield first, second
    finally:
        for replica in (first, second):
            replica.stop()


def _leads(replica: ControllerProcess) -> bool:
    return "became the leader" in replica.logs()


def _reconciled_changes(replica: ControllerProcess) -> int:
    return sum(
        1
        for line in replica.logs().splitlines()
        if '"event": "reconciled"' in line and '"outcome": "changed"' in line
    )


def test_only_the_leader_reconciles_and_a_follower_takes_over(
    cluster: Cluster, namespace: str, replicas: tuple[ControllerProcess, ControllerProcess]
) -> None:
    first, second = replicas
    apply_examples(cluster, namespace)
    wait_status(cluster, "agentspec", namespace, "dev", ready)
    wait_for(lambda: _leads(first) or _leads(second), what="one replica to lead")
    leader, follower = (first, second) if _leads(first) else (second, first)
    time.sleep(2)
    assert not _leads(follower)
    assert _reconciled_changes(leader) > 0
    assert _reconciled_changes(follower) == 0
    lease = get(cluster, "lease", namespace, "bindery-test-leader")
    assert lease is not None
    assert lease["spec"]["holderIdentity"]

    leader.kill()  # no cleanup: the follower must wait for the lease to expire, then lead
    wait_for(lambda: _leads(follower), timeout=60, what="the follower to take over")
    apply(cluster, namespace, agent("late"))
    wait_status(cluster, "agentspec", namespace, "late", ready)
    assert _reconciled_changes(follower) > 0


def test_a_leader_that_stops_cleanly_hands_over_without_waiting_for_expiry(
    cluster: Cluster, namespace: str, replicas: tuple[ControllerProcess, ControllerProcess]
) -> None:
    first, second = replicas
    wait_for(lambda: _leads(first) or _leads(second), what="one replica to lead")
    leader, follower = (first, second) if _leads(first) else (second, first)
    leader.stop()  # SIGTERM: the leader releases its lease on the way out
    assert "released the leader lease" in leader.logs()
    started = time.monotonic()
    wait_for(lambda: _leads(follower), timeout=30, what="the follower to take over")
    # The lease lasts 15 s; a follower retries every 5 s, so a released lease is taken sooner.
    assert time.monotonic() - started < 12
