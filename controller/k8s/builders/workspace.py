"""The session workspace: its PersistentVolumeClaim and its mount in the runtime container."""

from __future__ import annotations

from typing import Any

from controller.domain.models import AgentObject, Workspace
from controller.domain.names import workspace_claim_name
from controller.k8s.builders.common import agent_labels, owner_reference

WORKSPACE_VOLUME = "bindery-workspace"
WORKSPACE_ENV = "BINDERY_WORKSPACE"


def workspace_claim(agent: AgentObject, workspace: Workspace) -> dict[str, Any]:
    """The session's workspace: a PersistentVolumeClaim of one writer, independent of the pod.

    Owned by the agent (deleted with it) unless its reclaim policy is Retain: then it has no
    owner and is left when the agent goes; the agent label lets a later agent of the same name
    find it again.
    """
    metadata: dict[str, Any] = {
        "name": workspace_claim_name(agent.meta.name),
        "namespace": agent.meta.namespace,
        "labels": agent_labels(agent, "workspace"),
    }
    if workspace.reclaim_policy == "Delete":
        metadata["ownerReferences"] = [owner_reference(agent)]
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "volumeMode": "Filesystem",
        "resources": {"requests": {"storage": workspace.size}},
    }
    if workspace.storage_class_name:
        spec["storageClassName"] = workspace.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def mount_workspace(
    agent: AgentObject, workspace: Workspace, pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    """Mount the agent's workspace claim in the runtime container."""
    claim = {"claimName": workspace_claim_name(agent.meta.name)}
    pod_spec["volumes"].append({"name": WORKSPACE_VOLUME, "persistentVolumeClaim": claim})
    container["volumeMounts"].append({"name": WORKSPACE_VOLUME, "mountPath": workspace.mount_path})
