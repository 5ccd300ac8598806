"""The one write seam: every write the controller makes, written through to its view.

Each verb sends one request, counts it once in ``bindery_api_writes_total``, and hands the
response to the intake (through ``sink``) on behalf of the request that wrote it, so the view is
current before the pass goes on and only *dependents* of the change are queued, never the pass's
own object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from controller.domain.errors import ApiServerError
from controller.domain.models import AgentObject
from controller.domain.refs import Request
from controller.k8s import builders
from controller.k8s.api import ApiError, Endpoint, KubeApi
from controller.reconcile import metrics
from controller.reconcile.passes import Pass

Body = dict[str, Any]
Sink = Callable[[Endpoint, Body, bool, Request], None]
"""``sink(endpoint, body, deleted, by)``: where written versions go (the controller's intake),
with the request whose pass wrote them."""


class ForeignObjectError(ApiServerError):
    """An object Bindery would own for an agent exists, but is not Bindery's for that agent:
    it is never written. ``transient`` when it belongs to an earlier agent of the same name,
    by uid (the garbage collector removes it soon)."""

    def __init__(self, what: str, body: Body, agent_name: str, agent_uid: str = "") -> None:
        md = body.get("metadata") or {}
        owner = next((r for r in md.get("ownerReferences") or [] if r.get("controller")), None)
        self.transient = bool(
            owner
            and owner.get("kind") == "AgentSpec"
            and owner.get("name") == agent_name
            and owner.get("uid") != agent_uid  # another incarnation's, not this agent's own
        )
        whose = (
            "an earlier AgentSpec of the same name (it goes when the garbage collector removes it)"
            if self.transient
            else f"{owner.get('kind')} {owner.get('name')}"
            if owner
            else "nobody Bindery knows (it was not made by Bindery for this agent)"
        )
        self.where = f"{what} {md.get('namespace', '')}/{md.get('name', '')}"
        super().__init__(
            f"{self.where} already exists and belongs to {whose}; Bindery never writes an object "
            "it does not own: rename the AgentSpec, or delete or rename that object"
        )


class StaleWriteError(ApiServerError):
    """A guarded write was decided from a version that has changed: run the pass again."""


class Writer:
    """Creates, patches, replaces status and deletes, each guarded and written through."""

    def __init__(self, api: KubeApi, sink: Sink) -> None:
        self.api = api
        self._sink = sink

    def _count(self, endpoint: Endpoint, verb: str) -> None:
        metrics.API_WRITES.labels(endpoint.plural, verb).inc()

    async def create(self, pass_: Pass, endpoint: Endpoint, body: Body) -> tuple[Body, bool]:
        """Create ``body``; if its name is taken, adopt what is there: ``(object, created)``.

        Raises the conflict if the object vanished again before it could be read.
        """
        try:
            written = await self.api.create(endpoint, body)
        except ApiError as exc:
            if not exc.conflict:
                raise
            md = body["metadata"]
            found = await self.api.get(endpoint, md.get("namespace", ""), md["name"])
            if found is None:
                raise
            self._sink(endpoint, found, False, pass_.request)
            return found, False
        self._count(endpoint, "create")
        self._sink(endpoint, written, False, pass_.request)
        return written, True

    async def _update(
        self, pass_: Pass, endpoint: Endpoint, current: Body, send: Awaitable[Body]
    ) -> Body | None:
        """Send one update of ``current``, count it and write it through.

        None when the API server says the object is gone: it then leaves the view at once, so a
        deletion whose watch event was lost cannot leave a ghost that passes keep acting on.
        """
        try:
            written = await send
        except ApiError as exc:
            if not exc.not_found:
                raise
            self._sink(endpoint, current, True, pass_.request)
            return None
        self._count(endpoint, "patch")
        self._sink(endpoint, written, False, pass_.request)
        return written

    async def patch_at(
        self, pass_: Pass, endpoint: Endpoint, current: Body, patch: Body
    ) -> Body | None:
        """Merge-patch ``current``, refused (409) unless it is still at its resourceVersion;
        None when it is gone."""
        md = current["metadata"]
        guard = {**(patch.get("metadata") or {}), "resourceVersion": md["resourceVersion"]}
        send = self.api.merge_patch(
            endpoint, md.get("namespace", ""), md["name"], {**patch, "metadata": guard}
        )
        return await self._update(pass_, endpoint, current, send)

    async def json_patch_at(
        self, pass_: Pass, endpoint: Endpoint, current: Body, ops: list[Body]
    ) -> Body | None:
        """JSON-patch ``current``, refused (422) unless it is still at its resourceVersion;
        None when it is gone."""
        md = current["metadata"]
        send = self.api.json_patch_at(
            endpoint, md.get("namespace", ""), md["name"], md["resourceVersion"], ops
        )
        return await self._update(pass_, endpoint, current, send)

    async def replace_status(
        self, pass_: Pass, endpoint: Endpoint, current: Body, status: Body
    ) -> Body | None:
        """Write the whole ``status`` of ``current``; None when it is gone."""
        md = current["metadata"]
        send = self.api.replace_status(endpoint, md.get("namespace", ""), md["name"], status)
        return await self._update(pass_, endpoint, current, send)

    async def delete_at(self, pass_: Pass, endpoint: Endpoint, current: Body) -> bool:
        """Delete exactly the incarnation and version of ``current``.

        False when it changed meanwhile (409: the next pass decides from what is there now) or
        is already gone.
        """
        md = current["metadata"]
        try:
            deleted = await self.api.delete(
                endpoint,
                md.get("namespace", ""),
                md["name"],
                uid=md.get("uid", ""),
                resource_version=str(md.get("resourceVersion", "")),
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            return False
        if deleted:
            self._count(endpoint, "delete")
        self._sink(endpoint, current, True, pass_.request)
        return deleted

    async def own(
        self, pass_: Pass, endpoint: Endpoint, current: Body, agent: AgentObject, what: str
    ) -> Body:
        """``current`` as ``agent``'s own object: as it is, adopted if it is an orphan of the
        agent's, or ForeignObjectError (it is never written)."""
        if builders.owned_by(current, agent):
            return current
        if not builders.adoptable(current, agent):
            raise ForeignObjectError(what, current, agent.meta.name, agent.meta.uid)
        adopted = await self.patch_at(pass_, endpoint, current, builders.adoption(current, agent))
        if adopted is None:
            raise ForeignObjectError(what, current, agent.meta.name, agent.meta.uid)
        return adopted

    async def confirm(self, pass_: Pass, endpoint: Endpoint, current: Body) -> bool:
        """Whether ``current`` (that incarnation) still exists; if not, it leaves the view."""
        md = current["metadata"]
        found = await self.api.get(endpoint, md.get("namespace", ""), md["name"])
        if found is None or (found.get("metadata") or {}).get("uid") != md.get("uid"):
            self._sink(endpoint, current, True, pass_.request)
            return False
        self._sink(endpoint, found, False, pass_.request)
        return True

    async def reread(
        self, pass_: Pass, endpoint: Endpoint, namespace: str, name: str
    ) -> Body | None:
        """Read one object again (after a refused write) and store it; None if gone."""
        found = await self.api.get(endpoint, namespace, name)
        if found is not None:
            self._sink(endpoint, found, False, pass_.request)
        return found
