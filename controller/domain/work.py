"""The ``work`` binding: a URI held by at most one agent, handed off A -> no holder -> B.

Holds live in API objects that the API server arbitrates (create-if-absent, delete with a
precondition); this module only decides, from what was observed, what one agent's pass should do.
Safety does not depend on these decisions being made with fresh data: a stale view can at worst
make an agent wait one more pass, because acquisition itself is a create that only one agent can
win, and a holder releases only after its delivered bindings no longer contain the URI.

**Scope.** In the ``namespace`` scope (the default) a URI has at most one holder per namespace and
the hold lives in its holder's namespace; in the ``cluster`` scope it has at most one holder in
the cluster and every hold lives in one namespace (the controller's), so the API server arbitrates
one name per URI for all namespaces. Switching scope leaves holds in the other location for a
while; they still count. An agent acquires in its configured location only when no hold for the
URI held by another live agent of its scope exists anywhere (see :func:`in_scope`), and a holder
whose hold is in the other location moves it: it acquires the configured one first and then
retires the old one, so it never stops holding. Two holders inherited from the namespace scope
(one URI held in two namespaces) settle when the scope becomes ``cluster``: the hold in the
configured location, else the oldest, keeps it; the others withdraw the URI, release and wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from controller.domain.names import hold_name

__all__ = [
    "HOLDER_UID_ANNOTATION",
    "HOLD_FINALIZER",
    "URI_ANNOTATION",
    "Claim",
    "Hold",
    "WorkPlan",
    "WorkScope",
    "WorkState",
    "hold_location",
    "hold_name",
    "in_scope",
    "plan_work",
]

HOLD_FINALIZER = "bindery.dev/hold"
"""Keeps a hold Lease until its holder releases it (after withdrawing the URI)."""
URI_ANNOTATION = "bindery.dev/uri"
HOLDER_UID_ANNOTATION = "bindery.dev/holder-uid"


class WorkScope(StrEnum):
    """Where a work URI is exclusive: within each namespace, or across the cluster."""

    NAMESPACE = "namespace"
    CLUSTER = "cluster"


def hold_location(scope: WorkScope, agent_namespace: str, hold_namespace: str) -> str:
    """The namespace an agent's hold is created in under ``scope``."""
    return hold_namespace if scope is WorkScope.CLUSTER else agent_namespace


def in_scope(scope: WorkScope, agent_namespace: str, hold: Hold) -> bool:
    """Whether ``hold`` (wherever it lives) excludes an agent of ``agent_namespace``: every hold
    in the cluster scope; the holds of its own namespace's agents in the namespace scope."""
    return scope is WorkScope.CLUSTER or hold.holder.rpartition("/")[0] == agent_namespace


@dataclass(frozen=True)
class Hold:
    """An observed hold object."""

    uri: str
    holder: str
    """``namespace/name`` of the holding agent."""
    holder_uid: str
    name: str = ""
    resource_version: str = ""
    uid: str = ""
    namespace: str = ""
    """The namespace the hold Lease lives in ("" when not known: its holder's)."""
    created: str = ""
    """Its creationTimestamp (RFC 3339): the oldest of two inherited holders keeps the URI."""
    deleting: bool = False
    """Someone asked the API server to delete it (a namespace going away, an administrator):
    its holder withdraws the URI and lets it go."""

    @classmethod
    def from_lease(cls, body: dict[str, Any] | None) -> Hold | None:
        """The hold a Lease body records, or None if it records none (no URI or no holder)."""
        if not body:
            return None
        md = body.get("metadata") or {}
        ann = md.get("annotations") or {}
        uri = ann.get(URI_ANNOTATION)
        holder = (body.get("spec") or {}).get("holderIdentity")
        if not uri or not holder:
            return None
        return cls(
            uri=uri,
            holder=holder,
            holder_uid=ann.get(HOLDER_UID_ANNOTATION, ""),
            name=md.get("name", ""),
            resource_version=str(md.get("resourceVersion", "")),
            uid=md.get("uid", ""),
            namespace=md.get("namespace", ""),
            created=str(md.get("creationTimestamp", "")),
            deleting=bool(md.get("deletionTimestamp")),
        )

    def to_lease(self, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """The Lease recording this hold: to create (a new hold has no uid or version yet, its
        name derives from its URI, and it lives in its holder's namespace unless placed), or
        to guard a release of exactly this one (its uid and version)."""
        md: dict[str, Any] = {
            "name": self.name or hold_name(self.uri),
            "namespace": self.namespace or self.holder.rpartition("/")[0],
        }
        if self.uid:  # an observed hold
            md["uid"] = self.uid
            md["resourceVersion"] = self.resource_version
        if labels:
            md["labels"] = dict(labels)
        md["annotations"] = {URI_ANNOTATION: self.uri, HOLDER_UID_ANNOTATION: self.holder_uid}
        md["finalizers"] = [HOLD_FINALIZER]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": md,
            "spec": {"holderIdentity": self.holder},
        }


