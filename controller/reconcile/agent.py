"""The agent reconciler: one pass takes an AgentSpec from the view to its desired world.

The order of a pass is what keeps a ``work`` URI with at most one agent (handoff goes
A -> no holder -> B), so it is fixed:

1. **finalizer** — an agent that wants or holds work gets the hold finalizer first, so it cannot
   vanish with a hold and bindings the controller no longer tracks;
2. **acquire** — reclaim a hold whose holder is gone, then create-if-absent the hold for the URI
   it wants (losing that race means waiting);
3. **deliver** — write the bindings ConfigMap; it carries the work URI only while held, with
   the hold's identity as a fencing token;
4. **release** — delete holds it no longer wants, only once its session has let go of them: its
   current pod acknowledged the document without them, or no session process runs, or (a
   session that cannot acknowledge) the grace period after the write has passed;
5. **drop finalizer** — once it neither wants nor holds any work;
6. **session** — launch, keep or relaunch its workload (never before its bindings exist);
   suspend it by its idle policy only once it neither wants nor holds work (after step 4 has
   released what it held), and resume it only once it holds the work it wants (after step 2);
7. **status** — rebuilt whole from what this pass saw and did;
8. **events** — posted in the background for the transitions status shows.

(tests/unit/test_agent_pass.py's ``STEPS`` names, for each step, the rows that fail when it is
removed or moved.) A pass returns a ``Result``: whether it wrote, and when to look again (the
acknowledgement timeout, the release grace, a session without a pod, an idle session due for
suspension); the worker pool schedules it.

A deleted agent instead withdraws its work from the delivered bindings, stops its session, and
releases its holds once the session has let go of them (acknowledged, or stopped), then drops its
finalizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import structlog

from controller.domain import acknowledgement as ack
from controller.domain import delivery, status
from controller.domain.models import AgentObject
from controller.domain.refs import Request
from controller.domain.registry import Registry
from controller.domain.results import AgentResolution
from controller.domain.work import WorkPlan
from controller.k8s import api, builders
from controller.k8s.api import ApiError
from controller.reconcile import metrics
from controller.reconcile.acks import Acknowledgements
from controller.reconcile.delivery import BindingsDelivery
from controller.reconcile.events import EventRecorder
from controller.reconcile.holds import FINALIZER, WorkHolds
from controller.reconcile.kinds import write_status
from controller.reconcile.result import CHANGED, UNCHANGED, Result, earliest
from controller.reconcile.sessions import SessionOutcome, Sessions
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, StaleWriteError, Writer

log = structlog.get_logger("bindery.agent")

Body = dict[str, Any]


class AgentGauges:
    """Keeps the agents- and bindings-by-state gauges current by difference, without scans."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}
        self._bindings: dict[str, dict[str, int]] = {}

    def count(self, key: str, state: str | None, bindings: dict[str, int]) -> None:
        namespace = key.rpartition("/")[0]
        before = self._states.pop(key, None)
        if before is not None:
            metrics.AGENTS_BY_STATE.labels(namespace, before).dec()
        for binding_state, n in self._bindings.pop(key, {}).items():
            metrics.BINDINGS_BY_STATE.labels(namespace, binding_state).dec(n)
        if state:
            self._states[key] = state
            metrics.AGENTS_BY_STATE.labels(namespace, state).inc()
        if bindings:
            self._bindings[key] = bindings
            for binding_state, n in bindings.items():
                metrics.BINDINGS_BY_STATE.labels(namespace, binding_state).inc(n)

    def forget(self, key: str) -> None:
        self.count(key, None, {})


