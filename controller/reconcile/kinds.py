"""Reconcilers of the supporting kinds: each rebuilds its object's status from the view.

They share one skeleton (:class:`StatusReconciler`): read the object's generation and old
status, build the new status, write it if it differs, then act on what changed. Each kind
supplies only how its status is built (and, for Tools, the Events a change posts).
"""

from __future__ import annotations

from typing import Any, Protocol

import structlog

from controller.domain import status
from controller.domain.errors import ApiServerError, InvalidInputError, RunError
from controller.domain.refs import Request
from controller.domain.registry import Registry
from controller.domain.rollout import Rollout
from controller.domain.status import failure
from controller.domain.status.fit import fit
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile.compact import status_of
from controller.reconcile.events import EventRecorder
from controller.reconcile.index import HoldIndex
from controller.reconcile.passes import Pass
from controller.reconcile.result import Result
from controller.reconcile.rollouts import Rollouts
from controller.reconcile.writer import Writer

log = structlog.get_logger("bindery.reconciler")

Body = dict[str, Any]


class Reconciler(Protocol):
    """Reconciles one kind: recompute from the view, converge; what the pass came to."""

    async def reconcile(self, pass_: Pass) -> Result: ...

    async def gone(self, pass_: Pass) -> None:
        """The object has left the view: clean up what it leaves behind (nothing, mostly)."""


async def write_status(writer: Writer, pass_: Pass, body: Body, new: Body) -> bool:
    """Replace ``body``'s status with ``new`` cut to fit (:func:`fit`, which says so on
    the status), unless it is already exactly that. Every status the five kinds write goes
    through here.

    A write the API server refuses (a value the CRD's status schema does not take, a status
    too large) is raised with the fields it names noted on the error (:func:`failure.field_note`),
    so that the pass reports it by :func:`report_failure`."""
    old = pass_.old if body is pass_.body else status_of(body)  # thawed once a pass
    if old == new:  # already so (a status this pass wrote fitted): not measured again
        return False
    new = fit(new)
    if old == new:
        return False
    endpoint = api.ENDPOINTS[pass_.request.kind]
    try:
        written = await writer.replace_status(pass_, endpoint, body, new)
    except ApiError as exc:
        if exc.refused and not exc.namespace_terminating:
            exc.add_note(failure.field_note(", ".join(exc.fields) or "status"))
        raise
    return written is not None


def reported_failure(exc: Exception) -> bool:
    """Whether the one rule reports ``exc`` on the object (see
    :mod:`controller.domain.status.failure`): anything but the API server's own answers, which
    the worker retries (a refused status write excepted: it is the object's status that cannot
    be written), and the process's own (leadership lost), which are not about the object."""
    if isinstance(exc, ApiError):
        return exc.refused and failure.field_of(exc).startswith("status")
    return not isinstance(exc, ApiServerError | RunError)


async def report_failure(
    writer: Writer,
    events: EventRecorder | None,
    pass_: Pass,
    body: Body,
    exc: Exception,
    *,
    state: bool = False,
) -> Result:
    """Say on ``body`` that its pass failed with ``exc`` (the one rule): a spec the project
    refuses claims the generation (``InvalidSpec``), anything else leaves ``observedGeneration``
    where it was (``ReconcileFailed``); a Warning event when the status changes. The pass is
    retried with backoff (``Result.failed``). ``state``: the object has a ``state`` (agents)."""
    request = pass_.request
    gen = generation(pass_)
    what = f"{request.kind.kind_name} {request.ref.key}"
    if isinstance(exc, InvalidInputError):
        message = f"{what}: {failure.refusal(exc)}"
        new = status.invalid_status(gen, message, pass_.old, pass_.now.rfc3339, state=state)
        note = failure.refused_note(message)
    else:
        fix = (
            "find what refuses it in the error (an admission policy or webhook on the status "
            "subresource, the object's size); the first pass it admits clears this"
            if isinstance(exc, ApiError)
            else ""
        )
        message = failure.failure_message(what, gen, exc, fix=fix)
        new = failure.failed_status(
            generation=gen, old=pass_.old, now=pass_.now.rfc3339, message=message, state=state
        )
        note = failure.failed_note(message)
    log.warning(
        "reconcile failed; reported on the object, retrying with backoff",
        error=failure.one_line(f"{type(exc).__name__}: {exc}"),
        field=failure.field_of(exc),
        exc_info=exc,
    )
    changed = await write_status(writer, pass_, body, new)
    if changed and events is not None:
        events.record(body, note, pass_.now)
    return Result(changed=changed, failed=True)


def generation(pass_: Pass) -> int:
    """The generation of the pass's object."""
    return int(pass_.body["metadata"].get("generation", 0))


class StatusReconciler:
    """The skeleton of a kind whose pass only rebuilds its status: read the object, build the
    status (:meth:`build`), write it if it changed, act on the change (:meth:`changed`)."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        rollouts: Rollouts | None = None,
        *,
        events: EventRecorder | None = None,
    ):
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors
        self.rollouts = rollouts
        self.events = events
        """Where the Events of a change and of a failed pass go (None: nowhere)."""

    async def reconcile(self, pass_: Pass) -> Result:
        """Rebuild the status; a failure of this object's pass is reported on it (the one rule:
        see :func:`report_failure`), never raised past it, but for the API server's own answers."""
        try:
            return await self._reconcile(pass_)
        except Exception as exc:
            if not reported_failure(exc):
                raise
            return await report_failure(self.writer, self.events, pass_, pass_.body, exc)

    async def _reconcile(self, pass_: Pass) -> Result:
        request, body = pass_.request, pass_.body
        gen = generation(pass_)
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
        *,
        events: EventRecorder | None = None,
    ) -> None:
        super().__init__(registry, writer, parse_errors, rollouts, events=events)
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
        super().__init__(registry, writer, parse_errors, rollouts, events=events)

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
        if self.events is None:
            return
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
