"""Shared fixtures: one real local control plane per test session, a namespace per test.

Integration tests talk to a real etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler
and a kwok fake node) built from the Go module proxy by ``harness/tools/build.sh``. Nothing here
mocks the API server. The control plane is started lazily, so a run of only unit tests never
builds it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import LocalCluster
from tests.support import Cluster, ControllerProcess, install_crds, running


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), audit=True, nodes=True)
    yield from running(local)


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    """Every CRD under crds/, applied and served."""
    return install_crds(cluster)


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def controller(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller running against the test's namespace; fails the test if it crashed."""
    proc = ControllerProcess(cluster, namespace, tmp_path).start()
    try:
        yield proc
        proc._alive()
        # Delete the agents while the controller runs, so their finalizers are honoured and
        # the namespace can go.
        cluster.kubectl("delete", "agentspec", "--all", "-n", namespace, "--timeout=60s")
    finally:
        proc.stop()
    errors = [line for line in proc.lines_before_shutdown() if '"level": "error"' in line]
    assert not errors, "the controller logged errors:\n" + "\n".join(errors[:20])
