"""Pure builders: the objects the controller owns, as plain manifests.

Each builder takes exactly what it renders and returns a dict ready for the API. Nothing here
performs I/O or reads global settings; golden-file tests pin the output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain import rules
from controller.domain.delivery import BINDINGS_FILE
from controller.domain.launch import (
    LAUNCH_GENERATION_ANNOTATION,
    LAUNCHED_AT_ANNOTATION,
    TRAJECTORY_HASH_ANNOTATION,
    Launched,
    launched_from_annotations,
)
from controller.domain.models import API_VERSION, AgentObject, Runtime, WireModel, Workspace
from controller.domain.work import hold_name

__all__ = [
    "LAUNCHED_AT_ANNOTATION",
    "LAUNCH_GENERATION_ANNOTATION",
    "TRAJECTORY_HASH_ANNOTATION",
]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "bindery"
AGENT_LABEL = "bindery.dev/agent"
COMPONENT_LABEL = "app.kubernetes.io/component"

HOLD_FINALIZER = "bindery.dev/hold"
URI_ANNOTATION = "bindery.dev/uri"
HOLDER_UID_ANNOTATION = "bindery.dev/holder-uid"

BINDINGS_MOUNT = rules.BINDINGS_MOUNT
BINDINGS_VOLUME = rules.BINDINGS_VOLUME
BINDINGS_ENV = "BINDERY_BINDINGS_FILE"

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


@dataclass(frozen=True)
class SessionDelivery:
    """How a session pod gets its bindings within a second, and acknowledges them: the
    delivery sidecar's image (the controller's own)."""

    image: str


def session_service_account_name(agent_name: str) -> str:
    """The ServiceAccount a session runs as when neither its runtime nor the installation
    names one: it holds only the delivery sidecar's rights."""
    return f"{agent_name}-session"


def session_role_name(agent_name: str) -> str:
    return f"bindery-session-{agent_name}"


def owner_reference(agent: AgentObject) -> dict[str, Any]:
    """Owner reference to the agent, so deleting it garbage-collects what it owns."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentSpec",
        "name": agent.meta.name,
        "uid": agent.meta.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _labels(agent: AgentObject, component: str) -> dict[str, str]:
    return {MANAGED_BY: MANAGER, AGENT_LABEL: agent.meta.name, COMPONENT_LABEL: component}


def owner_of(body: dict[str, Any]) -> tuple[str, str, str] | None:
    """(kind, name, uid) of the object's controlling owner, if it has one."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind", "")), str(ref.get("name", "")), str(ref.get("uid", ""))
    return None


def owned_by(body: dict[str, Any], agent: AgentObject) -> bool:
    """Whether ``body`` is Bindery's object for ``agent`` (its label and controlling owner)."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    return labels.get(MANAGED_BY) == MANAGER and owner_of(body) == (
        "AgentSpec",
        agent.meta.name,
        agent.meta.uid,
    )


def adoptable(body: dict[str, Any], agent: AgentObject) -> bool:
    """Left by an earlier AgentSpec of ``agent``'s name: Bindery's label for an agent of this
    name, and no controlling owner (deleted with ``propagationPolicy: Orphan``) or an AgentSpec
    of this name that is gone (names are unique, so another uid is an earlier agent, whose
    objects the garbage collector has not removed yet). Like the ReplicaSet controller with
    orphaned pods, Bindery adopts it."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    owner = owner_of(body)
    return (
        labels.get(MANAGED_BY) == MANAGER
        and labels.get(AGENT_LABEL) == agent.meta.name
        and (owner is None or owner[:2] == ("AgentSpec", agent.meta.name))
    )


def adoption(body: dict[str, Any], agent: AgentObject) -> dict[str, Any]:
    """The merge patch that makes ``agent`` the controlling owner (in place of a gone one)."""
    refs = [
        r
        for r in (body.get("metadata") or {}).get("ownerReferences") or []
        if not r.get("controller")
    ]
    return {"metadata": {"ownerReferences": [*refs, owner_reference(agent)]}}


