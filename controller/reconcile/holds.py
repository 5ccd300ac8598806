"""Work holds: deciding an agent's hold step from the view, and carrying it out on the API.

Acquisition is a create of the hold Lease that only one agent can win; release is a delete
guarded by the hold's uid and resourceVersion; the agent's finalizer keeps it from vanishing
while it holds anything. The order in which these run within a pass is the agent reconciler's.

The work scope decides where holds are created (the agent's namespace, or ``hold_namespace`` for
the whole cluster) and whose holds count; holds in the other location keep counting after a
switch, and a holder moves its own (see :mod:`controller.domain.work`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from controller.domain.models import AgentObject
from controller.domain.refs import Ref, Request
from controller.domain.registry import Registry
from controller.domain.results import AgentResolution
from controller.domain.work import (
    HOLD_FINALIZER,
    Hold,
    WorkPlan,
    WorkScope,
    WorkState,
    hold_location,
)
from controller.domain.work_inputs import (
    WorkWorld,
    blocked,
    desired_uri,
    holds_in_question,
    work_inputs,
    work_result,
)
from controller.k8s import api, builders
from controller.k8s.api import ApiError
from controller.reconcile.index import HoldIndex, WantedIndex, hold_problem
from controller.reconcile.passes import Pass
from controller.reconcile.session_pods import SessionPods
from controller.reconcile.store import Store, key_of
from controller.reconcile.writer import Writer

log = structlog.get_logger("bindery.holds")

FINALIZER = "bindery.dev/work-hold"


@dataclass(frozen=True)
class Acquired:
    """What the acquire step came to: the plan as it went, and when to look again (a Lease
    that posed as the hold was removed: the next pass acquires)."""

    plan: WorkPlan
    requeue_after: float | None = None


class WorkHolds:
    """Plans, acquires and releases agents' work holds, and keeps their finalizer in step."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        holds: HoldIndex,
        wanted: WantedIndex,
        writer: Writer,
        pods: SessionPods,
        wake: Callable[[Request], None],
        scope: WorkScope = WorkScope.NAMESPACE,
        hold_namespace: str = "",
    ) -> None:
        self.scope = scope
        self.hold_namespace = hold_namespace
        """Where holds live in the cluster scope (and are accepted from in either scope)."""
        self.store = store
        self.registry = registry
        self.holds = holds
        self.wanted = wanted
        self.writer = writer
        self.pods = pods
        """The agents' session pods (a gone holder's hold counts while they run)."""
        self.wake = wake
        """Queue another agent's pass (a claimant whose turn may have come)."""

    def of(self, agent: AgentObject) -> list[Hold]:
        """The holds naming ``agent`` (by uid)."""
        return self.holds.of(agent.meta.uid)

    def location(self, agent: AgentObject) -> str:
        """The namespace ``agent``'s hold is created in."""
        return hold_location(self.scope, agent.meta.namespace, self.hold_namespace)

    def held(self, agent: AgentObject, uri: str) -> Hold | None:
        """``agent``'s hold of ``uri`` (the one in its configured location first): the fencing
        token its delivered bindings carry."""
        own = [h for h in self.of(agent) if h.uri == uri]
        here = [h for h in own if h.namespace == self.location(agent)]
        return next(iter(here or own), None)

    async def plan(
        self, agent: AgentObject, resolution: AgentResolution, old: dict[str, Any]
    ) -> WorkPlan:
        """This pass's hold step for ``agent`` (see :func:`controller.domain.work.plan_work`)."""
        own = self.of(agent)
        work = work_result(resolution)
        desired = desired_uri(resolution, own)
        letting_go = any(h.deleting for h in own)  # its namespace is going away
        if (
            not letting_go
            and self.wanted.block(agent.meta.key, blocked(resolution))
            and work is not None
        ):
            # It left (or joined) the line for its URI: the others' order changed.
            self._wake_claimants(agent.meta.namespace, work.uri, but=agent.meta.key)
        world = WorkWorld(
            scope=self.scope,
            hold_namespace=self.hold_namespace,
            holds=self.holds.everywhere(desired) if desired else [],
            line=self.wanted.line(agent.meta.namespace, desired) if desired else (),
            blocked=self.wanted.blocked,
            status_of=lambda key: self.store.status(api.AGENTS, key),
        )
        asked = holds_in_question(
            world, namespace=agent.meta.namespace, agent_uid=agent.meta.uid, uri=desired
        )
        live = [h for h in asked if self._still_worked_on(h) or await self._holder_exists(h)]
        return work_inputs(
            agent=agent.meta.key,
            agent_uid=agent.meta.uid,
            resolution=resolution,
            own_holds=own,
            old=old,
            world=world,
            live=live,
        ).plan()

    def _wake_claimants(self, namespace: str, uri: str, *, but: str) -> None:
        for other in self.wanted.line(namespace, uri):
            if other != but:
                self.wake(Request.agent(other))

    def waited_on(self, agent: AgentObject, plan: WorkPlan) -> None:
        """``agent`` waits for a free URI behind another claimant: give that one its turn (it
        may not have had a pass since the order changed)."""
        free = plan.uri and not self.holds.counting(self.scope, agent.meta.namespace, plan.uri)
        if plan.state is WorkState.WAITING and plan.waiting_for and free:
            self.wake(Request.agent(plan.waiting_for))

    def _still_worked_on(self, hold: Hold) -> bool:
        """Whether the session of the hold's holder (by its labels, whatever happened to the
        holder or its StatefulSet) has not let go of the work: then the hold counts as held,
        even if its holder is gone, and nobody reclaims it."""
        holder = Ref.parse(hold.holder)
        uris = {h.uri for h in self.holds.of(hold.holder_uid)} | {hold.uri}
        return not self.pods.let_go(holder.namespace, holder.name, hold.holder_uid, uris)

    async def holder_exists(self, hold: Hold) -> bool:
        """Whether the agent a hold names still exists (asking the API server if not in view)."""
        return await self._holder_exists(hold)

    async def _holder_exists(self, hold: Hold) -> bool:
        cached = self.registry.agent(hold.holder)
        if cached is not None and cached.meta.uid == hold.holder_uid:
            return True
        ref = Ref.parse(hold.holder)  # not in our view: ask the API server, it is authoritative
        live = await self.writer.api.get(api.AGENTS, ref.namespace, ref.name)
        return live is not None and (live.get("metadata") or {}).get("uid") == hold.holder_uid

    async def acquire(self, pass_: Pass, agent: AgentObject, plan: WorkPlan) -> Acquired:
        """Reclaim a hold whose holder is gone, then try to create ours; the plan as it went."""
        if plan.reclaim is not None:
            log.info(
                "reclaiming a hold whose holder is gone",
                uri=plan.reclaim.uri,
                holder=plan.reclaim.holder,
                by=agent.meta.key,
            )
            await self.release(pass_, plan.reclaim)
        if not plan.acquire:
            return Acquired(await self._retire(pass_, plan))
        written, created = await self.writer.create(
            pass_, api.LEASES, builders.work_hold(agent, plan.uri, namespace=self.location(agent))
        )
        hold = Hold.from_lease(written)
        md = written.get("metadata") or {}
        where = (str(md.get("namespace", "")), str(md.get("name", "")))
        posing = not created and (
            hold_problem(written, hold, self.hold_namespace) or self.holds.ignored.get(where)
        )
        if posing:
            # A Lease in the hold's place that Bindery did not make (or that was handed over):
            # it holds nothing. Remove it (exactly that version), then acquire on the next pass.
            log.warning(
                "removing a Lease that posed as a work hold",
                lease=f"{md.get('namespace')}/{md.get('name')}",
                why=posing,
                by=agent.meta.key,
            )
            await self.writer.delete_at(pass_, api.LEASES, written)
            # A hold of ours elsewhere still holds the URI: keep delivering it until it moves.
            return Acquired(replace(plan, acquire=False, reclaim=None, retire=[]), 0.0)
        if created or (hold is not None and hold.holder_uid == agent.meta.uid):
            if created:
                log.info("acquired work", agent=agent.meta.key, uri=plan.uri, lease=where)
            working = WorkPlan(
                state=WorkState.WORKING,
                uri=plan.uri,
                release=plan.release,
                deliver=True,
                retire=plan.retire,
            )
            return Acquired(await self._retire(pass_, working))
        # Lost the race. A hold of ours in the other location is withdrawn next pass (the
        # configured one is settled on another holder); nothing delivers the URI meanwhile.
        waiting = WorkPlan(
            state=WorkState.WAITING,
            uri=plan.uri,
            release=plan.release,
            waiting_for=hold.holder if hold else "",
        )
        return Acquired(waiting)

    async def _retire(self, pass_: Pass, plan: WorkPlan) -> WorkPlan:
        """The URI is held in the configured location now: delete our holds of it elsewhere
        (they were taken before a scope switch)."""
        if plan.state is not WorkState.WORKING or not plan.deliver:
            return replace(plan, retire=[])
        for old in plan.retire:
            log.info("moved work hold", uri=old.uri, holder=old.holder, left=old.namespace)
            await self.release(pass_, old)
        return replace(plan, retire=[])

    async def release(self, pass_: Pass, hold: Hold) -> None:
        """Delete exactly this hold (its uid and version): first its finalizer, then the Lease.
        A hold that changed meanwhile is left to the next pass."""
        observed = hold.to_lease()  # exactly this hold: its uid and version guard the delete
        body = self.store.get(api.LEASES, key_of(observed))
        if body is None or (body.get("metadata") or {}).get("uid") != hold.uid:
            body = observed
        finalizers = (body.get("metadata") or {}).get("finalizers") or []
        if HOLD_FINALIZER in finalizers:
            kept = [f for f in finalizers if f != HOLD_FINALIZER]
            try:
                freed = await self.writer.patch_at(
                    pass_, api.LEASES, body, {"metadata": {"finalizers": kept or None}}
                )
            except ApiError as exc:
                if not exc.conflict:
                    raise
                # It changed under us: read it again, so the retry decides from what is there.
                md = body["metadata"]
                await self.writer.reread(pass_, api.LEASES, md["namespace"], md["name"])
                return
            if freed is None or freed["metadata"].get("deletionTimestamp"):
                log.info("released work", agent=hold.holder, uri=hold.uri)
                return  # gone already, or going now that nothing holds it back
            body = freed
        if await self.writer.delete_at(pass_, api.LEASES, body):
            log.info("released work", agent=hold.holder, uri=hold.uri)

    async def ensure_finalizer(self, pass_: Pass, body: dict[str, Any], *, present: bool) -> None:
        """Add or remove the agent's hold finalizer (guarded by the version decided from)."""
        finalizers = list(body["metadata"].get("finalizers") or [])
        if (FINALIZER in finalizers) == present:
            return
        finalizers = (
            [*finalizers, FINALIZER] if present else [f for f in finalizers if f != FINALIZER]
        )
        await self.writer.patch_at(
            pass_, api.AGENTS, body, {"metadata": {"finalizers": finalizers}}
        )
