"""Shared fixtures: one real local control plane per test session, a namespace per test.

Integration tests talk to a real etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler
and a kwok fake node) built from the Go module proxy by ``harness/tools/build.sh``. Nothing here
mocks the API server. The control plane is started lazily, so a run of only unit tests never
builds it.

``--k8s-version MINOR`` (default ``$BINDERY_K8S_VERSION``, else the newest) picks the Kubernetes
minor of both lanes' control planes and of the real node: ``make test`` runs the whole suite on
the newest, then the tests marked ``compat`` once more on the oldest supported minor.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import K8S_VERSION_ENV, LocalCluster, requested_k8s_version
from tests.support import Cluster, ControllerProcess, controller_for, install_crds, running


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--k8s-version",
        default=requested_k8s_version(),
        help=(
            "Kubernetes minor of the local control plane and real node, e.g. 1.33 "
            f"(default: ${K8S_VERSION_ENV}, else the newest harness/tools/build.sh builds)"
        ),
    )


@pytest.fixture(scope="session")
def k8s_version(request: pytest.FixtureRequest) -> str:
    """The Kubernetes minor asked for (empty: the newest)."""
    return str(request.config.getoption("k8s_version") or "")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, k8s_version: str) -> Iterator[Cluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("cluster"), audit=True, nodes=True, k8s_version=k8s_version
    )
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
    with controller_for(cluster, namespace, tmp_path) as proc:
        yield proc
