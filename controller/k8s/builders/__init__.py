"""Pure builders: the objects the controller owns, as plain manifests.

Each builder takes exactly what it renders and returns a dict ready for the API. Nothing here
performs I/O or reads global settings; golden-file tests pin the output.

One module per job: ``common`` (labels, owner references, ownership checks), ``bindings`` (the
bindings ConfigMap), ``holds`` (the work-hold Lease), ``session`` (the session StatefulSet),
``sidecar`` (the delivery sidecar and its per-agent objects), ``settings`` (the runtime's pod
and container settings), ``workspace`` (the workspace claim), ``events`` (Events).
"""

from __future__ import annotations

from controller.domain.launch import (
    LAUNCH_GENERATION_ANNOTATION,
    LAUNCHED_AT_ANNOTATION,
    TRAJECTORY_HASH_ANNOTATION,
)
from controller.domain.names import (
    bindings_config_map_name,
    session_name,
    session_service_account_name,
    workspace_claim_name,
)
from controller.domain.work import HOLD_FINALIZER, HOLDER_UID_ANNOTATION, URI_ANNOTATION
from controller.k8s.builders.bindings import (
    BINDINGS_ENV,
    BINDINGS_MOUNT,
    bindings_config_map,
)
from controller.k8s.builders.common import (
    AGENT_LABEL,
    COMPONENT_LABEL,
    MANAGED_BY,
    MANAGER,
    adoptable,
    adoption,
    canonical,
    owned_by,
    owner_of,
)
from controller.k8s.builders.events import event
from controller.k8s.builders.holds import work_hold
from controller.k8s.builders.session import (
    launched_from,
    launched_from_pod,
    session_pod_of,
    session_workload,
)
from controller.k8s.builders.sidecar import (
    DELIVERY_CONTAINER,
    SIDECAR_UID,
    SessionDelivery,
    acknowledgement_lease,
    has_delivery_sidecar,
    session_role,
    session_role_binding,
    session_service_account,
)
from controller.k8s.builders.workspace import workspace_claim

__all__ = [
    "AGENT_LABEL",
    "BINDINGS_ENV",
    "BINDINGS_MOUNT",
    "COMPONENT_LABEL",
    "DELIVERY_CONTAINER",
    "HOLDER_UID_ANNOTATION",
    "HOLD_FINALIZER",
    "LAUNCHED_AT_ANNOTATION",
    "LAUNCH_GENERATION_ANNOTATION",
    "MANAGED_BY",
    "MANAGER",
    "SIDECAR_UID",
    "TRAJECTORY_HASH_ANNOTATION",
    "URI_ANNOTATION",
    "SessionDelivery",
    "acknowledgement_lease",
    "adoptable",
    "adoption",
    "bindings_config_map",
    "bindings_config_map_name",
    "canonical",
    "event",
    "has_delivery_sidecar",
    "launched_from",
    "launched_from_pod",
    "owned_by",
    "owner_of",
    "session_name",
    "session_pod_of",
    "session_role",
    "session_role_binding",
    "session_service_account",
    "session_service_account_name",
    "session_workload",
    "work_hold",
    "workspace_claim",
    "workspace_claim_name",
]
