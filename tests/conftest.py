"""Shared fixtures: one real local control plane per test session, a namespace per test.

Integration tests talk to a real etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler
and a kwok fake node) built from the Go module proxy by ``tools/build.sh``. Nothing here mocks
the API server. The control plane is started lazily, so a run of only unit tests never builds it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from controller.cluster import ClusterState, LocalCluster, kubectl

REPO_ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = REPO_ROOT / "crds"


@dataclass
class Cluster:
    """A running local control plane, as tests see it."""

    state: ClusterState

    @property
    def kubeconfig(self) -> Path:
        return Path(self.state.kubeconfig)

    @property
    def bin_dir(self) -> Path:
        return Path(self.state.bin_dir)

    @property
    def audit_log(self) -> Path:
        return Path(self.state.audit_log)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = kubectl(self.bin_dir, self.kubeconfig, *args, input=input, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
            )
        return proc

    def api_client(self) -> client.ApiClient:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        return client.ApiClient(cfg)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), audit=True, nodes=True)
    state = local.up()
    try:
        yield Cluster(state)
    finally:
        local.down()


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.1, what: str = "") -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or predicate} (last: {last!r})"
    )


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    """Apply every CRD under crds/ and wait until the API server serves them."""
    files = sorted(CRD_DIR.glob("*.yaml"))
    assert files, f"no CRDs found under {CRD_DIR}"
    for path in files:
        cluster.kubectl("apply", "--server-side", "-f", str(path))
    names = [
        line.split("/", 1)[1]
        for line in cluster.kubectl("get", "-f", str(CRD_DIR), "-o", "name").stdout.split()
    ]
    for name in names:
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    return names


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
