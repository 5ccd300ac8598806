"""The session workload: the StatefulSet of one and its pod template, and what a session pod
or workload says about its launch."""

from __future__ import annotations

from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain.delivery import BINDINGS_FILE
from controller.domain.launch import (
    LAUNCH_GENERATION_ANNOTATION,
    LAUNCHED_AT_ANNOTATION,
    TRAJECTORY_HASH_ANNOTATION,
    Launched,
    launched_from_annotations,
)
from controller.domain.models import AgentObject, Runtime
from controller.domain.names import (
    bindings_config_map_name,
    session_name,
    session_service_account_name,
)
from controller.domain.session_pods import SESSION_COMPONENT, is_session_pod
from controller.k8s.builders.bindings import BINDINGS_ENV, BINDINGS_MOUNT, BINDINGS_VOLUME
from controller.k8s.builders.common import (
    AGENT_LABEL,
    AGENT_UID_LABEL,
    COMPONENT_LABEL,
    agent_labels,
    owner_reference,
)
from controller.k8s.builders.mcp import MCP_URL_ENV, mcp_sidecar, mcp_url
from controller.k8s.builders.settings import container_settings, pod_settings, wire
from controller.k8s.builders.sidecar import (
    ACK_VOLUME,
    SessionDelivery,
    delivery_sidecar,
    delivery_volumes,
)
from controller.k8s.builders.workspace import WORKSPACE_ENV, mount_workspace


def session_workload(
    agent: AgentObject,
    runtime: Runtime,
    *,
    launch_generation: int,
    trajectory_hash: str,
    launched_at: str,
    service_account: str = "",
    delivery: SessionDelivery | None = None,
) -> dict[str, Any]:
    """The agent's session: a StatefulSet of one, so never two session pods at once.

    A StatefulSet does not start a replacement pod until the old one is fully gone (a Deployment
    would, whenever a pod is deleted or evicted). The pod template carries the runtime and the
    launch identity only; bindings arrive through the mounted ConfigMap, so changing them never
    rolls the pod.

    With ``delivery`` the pod also runs the delivery sidecar, which watches the agent's
    ConfigMap through the API and writes each new document into an emptyDir at the path the
    runtime reads (the mounted ConfigMap is its seed), and records on the acknowledgement Lease
    what the runtime did with it. The sidecar alone holds an API token (and, with
    ``runtime.mcp``, the MCP adapter sidecar beside it, whose URL the runtime gets in
    ``BINDERY_MCP_URL``; see :mod:`controller.k8s.builders.mcp`).
    """
    labels = agent_labels(agent, SESSION_COMPONENT)
    selector = {AGENT_LABEL: agent.meta.name, COMPONENT_LABEL: SESSION_COMPONENT}
    env = runtime_env(runtime, delivery)
    mounts = [{"name": BINDINGS_VOLUME, "mountPath": BINDINGS_MOUNT, "readOnly": True}]
    if delivery is not None:
        mounts.append({"name": ACK_VOLUME, "mountPath": ack.ACK_MOUNT})
    container: dict[str, Any] = {
        "name": "agent",
        "image": runtime.image,
        "env": env,
        "volumeMounts": mounts,
    }
    if runtime.command:
        container["command"] = list(runtime.command)
    if runtime.args:
        container["args"] = list(runtime.args)
    config_map = {"configMap": {"name": bindings_config_map_name(agent.meta.name)}}
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": BINDINGS_VOLUME, **config_map}],
    }
    if delivery is not None:
        service_account = (
            runtime.service_account_name
            or service_account
            or session_service_account_name(agent.meta.name)
        )
        pod_spec["initContainers"] = [delivery_sidecar(agent, delivery)]
        if runtime.mcp is not None:
            pod_spec["initContainers"].append(mcp_sidecar(delivery, runtime.mcp))
        pod_spec["volumes"] = delivery_volumes(config_map)
    pod_spec.update(pod_settings(runtime, service_account))
    container.update(container_settings(runtime))
    pod_spec["volumes"] += [wire(v) for v in runtime.volumes]
    container["volumeMounts"] += [wire(m) for m in runtime.volume_mounts]
    if runtime.workspace is not None:
        mount_workspace(agent, runtime.workspace, pod_spec, container)
    annotations = {
        LAUNCH_GENERATION_ANNOTATION: str(launch_generation),
        TRAJECTORY_HASH_ANNOTATION: trajectory_hash,
        LAUNCHED_AT_ANNOTATION: launched_at,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": session_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": labels,
            "annotations": dict(annotations),
            "ownerReferences": [owner_reference(agent)],
        },
        "spec": {
            "replicas": 1,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "revisionHistoryLimit": 2,
            "selector": {"matchLabels": selector},
            "template": {
                # The pods say whose session they are (the agent's uid too): the controller finds
                # them by these labels, whatever happened to this StatefulSet or to the agent.
                "metadata": {
                    "labels": {**labels, AGENT_UID_LABEL: agent.meta.uid},
                    "annotations": annotations,
                },
                "spec": pod_spec,
            },
        },
    }


def runtime_env(runtime: Runtime, delivery: SessionDelivery | None) -> list[dict[str, str]]:
    """The runtime container's environment: where its bindings, acknowledgement, MCP adapter and
    workspace are, then the spec's own variables (never one of those names)."""
    env = [{"name": BINDINGS_ENV, "value": f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"}]
    if runtime.model:
        env.append({"name": "BINDERY_MODEL", "value": runtime.model})
    if runtime.instructions:
        env.append({"name": "BINDERY_INSTRUCTIONS", "value": runtime.instructions})
    if delivery is not None:
        env.append({"name": ack.ACK_ENV, "value": f"{ack.ACK_MOUNT}/{ack.ACK_FILE}"})
        if runtime.mcp is not None:
            env.append({"name": MCP_URL_ENV, "value": mcp_url(runtime.mcp)})
    if runtime.workspace is not None:
        env.append({"name": WORKSPACE_ENV, "value": runtime.workspace.mount_path})
    reserved = {e["name"] for e in env}
    return env + [{"name": e.name, "value": e.value} for e in runtime.env if e.name not in reserved]


def session_pod_of(pod: dict[str, Any], agent_name: str, agent_uid: str = "") -> bool:
    """Whether ``pod`` is a session pod of the agent ``agent_name`` (of uid ``agent_uid``, when
    given), by its labels, not by its owner: an orphaned session pod is still the session (see
    :mod:`controller.domain.session_pods`)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return is_session_pod(labels, agent_name, agent_uid)


def launched_from(workload: dict[str, Any]) -> Launched | None:
    """The launch a session workload's pod template says it carries."""
    template = (workload.get("spec") or {}).get("template") or {}
    return launched_from_annotations((template.get("metadata") or {}).get("annotations") or {})


def launched_from_pod(pod: dict[str, Any]) -> Launched | None:
    """What a session pod was started with (its template's annotations, copied to the pod)."""
    return launched_from_annotations((pod.get("metadata") or {}).get("annotations") or {})