class AgentReconciler:
    """Runs one agent's pass in the safety order above."""

    def __init__(
        self,
        *,
        store: Store,
        registry: Registry,
        writer: Writer,
        parse_errors: dict[Request, str],
        holds: WorkHolds,
        bindings: BindingsDelivery,
        sessions: Sessions,
        acks: Acknowledgements,
        events: EventRecorder,
        gauges: AgentGauges,
        suspects: set[Request],
    ) -> None:
        self.store = store
        self.registry = registry
        self.writer = writer
        self.parse_errors = parse_errors
        self.holds = holds
        self.bindings = bindings
        self.sessions = sessions
        self.acks = acks
        self.events = events
        self.gauges = gauges
        self.suspects = suspects
        self.namespace_terminating: Callable[[str], None] = lambda namespace: None
        """Called when the API server says a namespace is being deleted."""

    def _latest(self, request: Request, body: Body) -> Body:
        return self.store.get(api.AGENTS, request.ref.key) or body

    async def reconcile(self, request: Request, body: Body) -> Result:
        if request in self.suspects:  # something it owns was deleted: is the agent itself gone?
            self.suspects.discard(request)
            if not await self.writer.confirm(request, api.AGENTS, body):
                return UNCHANGED
            body = self._latest(request, body)
        md = body["metadata"]
        gen = int(md.get("generation", 0))
        old = body.get("status") or {}
        if md.get("deletionTimestamp"):
            return CHANGED.requeue(await self._finalize(request, body))
        error = self.parse_errors.get(request)
        agent = self.registry.agent(request.ref.key)
        if error or agent is None:
            new = status.invalid_status(
                gen, error or "not parsed", old, status.now_rfc3339(), state=True
            )
            return Result(changed=await write_status(self.writer, request, body, new))

        resolution = self.registry.resolve(request.ref.key)
        try:
            work, session, delivered, view, requeue = await self._converge(
                request, body, agent, resolution, old
            )
        except ForeignObjectError as exc:
            new = status.blocked_status(
                gen,
                old,
                status.now_rfc3339(),
                reason="ForeignObject",
                message=f"agent {request.ref.key}: {exc}",
                stalled=not exc.transient,
            )
            await write_status(self.writer, request, self._latest(request, body), new)
            raise
        except ApiError as exc:
            if exc.namespace_terminating:
                # Its namespace is going away; kopf may have stopped watching it, so look at
                # what is being deleted there now rather than at the next periodic sweep.
                self.namespace_terminating(request.ref.namespace)
            if not exc.refused:
                raise
            # Retrying the same request cannot succeed: say so in status, then keep retrying
            # with backoff (a quota or a webhook may still change its mind).
            new = status.rejected_status(
                gen,
                old,
                status.now_rfc3339(),
                what=f"{exc.method} {exc.path}",
                error=f"HTTP {exc.status} {exc.reason}: {exc.message}",
            )
            await write_status(self.writer, request, self._latest(request, body), new)
            raise

        now = status.now_rfc3339()  # 7. status
        new = status.agent_status(
            generation=gen,
            resolution=resolution,
            work=work,
            waiting_since=status.waiting_since(old, work, now),
            config_map=builders.bindings_config_map_name(agent.meta.name),
            session=session.view,
            old=old,
            now=now,
            delivery=view,
        )
        latest = self._latest(request, body)
        changed = await write_status(self.writer, request, latest, new)
        if changed:  # 8. events
            for note in status.agent_events(old, new, session.launched):
                self.events.record(latest, note)
            self.holds.waited_on(agent, work)
        self.gauges.count(request.ref.key, new.get("state"), status.binding_counts(resolution))
        return Result(changed or delivered, requeue)

    async def _converge(
        self,
        request: Request,
        body: Body,
        agent: AgentObject,
        resolution: AgentResolution,
        old: Body,
    ) -> tuple[WorkPlan, SessionOutcome, bool, ack.DeliveryView, float | None]:
        """Steps 1 to 6; what the work step came to, the session outcome, whether delivered,
        where the session stands with the document, and when to look again."""
        work = await self.holds.plan(agent, resolution, old)
        if work.uri or self.holds.of(agent):  # 1. finalizer
            await self.holds.ensure_finalizer(request, body, present=True)
        work = await self.holds.acquire(request, agent, work)  # 2. acquire
        fence = self.holds.held(agent, work.uri) if work.deliver else None
        rendered = delivery.render(  # 3. deliver
            delivery.bindings_document(agent, resolution, deliver_work=work.deliver, fence=fence)
        )
        delivered = await self.bindings.deliver(request, agent, rendered)
        view, requeue = await self._release(  # 4. release
            request, body, agent=agent, work=work, rendered=rendered, delivered=delivered
        )
        if not work.uri and not self.holds.of(agent):  # 5. drop finalizer
            await self.holds.ensure_finalizer(request, self._latest(request, body), present=False)
        idle = not work.uri and not self.holds.of(agent)
        session = await self.sessions.converge(  # 6. session
            request, agent, old, idle=idle, held=work.deliver
        )
        return work, session, delivered, view, earliest(requeue, session.requeue_after)

    async def _release(
        self,
        request: Request,
        body: Body,
        *,
        agent: AgentObject,
        work: WorkPlan,
        rendered: str,
        delivered: bool,
    ) -> tuple[ack.DeliveryView, float | None]:
        """Release the holds the document no longer carries once the session has let go of
        them; where the session stands with the document, and when to look again."""
        digest = ack.digest(rendered)
        now = status.now_micro_rfc3339()
        before = (body.get("status") or {}).get("delivery") or {}
        written_at = str(before.get("writtenAt") or now)
        if delivered or before.get("digest") != digest:
            written_at = now
        since = ack.seconds_since(written_at, datetime.now(UTC))
        releasing = tuple(h.uri for h in work.release)
        view = self.acks.view(agent, digest, written_at, since_write=since, releasing=releasing)
        requeue = None
        if view.pending and not view.overdue:  # Stalled if it stays silent
            requeue = self.acks.timeout - since + 0.1
        if not work.release:
            return view, requeue
        ok, by_grace = self.acks.releasable(view, since)
        if not ok:
            if view.confirmation is ack.Confirmation.UNVERIFIABLE:
                requeue = earliest(requeue, self.acks.grace - since + 0.1)
            return view, requeue
        for hold in work.release:  # only now that the session no longer works on it
            await self.holds.release(request, hold)
            if by_grace:
                self.events.record(
                    self._latest(request, body),
                    status.Note(
                        "ReleasedUnacknowledged",
                        f"released work URI {hold.uri!r} {self.acks.grace:.0f} s after "
                        "withdrawing it from a session that cannot acknowledge (no delivery "
                        "sidecar): unverified; relaunch the session to give it one",
                        warning=True,
                    ),
                )
        return replace(view, releasing=()), requeue

    async def _finalize(self, request: Request, body: Body) -> float | None:
        """Deleting an agent: withdraw its work from the session, release holds, let it go;
        when to look again (while its session is being stopped)."""
        md = body["metadata"]
        if FINALIZER not in (md.get("finalizers") or []):
            return None
        own = self.holds.holds.of(md.get("uid", ""))
        if own:
            await self.bindings.withdraw_work(
                request, md.get("namespace", ""), md["name"], md.get("uid", "")
            )
            if not await self.sessions.stopped_or_acknowledged(request, body):
                # the pod's end (or its acknowledgement) brings the next pass; look again anyway
                return self.sessions.recheck
        for hold in own:
            await self.holds.release(request, hold)
        if self.holds.holds.of(md.get("uid", "")):  # one changed meanwhile: not released yet
            raise StaleWriteError(f"agent {request.ref.key}: its holds are not released yet")
        await self.holds.ensure_finalizer(request, self._latest(request, body), present=False)
        return None

    async def gone(self, request: Request) -> None:
        """The agent has left the view: release holds still naming it (its finalizer was
        removed by hand, or it vanished while unwatched), once the API server confirms it is
        gone. Nothing else would: a hold's finalizer waits for its holder."""
        for hold in self.holds.holds.named(request.ref.key):
            if not await self.holds.holder_exists(hold):
                log.info("releasing the hold of an agent that is gone", holder=hold.holder)
                await self.holds.release(request, hold)
