"""Namespaces are walls (real API server): an agent never receives another namespace's Resource.

Two tenants, each a namespace. The controller watches both. Tenant A's Tool names tenant B's
Resource as its staticResource and A's agent passes `b/name` and B's uid as parameters: every one
is refused in status with the reason, and B's URI and attributes never reach A's bindings.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kube import apply, apply_examples, get, must_get, wait_status
from tests.support import Cluster, ControllerProcess

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-value"


@pytest.fixture
def other(cluster: Cluster) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def both(
    cluster: Cluster, crds: list[str], namespace: str, other: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    proc = ControllerProcess(
        cluster, namespace, tmp_path, args=("--standalone", "--namespace", other)
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


def test_another_namespaces_resource_never_reaches_an_agent(
    cluster: Cluster, namespace: str, other: str, both: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    secret = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Resource",
        "metadata": {"name": "vault"},
        "spec": {
            "type": "git-checkout",
            "uri": "git://tenant-b/vault",
            "attributes": {"password": SECRET},
        },
    }
    apply(cluster, other, secret)
    vault = wait_status(cluster, "resource", other, "vault", lambda o: bool(o.get("status")))
    tool = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": "peek"},
        "spec": {
            "resourceSlots": [
                {"name": "pinned", "resourceType": "git-checkout", "binding": "static",
                 "staticResource": f"{other}/vault"},
                {"name": "asked", "resourceType": "git-checkout", "binding": "parameter"},
                {"name": "by-uid", "resourceType": "git-checkout", "binding": "parameter"},
            ]
        },
    }  # fmt: skip
    agent = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": "nosy"},
        "spec": {
            "tools": [
                {"name": "peek",
                 "params": {"asked": f"{other}/vault", "by-uid": vault["metadata"]["uid"]}}
            ]
        },
    }  # fmt: skip
    apply(cluster, namespace, tool, agent)
    refused = wait_status(
        cluster, "agentspec", namespace, "nosy", lambda o: o["status"].get("state") == "Pending"
    )
    rows = {b["name"]: b for b in refused["status"]["bindings"]}
    assert "staticResource names another namespace's Resource" in rows["peek.pinned"]["message"]
    assert "parameter value names another namespace's Resource" in rows["peek.asked"]["message"]
    assert "names no resource" in rows["peek.by-uid"]["message"]
    pinned = wait_status(cluster, "tool", namespace, "peek", lambda o: bool(o.get("status")))
    assert "another namespace's Resource" in json.dumps(pinned["status"])
    delivered = must_get(cluster, "configmap", namespace, "nosy-bindings")["data"]
    assert SECRET not in json.dumps(delivered)
    assert "tenant-b" not in json.dumps(delivered)
    assert get(cluster, "configmap", other, "nosy-bindings") is None


def test_objects_bindery_does_not_own_are_never_written(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    foreign_cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "alpha-bindings"},
        "data": {"bindings.json": "someone else's"},
    }
    foreign_sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "beta-session"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "theirs"}},
            "template": {
                "metadata": {"labels": {"app": "theirs"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/theirs:1"}]},
            },
        },
    }
    apply(cluster, namespace, foreign_cm, foreign_sts)
    before = {
        "cm": must_get(cluster, "configmap", namespace, "alpha-bindings"),
        "sts": must_get(cluster, "statefulset", namespace, "beta-session"),
    }
    x = {"apiVersion": "bindery.dev/v1alpha1", "kind": "AgentSpec", "metadata": {"name": "alpha"},
         "spec": {}}  # fmt: skip
    y = {"apiVersion": "bindery.dev/v1alpha1", "kind": "AgentSpec", "metadata": {"name": "beta"},
         "spec": {"runtime": {"image": "registry.example/agent:1"}}}  # fmt: skip
    apply(cluster, namespace, x, y)
    for name, what in (("alpha", "ConfigMap"), ("beta", "StatefulSet")):
        obj = wait_status(
            cluster,
            "agentspec",
            namespace,
            name,
            lambda o: any(
                c["type"] == "Ready" and c["reason"] == "ForeignObject"
                for c in (o.get("status") or {}).get("conditions") or []
            ),
        )
        stalled = next(c for c in obj["status"]["conditions"] if c["type"] == "Stalled")
        assert stalled["status"] == "True"
        assert f"{what} {namespace}/{name}-" in stalled["message"]
        assert "never writes an object it does not own" in stalled["message"]
    after_cm = must_get(cluster, "configmap", namespace, "alpha-bindings")
    after_sts = must_get(cluster, "statefulset", namespace, "beta-session")
    assert after_cm["metadata"]["resourceVersion"] == before["cm"]["metadata"]["resourceVersion"]
    assert after_cm["data"] == {"bindings.json": "someone else's"}
    assert after_sts["spec"]["template"] == before["sts"]["spec"]["template"]
