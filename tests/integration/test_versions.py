"""The control plane a test run asked for (``--k8s-version``, ``$BINDERY_K8S_VERSION``) is the one
the tests ran against: the compatibility lane proves nothing if it quietly ran the newest."""

from __future__ import annotations

import json
import subprocess

import pytest

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
