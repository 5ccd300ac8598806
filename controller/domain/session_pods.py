"""An agent's session pods, found by what they are, and whether they have let go of its work.

A session pod is recognised by its namespace and the labels the session's pod template puts on
it (Bindery's, the agent's name, the ``session`` component, and the agent's uid where the pod
carries it), never through the StatefulSet or owner references: a StatefulSet deleted with
``--cascade=orphan`` leaves its pod running without an owner (and a recreated one adopts it), and
an agent whose finalizer was removed by hand leaves its pod running until the garbage collector
stops it. Either way the pod is still the session, and may still work on what it was delivered.

A work hold is released only when none of those pods runs (absent, or Succeeded/Failed: a
Terminating pod still runs), or when the running one acknowledged a document without the work
(see :mod:`controller.domain.acknowledgement`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from controller.domain.acknowledgement import (
    Acknowledgement,
    Confirmation,
    SessionPod,
    confirmation,
    digest,
)
from controller.domain.delivery import delivered_work_uris

__all__ = [
    "AGENT_LABEL",
    "AGENT_UID_LABEL",
    "COMPONENT_LABEL",
    "MANAGED_BY",
    "MANAGER",
    "SESSION_COMPONENT",
    "is_session_pod",
    "let_go",
    "standing",
]

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "bindery"
AGENT_LABEL = "bindery.dev/agent"
"""The agent's name, on everything Bindery makes for it."""
AGENT_UID_LABEL = "bindery.dev/agent-uid"
"""The agent's uid, on its session pods (pods launched before this label existed lack it)."""
COMPONENT_LABEL = "app.kubernetes.io/component"
SESSION_COMPONENT = "session"

_WORST_FIRST = (
    Confirmation.REFUSED,
    Confirmation.PENDING,
    Confirmation.UNVERIFIABLE,
    Confirmation.CONFIRMED,
)


def is_session_pod(labels: Mapping[str, str], agent_name: str, agent_uid: str = "") -> bool:
    """Whether a pod with ``labels`` (in the agent's namespace) is a session pod of the agent
    ``agent_name``: Bindery's session labels for that name, and no other agent's uid (a pod
    without the uid label counts for every agent of the name; with ``agent_uid`` empty, every
    pod of the name counts)."""
    if (
        labels.get(MANAGED_BY) != MANAGER
        or labels.get(AGENT_LABEL) != agent_name
        or labels.get(COMPONENT_LABEL) != SESSION_COMPONENT
    ):
        return False
    carried = labels.get(AGENT_UID_LABEL, "")
    return not carried or not agent_uid or carried == agent_uid


def standing(
    pods: Sequence[SessionPod], record: Acknowledgement | None, document_digest: str
) -> tuple[Confirmation, SessionPod | None]:
    """Where the agent's session, all its pods together, stands with the document whose digest
    is ``document_digest``, and the pod that answer is about.

    No running pod: confirmed (the first pod given, if any, is the one reported). Otherwise the
    least settled of the running pods decides (refused, then pending, then unverifiable, then
    confirmed; the first such pod in ``pods`` order): the acknowledgement record speaks for one
    pod only, so two running pods are never both confirmed by it.
    """
    running = [p for p in pods if p.running]
    if not running:
        return Confirmation.CONFIRMED, (pods[0] if pods else None)
    judged = [(confirmation(p, record, document_digest), p) for p in running]
    return min(judged, key=lambda j: _WORST_FIRST.index(j[0]))


def let_go(
    pods: Sequence[SessionPod], record: Acknowledgement | None, document: str, uris: Collection[str]
) -> bool:
    """Whether the session pods of an agent that is being deleted or is gone have let go of its
    work ``uris``: none runs, or each running one acknowledged the agent's current bindings
    ``document``, which carries none of ``uris``. A pod that cannot acknowledge is waited for
    until it stops (no grace: it could not say the work was withdrawn)."""
    if not any(p.running for p in pods):
        return True
    if not document or set(uris) & delivered_work_uris(document):
        return False
    return standing(pods, record, digest(document))[0] is Confirmation.CONFIRMED
