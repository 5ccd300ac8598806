"""The delivery sidecar: its container and volumes in the session pod, and the per-agent objects
it needs (ServiceAccount, Role, RoleBinding, acknowledgement Lease)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bindery_session.wire import ACK_FILE, ACK_MOUNT, BINDINGS_FILE

from controller.domain.models import AgentObject
from controller.domain.names import (
    ack_lease_name,
    bindings_config_map_name,
    session_role_name,
    session_service_account_name,
)
from controller.k8s.builders.bindings import BINDINGS_MOUNT, BINDINGS_VOLUME
from controller.k8s.builders.common import agent_labels, owner_reference
from controller.k8s.builders.settings import RESTRICTED_CONTAINER_SECURITY

DELIVERY_CONTAINER = "bindery-delivery"
"""The delivery sidecar's container name (a native sidecar: an init container that stays)."""
SEED_VOLUME = "bindery-seed"
SEED_MOUNT = "/var/run/bindery-seed"
"""Where the sidecar reads the kubelet-projected ConfigMap: its seed and fallback."""
ACK_VOLUME = "bindery-ack"
TOKEN_VOLUME = "bindery-token"  # noqa: S105 - a volume name, not a secret
TOKEN_MOUNT = "/var/run/secrets/bindery"  # noqa: S105 - a path
"""The sidecar's pod-bound token; mounted in the sidecar only."""
TOKEN_SECONDS = 3600


SIDECAR_UID = 65532

"""The delivery sidecar's user and group: the project image's non-root ``USER``."""


def project_container_security() -> dict[str, Any]:
    """The security context of each container the project's image runs in a session pod (the
    delivery sidecar, the MCP adapter)."""
    return {
        **RESTRICTED_CONTAINER_SECURITY,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        # The image's own user, pinned: a pod-level runAsUser (a runtime that runs as root, say)
        # must not be inherited by these containers, which runAsNonRoot would then refuse.
        "runAsUser": SIDECAR_UID,
        "runAsGroup": SIDECAR_UID,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


@dataclass(frozen=True)
class SessionDelivery:
    """How a session pod gets its bindings within a second, and acknowledges them: the
    delivery sidecar's image (the controller's own)."""

    image: str


def delivery_volumes(config_map: dict[str, Any]) -> list[dict[str, Any]]:
    """The emptyDirs the sidecar writes and the runtime reads (and back), its seed, its token."""
    small = {"emptyDir": {"medium": "Memory", "sizeLimit": "4Mi"}}
    return [
        {"name": BINDINGS_VOLUME, **small},
        {"name": ACK_VOLUME, **small},
        {"name": SEED_VOLUME, **config_map},
        {
            "name": TOKEN_VOLUME,
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "path": "token",
                            "expirationSeconds": TOKEN_SECONDS,
                        }
                    },
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                ]
            },
        },
    ]


def _field(path: str) -> dict[str, Any]:
    return {"valueFrom": {"fieldRef": {"fieldPath": path}}}


def delivery_sidecar(agent: AgentObject, delivery: SessionDelivery) -> dict[str, Any]:
    """The native sidecar (``restartPolicy: Always``) that delivers and acknowledges."""
    bindings = f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"
    return {
        "name": DELIVERY_CONTAINER,
        "image": delivery.image,
        "restartPolicy": "Always",
        "command": ["bindery", "deliver"],
        "args": [
            f"--config-map={bindings_config_map_name(agent.meta.name)}",
            f"--lease={ack_lease_name(agent.meta.name)}",
            f"--seed={SEED_MOUNT}/{BINDINGS_FILE}",
            f"--out={bindings}",
            f"--ack-file={ACK_MOUNT}/{ACK_FILE}",
            f"--token-dir={TOKEN_MOUNT}",
        ],
        "env": [
            {"name": "POD_NAME", **_field("metadata.name")},
            {"name": "POD_UID", **_field("metadata.uid")},
            {"name": "POD_NAMESPACE", **_field("metadata.namespace")},
        ],
        "volumeMounts": [
            {"name": BINDINGS_VOLUME, "mountPath": BINDINGS_MOUNT},
            {"name": ACK_VOLUME, "mountPath": ACK_MOUNT, "readOnly": True},
            {"name": SEED_VOLUME, "mountPath": SEED_MOUNT, "readOnly": True},
            {"name": TOKEN_VOLUME, "mountPath": TOKEN_MOUNT, "readOnly": True},
        ],
        # The runtime starts once the first document is in place.
        "startupProbe": {
            "exec": {"command": ["test", "-s", bindings]},
            "periodSeconds": 1,
            "failureThreshold": 120,
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "32Mi"},
            "limits": {"memory": "96Mi"},
        },
        "securityContext": project_container_security(),
    }


def has_delivery_sidecar(pod: dict[str, Any]) -> bool:
    """Whether a session pod runs the delivery sidecar (can acknowledge)."""
    spec = pod.get("spec") or {}
    return any(c.get("name") == DELIVERY_CONTAINER for c in spec.get("initContainers") or [])


def session_service_account(agent: AgentObject) -> dict[str, Any]:
    """The session's own ServiceAccount (used when nothing else is named); no token is
    automounted from it: the sidecar mounts a pod-bound one of its own."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": session_service_account_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": agent_labels(agent, "session"),
            "ownerReferences": [owner_reference(agent)],
        },
        "automountServiceAccountToken": False,
    }


def session_role(agent: AgentObject) -> dict[str, Any]:
    """What the delivery sidecar may do: read its agent's ConfigMap, write its Lease."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": session_role_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": agent_labels(agent, "session-delivery"),
            "ownerReferences": [owner_reference(agent)],
        },
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [bindings_config_map_name(agent.meta.name)],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"],
                "resourceNames": [ack_lease_name(agent.meta.name)],
                "verbs": ["get", "patch"],
            },
        ],
    }


def session_role_binding(agent: AgentObject, service_account: str) -> dict[str, Any]:
    """Grants :func:`session_role` to the ServiceAccount the session pod runs as."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": session_role_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": agent_labels(agent, "session-delivery"),
            "ownerReferences": [owner_reference(agent)],
        },
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": session_role_name(agent.meta.name),
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": service_account, "namespace": agent.meta.namespace}
        ],
    }


def acknowledgement_lease(agent: AgentObject) -> dict[str, Any]:
    """The Lease the session's sidecar records acknowledgements on (created empty here)."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": ack_lease_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": agent_labels(agent, "session-ack"),
            "ownerReferences": [owner_reference(agent)],
        },
        "spec": {},
    }
