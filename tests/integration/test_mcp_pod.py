"""The session pod with the MCP adapter passes Pod Security ``restricted`` on the real API
server (its PodSecurity admission, in a namespace labelled to enforce it), and a pod without the
adapter's security settings does not: the check is the API server's own."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controller.domain.launch import trajectory_hash
from controller.domain.models import AgentObject, AgentSpecSpec, ObjectMeta, Runtime
from controller.k8s import builders
from controller.k8s.builders.mcp import MCP_CONTAINER
from tests.support import Cluster

pytestmark = pytest.mark.integration

RUNTIME = Runtime.model_validate({"image": "ghcr.io/example/agent:1.4.2", "mcp": {}})


def session_pod(namespace: str) -> dict[str, Any]:
    """The pod the session StatefulSet would make (its template, as a Pod)."""
    agent = AgentObject(
        meta=ObjectMeta(
            name="dev", namespace=namespace, uid="6f1c2a9e-3b1d-4c55-9a7e-0d2f5b8c1e44"
        ),
        spec=AgentSpecSpec.model_validate({"runtime": RUNTIME.model_dump(by_alias=True)}),
    )
    workload = builders.session_workload(
        agent,
        RUNTIME,
        launch_generation=0,
        trajectory_hash=trajectory_hash(RUNTIME),
        launched_at="2026-12-01T06:30:00Z",
        delivery=builders.SessionDelivery(image="localhost/bindery:dev"),
    )
    template = workload["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "dev-session-0", "namespace": namespace, **template["metadata"]},
        "spec": template["spec"],
    }


def dry_run(cluster: Cluster, pod: dict[str, Any]) -> tuple[int, str]:
    proc = cluster.kubectl(
        "create", "--dry-run=server", "-o", "name", "-f", "-", input=json.dumps(pod), check=False
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_session_pod_with_the_adapter_is_admitted_under_restricted(
    cluster: Cluster, namespace: str
) -> None:
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    pod = session_pod(namespace)
    assert MCP_CONTAINER in [c["name"] for c in pod["spec"]["initContainers"]]
    code, out = dry_run(cluster, pod)
    assert code == 0, out

    loose = copy.deepcopy(pod)
    adapter = next(c for c in loose["spec"]["initContainers"] if c["name"] == MCP_CONTAINER)
    del adapter["securityContext"]
    code, out = dry_run(cluster, loose)
    assert code != 0
    assert "restricted" in out
    assert MCP_CONTAINER in out