def bindings_config_map_name(agent_name: str) -> str:
    return f"{agent_name}-bindings"


def session_name(agent_name: str) -> str:
    return f"{agent_name}-session"


def bindings_config_map(agent: AgentObject, rendered: str) -> dict[str, Any]:
    """The ConfigMap that carries the agent's resolved bindings as one JSON file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bindings_config_map_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": _labels(agent, "bindings"),
            "ownerReferences": [owner_reference(agent)],
        },
        "data": {BINDINGS_FILE: rendered},
    }


def work_hold(agent: AgentObject, uri: str, *, namespace: str = "") -> dict[str, Any]:
    """A Lease whose existence is the hold on ``uri``; created only if absent.

    The name is derived from the URI, so two agents claiming the same URI race for one name and
    the API server lets exactly one create win.

    Its finalizer keeps it until its holder releases it: a namespace being deleted (or anyone
    else deleting it) can only mark it, and the holder withdraws the URI from its bindings
    before letting it go. It has no owner reference on purpose: the garbage collector would
    delete it as soon as its holder is deleted (at once under foreground deletion), possibly
    before the holder's delivered bindings stop carrying the URI. The holder's finalizer
    releases it, after withdrawing it; a hold whose holder is gone some other way is released
    by the controller once the API server confirms the holder is gone.

    It lives in ``namespace`` (the cluster work scope's hold namespace), else in its holder's.
    """
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": hold_name(uri),
            "namespace": namespace or agent.meta.namespace,
            "labels": {MANAGED_BY: MANAGER, COMPONENT_LABEL: "work-hold"},
            "annotations": {URI_ANNOTATION: uri, HOLDER_UID_ANNOTATION: agent.meta.uid},
            "finalizers": [HOLD_FINALIZER],
        },
        "spec": {"holderIdentity": agent.meta.key},
    }


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
    what the runtime did with it. The sidecar alone holds an API token.
    """
    labels = _labels(agent, "session")
    selector = {AGENT_LABEL: agent.meta.name, COMPONENT_LABEL: "session"}
    env = [{"name": BINDINGS_ENV, "value": f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"}]
    if runtime.model:
        env.append({"name": "BINDERY_MODEL", "value": runtime.model})
    if runtime.instructions:
        env.append({"name": "BINDERY_INSTRUCTIONS", "value": runtime.instructions})
    if delivery is not None:
        env.append({"name": ack.ACK_ENV, "value": f"{ack.ACK_MOUNT}/{ack.ACK_FILE}"})
    if runtime.workspace is not None:
        env.append({"name": WORKSPACE_ENV, "value": runtime.workspace.mount_path})
    reserved = {e["name"] for e in env}
    env += [{"name": e.name, "value": e.value} for e in runtime.env if e.name not in reserved]
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
        pod_spec["initContainers"] = [_delivery_sidecar(agent, delivery)]
        pod_spec["volumes"] = _delivery_volumes(config_map)
    pod_spec.update(_pod_settings(runtime, service_account))
    container.update(_container_settings(runtime))
    pod_spec["volumes"] += [_wire(v) for v in runtime.volumes]
    container["volumeMounts"] += [_wire(m) for m in runtime.volume_mounts]
    if runtime.workspace is not None:
        _mount_workspace(agent, runtime.workspace, pod_spec, container)
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
                "metadata": {"labels": labels, "annotations": annotations},
                "spec": pod_spec,
            },
        },
    }


WORKSPACE_VOLUME = "bindery-workspace"
WORKSPACE_ENV = "BINDERY_WORKSPACE"


def workspace_claim_name(agent_name: str) -> str:
    return f"{agent_name}-workspace"


