"""Rollout status: for a Resource, Tool, ResourceType or ResourceGrant at its current generation,
which of the agents depending on it have applied a document computed from that generation.

An agent's *sources* are the objects its last resolution read, each with the generation it read
(:func:`sources_of`): the Tools it names, the Resources bound to it (directly, by slot or by
selector), the ResourceTypes it checked them against, and the ResourceGrants that let it bind a
Resource of another namespace. Its *state* is where its session stands with the document the
controller last wrote for it (:func:`agent_state`). An object's rollout (:func:`count`) is the
tally, over the agents whose sources name it, of the agents that applied a document computed from
its current generation, that are still pending, that refused it, and that are suspended (they
receive it when they resume).

The rollout adds a ``Delivered`` condition to the object's status (True once nothing is pending;
a refusal keeps it False) and keeps ``Reconciling`` True while anything is pending: a rollout in
progress reads as progress (kstatus InProgress, Argo CD Progressing), never as a failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from bindery_session.wire import BindingState

from controller.domain.acknowledgement import Confirmation, DeliveryView
from controller.domain.models import AgentObject
from controller.domain.refs import Kind
from controller.domain.results import AgentResolution, BoundResource

MAX_LAGGARDS = 10
"""How many laggards a status lists by name (the counts cover them all)."""

DELIVERED = "Delivered"
"""The condition ``kubectl wait --for=condition=Delivered`` waits on."""
PENDING_REASON = "Pending"
REFUSED_REASON = "Refused"
ROLLOUT_PENDING = "RolloutPending"
"""The reason of ``Reconciling`` while a rollout is pending."""


class AgentState(StrEnum):
    """Where an agent's session stands with the last document written for it."""

    APPLIED = "Applied"
    """Its session applied it, or no session process runs (the document is in place for the
    next one), or its session cannot acknowledge (delivered, unverified)."""
    PENDING = "Pending"
    REFUSED = "Refused"
    SUSPENDED = "Suspended"
    """Suspended by its idle policy: it receives the document when it resumes."""


@dataclass(frozen=True, slots=True, order=True)
class Source:
    """An object an agent's resolution read, at the generation it read."""

    kind: Kind
    key: str
    generation: int


@dataclass(frozen=True, slots=True)
class AgentRollout:
    """One agent's side of every rollout it takes part in."""

    sources: frozenset[Source]
    state: AgentState
    detail: str = ""
    """Why it lags: the digest its runtime last applied (pending), the refusal (refused)."""


Generations = Callable[[Kind, str], int | None]
"""The current generation of a registered object (None: not registered)."""


def sources_of(
    agent: AgentObject, resolution: AgentResolution, generation: Generations
) -> frozenset[Source]:
    """The objects ``resolution`` (of ``agent``) read, each at its current generation; objects
    that are not registered are left out (nothing rolls out from them)."""
    namespace = agent.meta.namespace
    wanted: set[tuple[Kind, str]] = {(Kind.TOOL, f"{namespace}/{u.name}") for u in agent.spec.tools}
    bound: list[BoundResource] = []
    for direct in resolution.direct:
        wanted.add((Kind.TYPE, direct.tag))
        if direct.state is BindingState.BOUND and direct.resource is not None:
            bound.append(direct.resource)
    for slot in resolution.slots:
        wanted.add((Kind.TYPE, slot.resource_type))
        if slot.state is BindingState.BOUND and slot.resource is not None:
            bound.append(slot.resource)
    for resource in bound:
        wanted.add((Kind.TYPE, resource.type))
        if resource.name:
            wanted.add((Kind.RESOURCE, f"{resource.namespace}/{resource.name}"))
        if resource.grant:
            wanted.add((Kind.GRANT, resource.grant))
    out = set()
    for kind, key in wanted:
        current = generation(kind, key)
        if current is not None:
            out.add(Source(kind, key, current))
    return frozenset(out)


