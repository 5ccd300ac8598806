"""Reconcilers of the supporting kinds: each rebuilds its object's status from the view.

They share one skeleton (:class:`StatusReconciler`): read the object's generation and old
status, build the new status, write it if it differs, then act on what changed. Each kind
supplies only how its status is built (and, for Tools, the Events a change posts).
"""

from __future__ import annotations

from typing import Any, Protocol

from controller.domain import status
from controller.domain.refs import Request
from controller.domain.registry import Registry
from controller.domain.rollout import Rollout
from controller.k8s import api
from controller.reconcile.compact import status_of
from controller.reconcile.events import EventRecorder
from controller.reconcile.index import HoldIndex
from controller.reconcile.passes import Pass
from controller.reconcile.result import Result
from controller.reconcile.rollouts import Rollouts
from controller.reconcile.writer import Writer

Body = dict[str, Any]


class Reconciler(Protocol):
    """Reconciles one kind: recompute from the view, converge; what the pass came to."""

    async def reconcile(self, pass_: Pass) -> Result: ...

    async def gone(self, pass_: Pass) -> None:
        """The object has left the view: clean up what it leaves behind (nothing, mostly)."""


async def write_status(writer: Writer, pass_: Pass, body: Body, new: Body) -> bool:
    """Replace ``body``'s status with ``new`` unless it is already exactly that."""
    if status_of(body) == new:
        return False
    endpoint = api.ENDPOINTS[pass_.request.kind]
    written = await writer.replace_status(pass_, endpoint, body, new)
    return written is not None


class StatusReconciler:
    """The skeleton of a kind whose pass only rebuilds its status: read the object, build the
    status (:meth:`build`), write it if it changed, act on the change (:meth:`changed`)."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        rollouts: Rollouts | None = None,
    ):
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors
        self.rollouts = rollouts

    async def reconcile(self, pass_: Pass) -> Result:
        request, body = pass_.request, pass_.body
        gen = int(body["metadata"].get("generation", 0))
        old, now = pass_.old, pass_.now.rfc3339
        error = self.parse_errors.get(request)
        new = self.build(request, gen, old, now) if not error else None
        if new is None:
            new = status.invalid_status(gen, error or "not parsed", old, now)
        changed = await write_status(self.writer, pass_, body, new)
        if changed:
            self.changed(pass_, new)
        return Result(changed=changed)

    def build(self, request: Request, gen: int, old: Body, now: str) -> Body | None:
        """The object's new status; None when the view holds no parsed object for it."""
        raise NotImplementedError

    def rollout(self, request: Request, gen: int, old: Body) -> Rollout | None:
        """The object's rollout at ``gen`` over the agents depending on it; while the tracker is
        cold (just started), the one its status reports for ``gen``; None: not known."""
        if self.rollouts is None:
            return None
        kind, key = request.kind, request.ref.key
        counted = self.rollouts.count(kind, key, gen)
        if counted is None:
            before = Rollout.from_status(old.get("rollout"))
            return before if before is not None and before.generation == gen else None
        self.rollouts.stale(kind, key, counted)
        return counted

    def changed(self, pass_: Pass, new: Body) -> None:
        """The status written differs from the pass's old one: nothing more to do, mostly."""

    async def gone(self, pass_: Pass) -> None:
        return None


class ResourceTypeReconciler(StatusReconciler):
    """A ResourceType's status: its type closure, unknown parents and cycles."""

    def build(self, request: Request, gen: int, old: Body, now: str) -> Body | None:
        closure = self.registry.closure(request.ref.name)
        return status.resource_type_status(
            generation=gen,
            closure=closure,
            old=old,
            now=now,
            rollout=self.rollout(request, gen, old),
        )


class ResourceReconciler(StatusReconciler):
    """A Resource's status: its type and URI checks, and which agent holds its URI as work."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        holds: HoldIndex,
        rollouts: Rollouts | None = None,
    ) -> None:
        super().__init__(registry, writer, parse_errors, rollouts)
        self.holds = holds

    def build(self, request: Request, gen: int, old: Body, now: str) -> Body | None:
        res = self.registry.resource(request.ref.key)
        if res is None:
            return None
        return status.resource_status(
            generation=gen,
            errors=self.registry.validate_resource(request.ref.key),
            holder=self.holds.holding(res.meta.namespace, res.spec.uri),
            old=old,
            now=now,
            rollout=self.rollout(request, gen, old),
        )


class ToolReconciler(StatusReconciler):
    """A Tool's status: whether each static slot names an existing, type-compatible Resource."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        events: EventRecorder,
        rollouts: Rollouts | None = None,
    ) -> None:
        super().__init__(registry, writer, parse_errors, rollouts)
        self.events = events

    def build(self, request: Request, gen: int, old: Body, now: str) -> Body | None:
        tool = self.registry.tool(request.ref.key)
        if tool is None:
            return None
        return status.tool_status(
            generation=gen,
            tool=tool.spec,
            validation=self.registry.validate_tool(request.ref.key),
            old=old,
            now=now,
            rollout=self.rollout(request, gen, old),
        )

    def changed(self, pass_: Pass, new: Body) -> None:
        for note in status.tool_events(pass_.old, new):
            self.events.record(pass_.body, note, pass_.now)


class GrantReconciler(StatusReconciler):
    """A ResourceGrant's status: Ready once observed (what it admits shows on the referrers)."""

    def build(self, request: Request, gen: int, old: Body, now: str) -> Body | None:
        grant = self.registry.grant(request.ref.key)
        if grant is None:
            return None
        uses = [use.value for use in grant.spec.uses]
        return status.grant_status(
            generation=gen, uses=uses, old=old, now=now, rollout=self.rollout(request, gen, old)
        )
