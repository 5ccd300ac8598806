"""The ``work`` binding: a URI held by at most one agent, handed off A -> no holder -> B.

Holds live in API objects that the API server arbitrates (create-if-absent, delete with a
precondition); this module only decides, from what was observed, what one agent's pass should do.
Safety does not depend on these decisions being made with fresh data: a stale view can at worst
make an agent wait one more pass, because acquisition itself is a create that only one agent can
win, and a holder releases only after its delivered bindings no longer contain the URI.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum


def hold_name(uri: str) -> str:
    """The deterministic object name of the hold for ``uri`` (URIs are compared byte for byte)."""
    return "bindery-work-" + hashlib.sha256(uri.encode()).hexdigest()[:40]


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
    deleting: bool = False
    """Someone asked the API server to delete it (a namespace going away, an administrator):
    its holder withdraws the URI and lets it go."""


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
) -> WorkPlan:
    """Decide one agent's work-hold step.

    ``holds`` maps a URI to its observed hold; only ``desired_uri`` is looked up. ``own_holds`` are
    the holds naming this agent (by uid). ``holder_exists`` says whether the agent recorded on the
    hold for ``desired_uri`` still exists with the recorded uid. ``rivals`` are the other agents
    whose ``work`` binding asks for the same URI and is not held by them.
    """
    release = sorted((h for h in own_holds if h.uri != desired_uri), key=lambda h: (h.uri, h.name))
    if desired_uri is None:
        return WorkPlan(state=WorkState.IDLE, release=release)

    hold = holds.get(desired_uri)
    if hold is not None and hold.holder_uid == agent_uid:
        return WorkPlan(state=WorkState.WORKING, uri=desired_uri, release=release, deliver=True)
    if hold is not None and holder_exists:
        return WorkPlan(
            state=WorkState.WAITING, uri=desired_uri, release=release, waiting_for=hold.holder
        )

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