def agent_state(delivery: DeliveryView, *, suspended: bool) -> AgentState:
    """The agent's state from where its session stands with its document (the acknowledgement
    decision, :func:`~controller.domain.acknowledgement.confirmation`)."""
    if suspended:
        return AgentState.SUSPENDED
    match delivery.confirmation:
        case Confirmation.REFUSED:
            return AgentState.REFUSED
        case Confirmation.PENDING:
            return AgentState.PENDING
        case _:
            return AgentState.APPLIED


def agent_rollout(
    agent: AgentObject,
    resolution: AgentResolution,
    delivery: DeliveryView,
    *,
    suspended: bool,
    generation: Generations,
) -> AgentRollout:
    """An agent's entry after a pass: what it read, and where its session stands."""
    state = agent_state(delivery, suspended=suspended)
    detail = ""
    record = delivery.record
    if state is AgentState.REFUSED and record is not None:
        detail = record.refusal or "refused without a message"
    elif state is AgentState.PENDING:
        # What its runtime last applied: what it works with (a delivered document it has not
        # applied yet is not in use).
        has = record.applied_digest if record is not None else ""
        detail = (
            f"applied {_short(has)}, not yet {_short(delivery.digest)}"
            if has
            else f"has applied nothing in its current pod, not yet {_short(delivery.digest)}"
        )
    return AgentRollout(sources_of(agent, resolution, generation), state, detail)


def _short(digest: str) -> str:
    return digest[:19]  # "sha256:" and 12 hex digits


@dataclass(frozen=True, slots=True)
class Laggard:
    """An agent that has not applied the current generation, and why."""

    agent: str
    state: AgentState
    detail: str

    def as_status(self) -> dict[str, str]:
        out = {"agent": self.agent, "state": self.state.value}
        if self.detail:
            out["message"] = self.detail
        return out

    def __str__(self) -> str:
        return f"{self.agent} ({self.detail})" if self.detail else self.agent


@dataclass(frozen=True)
class Rollout:
    """An object's rollout at one generation."""

    generation: int
    dependents: int = 0
    applied: int = 0
    pending: int = 0
    refused: int = 0
    suspended: int = 0
    laggards: tuple[Laggard, ...] = ()
    """The first :data:`MAX_LAGGARDS` refused, then pending, agents, by name."""
    stale: tuple[str, ...] = ()
    """Dependents whose last resolution read an older generation of the object (not in status:
    the reconciler resolves them again)."""

    @property
    def delivered(self) -> str:
        """The printer column: applied of dependents."""
        return f"{self.applied}/{self.dependents}"

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "generation": self.generation,
            "dependents": self.dependents,
            "applied": self.applied,
            "pending": self.pending,
            "refused": self.refused,
            "suspended": self.suspended,
        }
        if self.laggards:
            out["laggards"] = [lag.as_status() for lag in self.laggards]
        return out

    @classmethod
    def from_status(cls, block: Mapping[str, Any] | None) -> Rollout | None:
        """The rollout a status reported (None: none, or not readable)."""
        if not block:
            return None
        try:
            laggards = tuple(
                Laggard(str(lag["agent"]), AgentState(lag["state"]), str(lag.get("message", "")))
                for lag in block.get("laggards") or []
            )
            return cls(
                generation=int(block["generation"]),
                dependents=int(block["dependents"]),
                applied=int(block["applied"]),
                pending=int(block["pending"]),
                refused=int(block["refused"]),
                suspended=int(block["suspended"]),
                laggards=laggards,
            )
        except (KeyError, TypeError, ValueError):
            return None

    def condition_parts(self) -> tuple[bool, str, str]:
        """``Delivered``'s status, reason and message."""
        of = f"generation {self.generation}: applied by {self.applied} of {self.dependents}"
        of += " dependent agent(s)"
        if self.suspended:
            of += f", {self.suspended} suspended (they receive it on resume)"
        refused = [lag for lag in self.laggards if lag.state is AgentState.REFUSED]
        pending = [lag for lag in self.laggards if lag.state is AgentState.PENDING]
        if self.pending:
            return False, PENDING_REASON, f"{of}; {self.pending} pending: {_names(pending)}"
        if self.refused:
            message = f"{of}; {self.refused} refused it: {_names(refused)}"
            return False, REFUSED_REASON, message + "; see each agent's status.delivery"
        if not self.dependents:
            return True, DELIVERED, f"generation {self.generation}: no agent depends on it"
        return True, DELIVERED, of


