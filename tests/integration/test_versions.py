"""The control plane a test run asked for (``--k8s-version``, ``$BINDERY_K8S_VERSION``) is the one
the tests ran against: the compatibility lane proves nothing if it quietly ran the newest."""

from __future__ import annotations

import json
import subprocess

import pytest

from controller.domain.versions import support_note
from controller.runtime.preflight import check_cluster
from harness.cluster import build_script, minor_of
from tests.support import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.compat]


def supported() -> list[str]:
    out = subprocess.run(
        ["bash", str(build_script()), "--versions"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()


def test_the_api_server_is_the_version_asked_for(cluster: Cluster, k8s_version: str) -> None:
    served = json.loads(cluster.kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    assert served == cluster.state.k8s_version
    versions = supported()
    wanted = k8s_version or versions[0]  # the newest by default
    assert minor_of(served) == minor_of(wanted)
    assert served in versions, f"{served} is none of the versions the harness builds: {versions}"


def test_the_controller_reads_the_cluster_as_one_it_is_tested_on(
    cluster: Cluster, crds: list[str]
) -> None:
    """What ``bindery run`` checks at start-up, on each lane's real API server: the version it
    logs is the server's own, and no minor the suite runs on draws the out-of-range warning."""
    server = check_cluster(cluster.api_client())
    assert server.git_version == cluster.state.k8s_version
    assert server.minor_pair == tuple(int(x) for x in minor_of(server.git_version).split("."))
    assert support_note(server) is None
