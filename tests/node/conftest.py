"""The node lane: a second local control plane whose node is real (containerd, runc, a kubelet).

Its fixtures shadow the integration lane's ``cluster`` and ``crds`` for the tests in this folder,
so ``namespace`` and ``controller`` work unchanged against it. It is started once per test
session, and only when a node test runs: building its images takes minutes the first time on a
machine (they are cached by content afterwards), and it needs root.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cluster import LocalCluster
from tests.support import Cluster, install_crds, running


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, k8s_version: str) -> Iterator[Cluster]:
    local = LocalCluster(
        tmp_path_factory.mktemp("node-cluster"), audit=True, kubelet=True, k8s_version=k8s_version
    )
    yield from running(local, timeout=180)


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    return install_crds(cluster)