def _names(laggards: list[Laggard]) -> str:
    return "; ".join(str(lag) for lag in laggards) or "(not listed)"


def count(
    kind: Kind,
    key: str,
    generation: int,
    dependents: Iterable[tuple[str, AgentRollout]],
    *,
    max_laggards: int = MAX_LAGGARDS,
) -> Rollout:
    """The rollout of the object ``kind``/``key`` at ``generation`` over its dependents (each
    agent key with its entry; an entry whose sources do not name the object is not counted).

    An agent counts as applied only if its last resolution read this very generation and its
    session applied the document; one that read an older generation is pending (its new
    document is not computed yet); a suspended one is suspended whatever it read.
    """
    applied = pending = refused = suspended = 0
    lagging: list[Laggard] = []
    stale: list[str] = []
    current = Source(kind, key, generation)
    for agent, entry in sorted(dependents):
        if current in entry.sources:  # the common case, without a scan of its sources
            read: int | None = generation
        else:
            read = next(
                (s.generation for s in entry.sources if s.kind is kind and s.key == key), None
            )
        if read is None:
            continue
        if entry.state is AgentState.SUSPENDED:
            suspended += 1
        elif read != generation:
            pending += 1
            stale.append(agent)
            lagging.append(Laggard(agent, AgentState.PENDING, f"resolved from generation {read}"))
        elif entry.state is AgentState.APPLIED:
            applied += 1
        elif entry.state is AgentState.REFUSED:
            refused += 1
            lagging.append(Laggard(agent, entry.state, entry.detail))
        else:
            pending += 1
            lagging.append(Laggard(agent, entry.state, entry.detail))
    # Refusals first: they need a person; then the pending, by name.
    lagging.sort(key=lambda lag: (lag.state is not AgentState.REFUSED, lag.agent))
    return Rollout(
        generation=generation,
        dependents=applied + pending + refused + suspended,
        applied=applied,
        pending=pending,
        refused=refused,
        suspended=suspended,
        laggards=tuple(lagging[:max_laggards]),
        stale=tuple(stale),
    )


def explain(kind: Kind, key: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """What ``bindery why KIND/NAME`` reports of an object's rollout, from the object as the API
    server returns it: the counts for its generation, the Delivered condition, and the laggards
    by name with why (the digest a pending one has, a refusal)."""
    md = body.get("metadata") or {}
    st = body.get("status") or {}
    generation = int(md.get("generation") or 0)
    doc: dict[str, Any] = {"kind": kind.kind_name, "name": key, "generation": generation}
    counted = Rollout.from_status(st.get("rollout"))
    delivered = next((c for c in st.get("conditions") or [] if c.get("type") == DELIVERED), None)
    if counted is None:
        doc["verdict"] = (
            f"the controller has not counted generation {generation}'s rollout yet (it counts "
            "once every agent has had its first pass after a start)"
        )
        return doc
    doc["rollout"] = counted.as_status()
    doc["delivered"] = counted.delivered
    if delivered is not None:
        doc["condition"] = {
            k: delivered[k] for k in ("status", "reason", "message") if k in delivered
        }
    if counted.generation != generation:
        doc["verdict"] = (
            f"these counts are for generation {counted.generation}; the controller has not "
            f"counted generation {generation} yet"
        )
    elif counted.pending:
        doc["verdict"] = f"{counted.pending} dependent agent(s) have not applied it yet"
    elif counted.refused:
        doc["verdict"] = f"{counted.refused} dependent agent(s) refused it"
    else:
        doc["verdict"] = "every dependent agent applied it (or is suspended and gets it on resume)"
    listed = len(counted.laggards)
    lagging = counted.pending + counted.refused
    if lagging > listed:
        doc["unlisted"] = lagging - listed
    return doc
