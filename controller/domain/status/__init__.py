"""Status documents for the five kinds, rebuilt from the observed world on every pass, and the
Events their transitions post.

Status is never accumulated: each pass computes it whole from the resolution, the observed holds
and the observed session workload. The only thing carried over is a condition's
``lastTransitionTime`` while its status stays the same, so an unchanged world yields a
byte-identical status and the reconciler writes nothing.

This package's namespace is the API the reconciler uses; its modules each build one part:
:mod:`.conditions` (the kstatus conditions every kind carries), :mod:`.agent` (an agent's status),
:mod:`.bindings` (an agent's binding rows), :mod:`.session` (an agent's session and launch
fields), :mod:`.kinds` (Tools, ResourceTypes, Resources, invalid specs), :mod:`.events` (the Events
a transition posts), :mod:`.fields` (shapes they share), :mod:`.fit` (every status cut to fit,
saying so) and :mod:`.failure` (the status of a pass that failed: the one rule).
"""

from controller.domain.status.agent import (
    RELEASING_STATE,
    SUSPENDED_STATE,
    agent_status,
    blocked_status,
    rejected_status,
    waiting_since,
)
from controller.domain.status.bindings import MAX_CANDIDATES, binding_counts, binding_rows
from controller.domain.status.conditions import (
    MAX_MESSAGE,
    MISSING_DEPENDENCY,
    RECONCILED,
    condition,
    health_conditions,
    is_ready,
    merge_conditions,
    now_micro_rfc3339,
    now_rfc3339,
    ready_condition,
    ready_message,
)
from controller.domain.status.events import Note, agent_events, tool_events
from controller.domain.status.fields import ERROR_STATE, PENDING_STATE
from controller.domain.status.kinds import (
    grant_status,
    invalid_status,
    resource_status,
    resource_type_status,
    tool_status,
)
from controller.domain.status.session import SessionView

__all__ = [
    "ERROR_STATE",
    "MAX_CANDIDATES",
    "MAX_MESSAGE",
    "MISSING_DEPENDENCY",
    "PENDING_STATE",
    "RECONCILED",
    "RELEASING_STATE",
    "SUSPENDED_STATE",
    "Note",
    "SessionView",
    "agent_events",
    "agent_status",
    "binding_counts",
    "binding_rows",
    "blocked_status",
    "condition",
    "grant_status",
    "health_conditions",
    "invalid_status",
    "is_ready",
    "merge_conditions",
    "now_micro_rfc3339",
    "now_rfc3339",
    "ready_condition",
    "ready_message",
    "rejected_status",
    "resource_status",
    "resource_type_status",
    "tool_events",
    "tool_status",
    "waiting_since",
]