def workspace_claim(agent: AgentObject, workspace: Workspace) -> dict[str, Any]:
    """The session's workspace: a PersistentVolumeClaim of one writer, independent of the pod.

    Owned by the agent (deleted with it) unless its reclaim policy is Retain: then it has no
    owner and is left when the agent goes; the agent label lets a later agent of the same name
    find it again.
    """
    metadata: dict[str, Any] = {
        "name": workspace_claim_name(agent.meta.name),
        "namespace": agent.meta.namespace,
        "labels": _labels(agent, "workspace"),
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


def _mount_workspace(
    agent: AgentObject, workspace: Workspace, pod_spec: dict[str, Any], container: dict[str, Any]
) -> None:
    """Mount the agent's workspace claim in the runtime container."""
    claim = {"claimName": workspace_claim_name(agent.meta.name)}
    pod_spec["volumes"].append({"name": WORKSPACE_VOLUME, "persistentVolumeClaim": claim})
    container["volumeMounts"].append({"name": WORKSPACE_VOLUME, "mountPath": workspace.mount_path})


def _delivery_volumes(config_map: dict[str, Any]) -> list[dict[str, Any]]:
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


def _delivery_sidecar(agent: AgentObject, delivery: SessionDelivery) -> dict[str, Any]:
    """The native sidecar (``restartPolicy: Always``) that delivers and acknowledges."""
    bindings = f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"
    return {
        "name": DELIVERY_CONTAINER,
        "image": delivery.image,
        "restartPolicy": "Always",
        "command": ["bindery", "deliver"],
        "args": [
            f"--config-map={bindings_config_map_name(agent.meta.name)}",
            f"--lease={ack.ack_lease_name(agent.meta.name)}",
            f"--seed={SEED_MOUNT}/{BINDINGS_FILE}",
            f"--out={bindings}",
            f"--ack-file={ack.ACK_MOUNT}/{ack.ACK_FILE}",
            f"--token-dir={TOKEN_MOUNT}",
        ],
        "env": [
            {"name": "POD_NAME", **_field("metadata.name")},
            {"name": "POD_UID", **_field("metadata.uid")},
            {"name": "POD_NAMESPACE", **_field("metadata.namespace")},
        ],
        "volumeMounts": [
            {"name": BINDINGS_VOLUME, "mountPath": BINDINGS_MOUNT},
            {"name": ACK_VOLUME, "mountPath": ack.ACK_MOUNT, "readOnly": True},
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
        "securityContext": {
            **RESTRICTED_CONTAINER_SECURITY,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            # The image's own user, pinned: a pod-level runAsUser (a runtime that runs as root,
            # say) must not be inherited by the sidecar, which runAsNonRoot would then refuse.
            "runAsUser": SIDECAR_UID,
            "runAsGroup": SIDECAR_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }


def session_service_account(agent: AgentObject) -> dict[str, Any]:
    """The session's own ServiceAccount (used when nothing else is named); no token is
    automounted from it: the sidecar mounts a pod-bound one of its own."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": session_service_account_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": _labels(agent, "session"),
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
            "labels": _labels(agent, "session-delivery"),
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
                "resourceNames": [ack.ack_lease_name(agent.meta.name)],
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
            "labels": _labels(agent, "session-delivery"),
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
            "name": ack.ack_lease_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": _labels(agent, "session-ack"),
            "ownerReferences": [owner_reference(agent)],
        },
        "spec": {},
    }


def session_pod_of(pod: dict[str, Any], agent_name: str) -> bool:
    """Whether ``pod`` is the one its agent's session StatefulSet made (not a pod by that name
    that someone else created)."""
    owner = owner_of(pod)
    return owner is not None and owner[:2] == ("StatefulSet", session_name(agent_name))


def has_delivery_sidecar(pod: dict[str, Any]) -> bool:
    """Whether a session pod runs the delivery sidecar (can acknowledge)."""
    spec = pod.get("spec") or {}
    return any(c.get("name") == DELIVERY_CONTAINER for c in spec.get("initContainers") or [])


SIDECAR_UID = 65532
"""The delivery sidecar's user and group: the project image's non-root ``USER``."""

RESTRICTED_POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The pod securityContext every session starts from: Pod Security ``restricted``."""

RESTRICTED_CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
"""The container securityContext every session starts from: Pod Security ``restricted``."""

_ESCALATING_CAPABILITIES = {"SYS_ADMIN", "CAP_SYS_ADMIN"}


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def _wire(model: WireModel | None) -> dict[str, Any]:
    return {} if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _container_security(runtime: Runtime) -> dict[str, Any]:
    """The restricted defaults with the runtime's settings merged over them.

    ``allowPrivilegeEscalation: false`` is a default only: the API server refuses it next to
    ``privileged: true`` or an added SYS_ADMIN, so it is left out there unless the user set it.
    """
    user = _wire(runtime.container_security_context)
    base = dict(RESTRICTED_CONTAINER_SECURITY)
    added = set((user.get("capabilities") or {}).get("add") or [])
    if user.get("privileged") or added & _ESCALATING_CAPABILITIES:
        del base["allowPrivilegeEscalation"]
    return _merged(base, user)


def _container_settings(runtime: Runtime) -> dict[str, Any]:
    out: dict[str, Any] = {"securityContext": _container_security(runtime)}
    if resources := {k: v for k, v in _wire(runtime.resources).items() if v}:
        out["resources"] = resources
    return out


def _pod_settings(runtime: Runtime, service_account: str) -> dict[str, Any]:
    """Pod-level settings: security, identity and scheduling.

    The ServiceAccount is the runtime's, else the installation's (``service_account``). Its
    token is mounted only when one of them names a ServiceAccount (and then as that
    ServiceAccount says, unless the runtime says otherwise); a session that names none runs as
    the namespace's ``default`` ServiceAccount with no token, so it holds no API credentials.
    """
    out: dict[str, Any] = {
        "securityContext": _merged(RESTRICTED_POD_SECURITY, _wire(runtime.security_context))
    }
    account = runtime.service_account_name or service_account
    if account:
        out["serviceAccountName"] = account
    automount = runtime.automount_service_account_token
    if automount is None and not account:
        automount = False
    if automount is not None:
        out["automountServiceAccountToken"] = automount
    if runtime.node_selector:
        out["nodeSelector"] = dict(runtime.node_selector)
    if runtime.tolerations:
        out["tolerations"] = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in runtime.tolerations
        ]
    if runtime.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": r.name} for r in runtime.image_pull_secrets]
    return out


def launched_from(workload: dict[str, Any]) -> Launched | None:
    """The launch a session workload's pod template says it carries."""
    template = (workload.get("spec") or {}).get("template") or {}
    return launched_from_annotations((template.get("metadata") or {}).get("annotations") or {})


def launched_from_pod(pod: dict[str, Any]) -> Launched | None:
    """What a session pod was started with (its template's annotations, copied to the pod)."""
    return launched_from_annotations((pod.get("metadata") or {}).get("annotations") or {})


def canonical(manifest: dict[str, Any]) -> str:
    """Stable JSON for golden files."""
    return json.dumps(manifest, indent=2, sort_keys=True) + "\n"


def event(
    regarding: dict[str, Any],
    *,
    reason: str,
    note: str,
    warning: bool,
    instance: str,
    event_time: str,
    suffix: str,
) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event about ``regarding`` (an object body), as Bindery posts it."""
    md = regarding.get("metadata") or {}
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{md.get('name')}.{suffix}",
            "namespace": md.get("namespace") or "default",
        },
        "eventTime": event_time,
        "reportingController": "bindery.dev/controller",
        "reportingInstance": instance,
        "action": "Reconcile",
        "reason": reason,
        "note": note[:1024],
        "type": "Warning" if warning else "Normal",
        "regarding": {
            "apiVersion": regarding.get("apiVersion"),
            "kind": regarding.get("kind"),
            "name": md.get("name"),
            "namespace": md.get("namespace", ""),
            "uid": md.get("uid"),
        },
    }