@dataclass(frozen=True)
class Claim:
    """Another agent that wants the same URI; ordered for fair acquisition."""

    agent: str
    waiting_since: str = ""
    """RFC 3339 time this agent started waiting (from its status), empty if never recorded."""

    def order(self) -> tuple[int, str, str]:
        """Agents that recorded when they began waiting go first, oldest first; then by name."""
        return (0, self.waiting_since, self.agent) if self.waiting_since else (1, "", self.agent)


class WorkState(StrEnum):
    IDLE = "Idle"
    WORKING = "Working"
    WAITING = "Waiting"


@dataclass(frozen=True)
class WorkPlan:
    state: WorkState
    uri: str = ""
    acquire: bool = False
    """Create the hold for ``uri`` (create-if-absent: losing the race means waiting)."""
    reclaim: Hold | None = None
    """A hold whose holder no longer exists: delete it (with a precondition), then acquire."""
    release: list[Hold] = field(default_factory=list)
    """Holds this agent owns but no longer wants: release after delivering bindings without them."""
    waiting_for: str = ""
    """Who holds the URI, or who is ahead in line, while waiting."""
    deliver: bool = False
    """Whether the delivered bindings may contain the work URI (only while held)."""
    retire: list[Hold] = field(default_factory=list)
    """This agent's holds of ``uri`` in the other location: delete once ``acquire`` has created
    the one in the configured location (the URI stays held throughout, so no withdrawal)."""


def plan_work(
    *,
    agent: str,
    agent_uid: str,
    desired_uri: str | None,
    holds: dict[str, Hold],
    own_holds: list[Hold],
    holder_exists: bool,
    me: Claim,
    rivals: list[Claim],
    location: str | None = None,
    elsewhere: Sequence[Hold] = (),
) -> WorkPlan:
    """Decide one agent's work-hold step.

    ``holds`` maps a URI to its observed hold in the configured location; only ``desired_uri`` is
    looked up. ``own_holds`` are the holds naming this agent (by uid), wherever they live.
    ``holder_exists`` says whether the agent recorded on the hold for ``desired_uri`` still
    exists with the recorded uid. ``rivals`` are the other agents whose ``work`` binding asks for
    the same URI and is not held by them. ``location`` is the namespace of the configured
    location (None: there is only one, and every hold is in it); ``elsewhere`` are the holds of
    ``desired_uri`` outside it that count in this agent's scope and whose holder exists and is
    another agent.
    """
    release = sorted((h for h in own_holds if h.uri != desired_uri), key=lambda h: (h.uri, h.name))
    if desired_uri is None:
        return WorkPlan(state=WorkState.IDLE, release=release)

    hold = holds.get(desired_uri)
    moving = sorted(
        (
            h
            for h in own_holds
            if h.uri == desired_uri and location is not None and h.namespace != location
        ),
        key=lambda h: (h.namespace, h.name),
    )
    if hold is not None and hold.holder_uid == agent_uid:
        return WorkPlan(
            state=WorkState.WORKING,
            uri=desired_uri,
            release=release,
            deliver=True,
            retire=moving,
        )
    contested = _contested(
        desired_uri,
        hold=hold,
        holder_exists=holder_exists,
        release=release,
        moving=moving,
        elsewhere=elsewhere,
    )
    if contested is not None:
        return contested

    ahead = [r for r in rivals if r.order() < me.order()]
    if ahead:
        first = min(ahead, key=Claim.order)
        return WorkPlan(
            state=WorkState.WAITING,
            uri=desired_uri,
            release=release,
            reclaim=hold,
            waiting_for=first.agent,
        )
    return WorkPlan(
        state=WorkState.WAITING,
        uri=desired_uri,
        release=release,
        reclaim=hold,
        acquire=True,
        waiting_for=hold.holder if hold else "",
    )


def _contested(
    uri: str,
    *,
    hold: Hold | None,
    holder_exists: bool,
    release: list[Hold],
    moving: list[Hold],
    elsewhere: Sequence[Hold],
) -> WorkPlan | None:
    """The plan when the configured location is held by another, when this agent holds the URI
    in the other location, or when another agent of its scope does (None: none of these)."""
    others = sorted(elsewhere, key=lambda h: (h.created, h.namespace, h.name))
    withdraw = sorted([*release, *moving], key=lambda h: (h.uri, h.name))
    if hold is not None and holder_exists:
        # Held in the configured location by another: settled there. A hold of ours in the
        # other location (inherited from the other scope) is withdrawn and released.
        return WorkPlan(state=WorkState.WAITING, uri=uri, release=withdraw, waiting_for=hold.holder)
    if moving:
        mine = moving[0]
        older = [o for o in others if (o.created, o.namespace) < (mine.created, mine.namespace)]
        if older:  # two holders inherited from the namespace scope: the oldest keeps it
            return WorkPlan(
                state=WorkState.WAITING, uri=uri, release=withdraw, waiting_for=older[0].holder
            )
        # Still ours where it was: keep delivering, and move it to the configured location.
        return WorkPlan(
            state=WorkState.WORKING,
            uri=uri,
            release=release,
            reclaim=hold,
            acquire=True,
            deliver=True,
            retire=moving,
        )
    if others:  # held in the other location by another agent of this scope: it counts
        return WorkPlan(
            state=WorkState.WAITING, uri=uri, release=release, waiting_for=others[0].holder
        )
    return None
