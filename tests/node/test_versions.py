"""The real node runs the kubelet of the control plane's own version (the compatibility lane
runs sessions on the oldest supported kubelet, not only against the oldest API server)."""

from __future__ import annotations

import json

import pytest

from harness import node
from tests.support import Cluster

pytestmark = [pytest.mark.node, pytest.mark.compat]


def test_the_kubelet_is_the_control_planes_version(cluster: Cluster) -> None:
    got = json.loads(cluster.kubectl("get", "node", node.NODE_NAME, "-o", "json").stdout)
    assert got["status"]["nodeInfo"]["kubeletVersion"] == cluster.state.k8s_version
