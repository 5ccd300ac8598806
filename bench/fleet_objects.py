"""The fleet benchmark's objects: one ResourceType, the shared Resource, the agents that bind
it (each with a runtime, so each has a session), the kwok nodes their pods run on, and the
predicate the clocks wait for.
"""

from __future__ import annotations

from typing import Any

from controller.domain import names

Body = dict[str, Any]
API_VERSION = "bindery.dev/v1alpha1"
TYPE = "fleet-config"
RESOURCE = "shared"
URI = f"{TYPE}://fleet/shared"
REVISION = "revision"
"""The attribute each change sets: the new document's revision, which sessions report."""
NODE_PODS = 500
"""Pods each extra kwok node admits."""


def path(plural: str, namespace: str = "", name: str = "") -> str:
    base = "/apis/bindery.dev/v1alpha1"
    out = f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"
    return f"{out}/{name}" if name else out


def resource_type() -> Body:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceType",
        "metadata": {"name": TYPE},
        "spec": {
            "description": "Configuration every agent of the fleet binds.",
            "uriSchemes": [TYPE],
        },
    }


def resource(revision: str = "0") -> Body:
    return {
        "apiVersion": API_VERSION,
        "kind": "Resource",
        "metadata": {"name": RESOURCE},
        "spec": {"type": TYPE, "uri": URI, "attributes": {REVISION: revision}},
    }


def agent_name(i: int) -> str:
    return f"fleet-{i:05d}"


def agent(name: str) -> Body:
    """An agent binding the shared Resource, with a runtime: the controller gives it a session
    StatefulSet whose pod kwok runs."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentSpec",
        "metadata": {"name": name},
        "spec": {
            "resources": [{"name": RESOURCE, "tag": TYPE, "uri": URI}],
            "runtime": {
                "image": "registry.example/fleet-agent:1",
                "command": ["sh", "-c"],
                "args": ["while true; do sleep 3600; done"],
            },
        },
    }


def ack_lease(agent: Body) -> Body:
    """The agent's acknowledgement Lease, as the controller makes it (the baseline's side)."""
    md = agent["metadata"]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": names.ack_lease_name(md["name"]),
            "labels": {
                "app.kubernetes.io/component": "session-ack",
                "app.kubernetes.io/managed-by": "bindery",
                "bindery.dev/agent": md["name"],
            },
            "ownerReferences": [owner(agent)],
        },
        "spec": {},
    }


def owner(agent: Body) -> Body:
    md = agent["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentSpec",
        "name": md["name"],
        "uid": md["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def kwok_node(name: str) -> Body:
    """One more node kwok plays (its fake node admits 1,000 pods)."""
    capacity = {"cpu": "64", "memory": "256Gi", "pods": str(NODE_PODS)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name},
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def delivered(generation: int) -> Any:
    """The predicate: the Resource reports ``Delivered`` True for ``generation``."""

    def check(body: Body) -> bool:
        st = body.get("status") or {}
        if (st.get("rollout") or {}).get("generation") != generation:
            return False
        return any(
            c.get("type") == "Delivered" and c.get("status") == "True"
            for c in st.get("conditions") or []
        )

    return check
