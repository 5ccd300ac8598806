"""The names of the objects Bindery derives from an agent's name or a work URI, in one place.

Every object the controller makes for an agent is found again by its name alone (a store key, a
``resourceNames`` rule, a volume source), so each name is spelled here once and read everywhere.
"""

from __future__ import annotations

import hashlib


def key(namespace: str, name: str) -> str:
    """A namespaced object's key in the view: ``namespace/name``."""
    return f"{namespace}/{name}"


def bindings_config_map_name(agent_name: str) -> str:
    """The ConfigMap carrying the agent's bindings document."""
    return f"{agent_name}-bindings"


def session_name(agent_name: str) -> str:
    """The agent's session StatefulSet."""
    return f"{agent_name}-session"


def session_pod_name(agent_name: str) -> str:
    """The one pod of the agent's session StatefulSet (ordinal 0)."""
    return f"{session_name(agent_name)}-0"


def session_pod_key(namespace: str, agent_name: str) -> str:
    """The view's key of the agent's session pod."""
    return key(namespace, session_pod_name(agent_name))


def session_service_account_name(agent_name: str) -> str:
    """The ServiceAccount a session runs as when neither the runtime nor the installation
    names one."""
    return f"{agent_name}-session"


def session_role_name(agent_name: str) -> str:
    """The Role (and RoleBinding) letting the session read its bindings and acknowledge them."""
    return f"bindery-session-{agent_name}"


ACK_LEASE_PREFIX = "bindery-ack-"


def ack_lease_name(agent_name: str) -> str:
    """The Lease the session's delivery sidecar records its acknowledgements on."""
    return f"{ACK_LEASE_PREFIX}{agent_name}"


def workspace_claim_name(agent_name: str) -> str:
    """The PersistentVolumeClaim of the agent's workspace."""
    return f"{agent_name}-workspace"


def hold_name(uri: str) -> str:
    """The deterministic name of the hold Lease for ``uri`` (URIs are compared byte for byte)."""
    return "bindery-work-" + hashlib.sha256(uri.encode()).hexdigest()[:40]
