"""Reconcilers of the three supporting kinds: each rebuilds its object's status from the view."""

from __future__ import annotations

from typing import Any, Protocol

from controller.domain import status
from controller.domain.refs import Request
from controller.domain.registry import Registry
from controller.k8s import api
from controller.reconcile.events import EventRecorder
from controller.reconcile.index import HoldIndex
from controller.reconcile.writer import Writer

Body = dict[str, Any]


class Reconciler(Protocol):
    """Reconciles one kind: recompute from the view, converge; whether anything was written."""

    async def reconcile(self, request: Request, body: Body) -> bool: ...

    async def gone(self, request: Request) -> None:
        """The object has left the view: clean up what it leaves behind (nothing, mostly)."""


class _Status:
    """What the supporting kinds share: nothing to clean up when an object is gone."""

    async def gone(self, request: Request) -> None:
        return None


async def write_status(writer: Writer, request: Request, body: Body, new: Body) -> bool:
    """Replace ``body``'s status with ``new`` unless it is already exactly that."""
    if body.get("status") == new:
        return False
    written = await writer.replace_status(request, api.ENDPOINTS[request.kind], body, new)
    return written is not None


def _generation(body: Body) -> int:
    return int(body["metadata"].get("generation", 0))


class ResourceTypeReconciler(_Status):
    """A ResourceType's status: its type closure, unknown parents and cycles."""

    def __init__(
        self, registry: Registry, writer: Writer, parse_errors: dict[Request, str]
    ) -> None:
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors

    async def reconcile(self, request: Request, body: Body) -> bool:
        gen, old, now = _generation(body), body.get("status") or {}, status.now_rfc3339()
        error = self.parse_errors.get(request)
        if error:
            new = status.invalid_status(gen, error, old, now)
        else:
            closure = self.registry.closure(request.ref.name)
            new = status.resource_type_status(generation=gen, closure=closure, old=old, now=now)
        return await write_status(self.writer, request, body, new)


class ResourceReconciler(_Status):
    """A Resource's status: its type and URI checks, and which agent holds its URI as work."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        holds: HoldIndex,
    ) -> None:
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors
        self.holds = holds

    async def reconcile(self, request: Request, body: Body) -> bool:
        gen, old, now = _generation(body), body.get("status") or {}, status.now_rfc3339()
        error = self.parse_errors.get(request)
        res = self.registry.resource(request.ref.key)
        if error or res is None:
            new = status.invalid_status(gen, error or "not parsed", old, now)
        else:
            new = status.resource_status(
                generation=gen,
                errors=self.registry.validate_resource(request.ref.key),
                holder=self.holds.get(res.meta.namespace, res.spec.uri),
                old=old,
                now=now,
            )
        return await write_status(self.writer, request, body, new)


class ToolReconciler(_Status):
    """A Tool's status: whether each static slot names an existing, type-compatible Resource."""

    def __init__(
        self,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        events: EventRecorder,
    ) -> None:
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors
        self.events = events

    async def reconcile(self, request: Request, body: Body) -> bool:
        gen, old, now = _generation(body), body.get("status") or {}, status.now_rfc3339()
        error = self.parse_errors.get(request)
        tool = self.registry.tool(request.ref.key)
        if error or tool is None:
            new = status.invalid_status(gen, error or "not parsed", old, now)
        else:
            new = status.tool_status(
                generation=gen,
                tool=tool.spec,
                validation=self.registry.validate_tool(request.ref.key),
                old=old,
                now=now,
            )
        changed = await write_status(self.writer, request, body, new)
        if changed:
            for note in status.tool_events(old, new):
                self.events.record(body, note)
        return changed
