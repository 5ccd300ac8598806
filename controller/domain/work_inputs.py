"""What one agent's work plan is decided from, gathered from observed objects.

:func:`controller.domain.work.plan_work` decides; this module gathers its inputs: the agent's
desired URI (its ``work`` binding unless that is in error or one of its holds is being deleted),
the hold in its configured location, the holds of the URI elsewhere that count in its scope, and
the other claimants in its line (those whose work binding can hold: not blocked, not a holder).
The controller feeds it from its store and indexes (``WorkHolds.plan``); ``bindery why`` feeds it
from the objects it lists. Both reach the same plan from the same world, because this is the
only place that turns a world into the plan's inputs.

Whether a hold's holder still exists is the one question that may need the API server (the
controller asks it when the holder is not in its view): :func:`holds_in_question` names the
holds whose holder matters, and the caller answers for those.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bindery_session.wire import BindingState

from controller.domain.models import WORK_ROLE
from controller.domain.results import AgentResolution, DirectResult
from controller.domain.work import (
    Claim,
    Hold,
    WorkPlan,
    WorkScope,
    hold_location,
    in_scope,
    plan_work,
)


def claim_from(agent_key: str, agent_status: Mapping[str, Any], uri: str) -> Claim:
    """An agent's place in line for ``uri``, from the waiting time its status recorded."""
    work = agent_status.get("work") or {}
    since = work.get("since", "") if work.get("uri") == uri and not work.get("held") else ""
    return Claim(agent=agent_key, waiting_since=since)


def work_result(resolution: AgentResolution) -> DirectResult | None:
    """The agent's resolved ``work`` binding, if it has one."""
    return next((d for d in resolution.direct if d.name == WORK_ROLE), None)


def blocked(resolution: AgentResolution) -> bool:
    """Whether the agent's work binding is in error: it cannot hold, so it waits in no line."""
    work = work_result(resolution)
    return work is not None and work.state is BindingState.ERROR


@dataclass(frozen=True)
class WorkWorld:
    """The observed world around one agent's work URI.

    ``holds`` are the observed holds of the URI in every namespace (each with its namespace);
    ``line`` the agents of the agent's line (its namespace's, or the cluster's under the cluster
    scope) whose spec asks for the URI; ``blocked`` those of them whose work binding is in
    error; ``status_of`` an agent's last written status (its waiting time).
    """

    scope: WorkScope = WorkScope.NAMESPACE
    hold_namespace: str = ""
    holds: Sequence[Hold] = ()
    line: Collection[str] = ()
    blocked: Collection[str] = ()
    status_of: Callable[[str], Mapping[str, Any]] = field(default=lambda _key: {})


@dataclass(frozen=True)
class WorkInputs:
    """The arguments of :func:`controller.domain.work.plan_work` for one agent."""

    agent: str
    agent_uid: str
    desired_uri: str | None
    holds: dict[str, Hold]
    own_holds: list[Hold]
    holder_exists: bool
    me: Claim
    rivals: list[Claim]
    location: str | None = None
    elsewhere: list[Hold] = field(default_factory=list)

    def plan(self) -> WorkPlan:
        return plan_work(
            agent=self.agent,
            agent_uid=self.agent_uid,
            desired_uri=self.desired_uri,
            holds=self.holds,
            own_holds=self.own_holds,
            holder_exists=self.holder_exists,
            me=self.me,
            rivals=self.rivals,
            location=self.location,
            elsewhere=self.elsewhere,
        )

    @property
    def hold(self) -> Hold | None:
        """The hold of the desired URI in the configured location."""
        return self.holds.get(self.desired_uri) if self.desired_uri else None


def desired_uri(resolution: AgentResolution, own_holds: Iterable[Hold]) -> str | None:
    """The URI the agent should hold now: its work binding's, unless that is in error, or one of
    its holds is being deleted (its namespace is going away: it withdraws and lets go, and
    acquires again when it can; nobody else can take the URI before that)."""
    if any(h.deleting for h in own_holds):
        return None
    work = work_result(resolution)
    return work.uri if work is not None and work.state is not BindingState.ERROR else None


def location_of(world: WorkWorld, namespace: str) -> str:
    """The namespace an agent of ``namespace`` creates its hold in."""
    return hold_location(world.scope, namespace, world.hold_namespace)


def holds_in_question(
    world: WorkWorld, *, namespace: str, agent_uid: str, uri: str | None
) -> list[Hold]:
    """The holds of ``uri`` whose holder's existence the plan depends on: the one in the
    configured location, and another agent's that count in the scope elsewhere."""
    if not uri:
        return []
    where = location_of(world, namespace)
    return [
        h
        for h in world.holds
        if h.uri == uri
        and (
            h.namespace == where
            or (h.holder_uid != agent_uid and in_scope(world.scope, namespace, h))
        )
    ]


def work_inputs(
    *,
    agent: str,
    agent_uid: str,
    resolution: AgentResolution,
    own_holds: Sequence[Hold],
    old: Mapping[str, Any],
    world: WorkWorld,
    live: Collection[Hold],
) -> WorkInputs:
    """The inputs of ``agent``'s work plan in ``world``. ``live`` are the holds (among
    :func:`holds_in_question`) whose holder exists with the recorded uid."""
    namespace = agent.rpartition("/")[0]
    own = list(own_holds)
    uri = desired_uri(resolution, own)
    if uri is None:
        return WorkInputs(
            agent=agent,
            agent_uid=agent_uid,
            desired_uri=None,
            holds={},
            own_holds=own,
            holder_exists=False,
            me=claim_from(agent, old, ""),
            rivals=[],
        )
    where = location_of(world, namespace)
    hold = next((h for h in world.holds if h.uri == uri and h.namespace == where), None)
    elsewhere = [
        h
        for h in world.holds
        if h.uri == uri
        and h.namespace != where
        and h.holder_uid != agent_uid
        and in_scope(world.scope, namespace, h)
        and h in live
    ]
    holders = {h.holder for h in elsewhere} | ({hold.holder} if hold else set())
    rivals = [
        claim_from(other, world.status_of(other), uri)
        for other in sorted(world.line)
        if other != agent and other not in holders and other not in world.blocked
    ]
    return WorkInputs(
        agent=agent,
        agent_uid=agent_uid,
        desired_uri=uri,
        holds={uri: hold} if hold else {},
        own_holds=own,
        holder_exists=hold is not None and hold in live,
        me=claim_from(agent, old, uri),
        rivals=rivals,
        location=where,
        elsewhere=elsewhere,
    )
