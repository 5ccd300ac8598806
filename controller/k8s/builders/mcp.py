"""The MCP adapter sidecar (``spec.runtime.mcp``): its container in the session pod.

A native sidecar (an init container with ``restartPolicy: Always``) after the delivery sidecar,
so it starts once the first document is in place, and the runtime once it listens. It runs the
project image (the delivery sidecar's) with ``python -m controller.mcp serve`` on the pod's
loopback, reads the delivered bindings file (read-only) and writes the acknowledgement file in
the ack emptyDir, which the delivery sidecar records: the controller's delivery contract is the
same with or without it.

It mounts the pod-bound token the delivery sidecar uses, at the path a client in a pod looks
for one, so that ``bindery_resolve`` can read what resolving reads where the session's
ServiceAccount is allowed to (it checks at start, and does not offer the tool otherwise).
"""

from __future__ import annotations

from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain.delivery import BINDINGS_FILE
from controller.domain.models import McpSettings
from controller.k8s.builders.bindings import BINDINGS_MOUNT, BINDINGS_VOLUME
from controller.k8s.builders.sidecar import (
    ACK_VOLUME,
    TOKEN_VOLUME,
    SessionDelivery,
    project_container_security,
)

MCP_CONTAINER = "bindery-mcp"
MCP_URL_ENV = "BINDERY_MCP_URL"
"""The environment variable that gives the runtime the adapter's URL."""
MCP_PATH = "/mcp"
SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where a client in a pod finds its token (the adapter mounts the pod-bound one there)."""


def mcp_url(settings: McpSettings) -> str:
    return f"http://127.0.0.1:{settings.port}{MCP_PATH}"


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def mcp_sidecar(delivery: SessionDelivery, settings: McpSettings) -> dict[str, Any]:
    """The adapter's container: after the delivery sidecar in ``initContainers``."""
    port = settings.port
    return {
        "name": MCP_CONTAINER,
        "image": delivery.image,
        "restartPolicy": "Always",
        "command": ["python", "-m", "controller.mcp", "serve"],
        "args": [
            f"--listen=127.0.0.1:{port}",
            f"--bindings={BINDINGS_MOUNT}/{BINDINGS_FILE}",
            f"--ack-file={ack.ACK_MOUNT}/{ack.ACK_FILE}",
        ],
        "env": [
            # The adapter refuses to start when the pod's IP is the node's (hostNetwork).
            {"name": "POD_IP", **_field("status.podIP")},
            {"name": "HOST_IP", **_field("status.hostIP")},
            {"name": "POD_NAMESPACE", **_field("metadata.namespace")},
        ],
        "volumeMounts": [
            {"name": BINDINGS_VOLUME, "mountPath": BINDINGS_MOUNT, "readOnly": True},
            {"name": ACK_VOLUME, "mountPath": ack.ACK_MOUNT},
            {"name": TOKEN_VOLUME, "mountPath": SERVICE_ACCOUNT_MOUNT, "readOnly": True},
        ],
        # The runtime starts once the adapter listens. It listens on the loopback only, which
        # a kubelet's tcpSocket or httpGet probe (sent to the pod's IP) cannot reach.
        "startupProbe": {
            "exec": {
                "command": [
                    "python",
                    "-I",
                    "-S",
                    "-c",
                    f"import socket; socket.create_connection(('127.0.0.1', {port}), 1).close()",
                ]
            },
            "periodSeconds": 1,
            "failureThreshold": 120,
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "64Mi"},
            "limits": {"memory": "192Mi"},
        },
        "securityContext": project_container_security(),
    }
