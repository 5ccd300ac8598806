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
from dataclasses import dataclass, replace
from typing import Any

import structlog

from controller.domain import acknowledgement as ack
from controller.domain import delivery, names, status
from controller.domain.errors import InvalidInputError
from controller.domain.models import AgentObject
from controller.domain.refs import Ref, Request
from controller.domain.registry import Registry
from controller.domain.results import AgentResolution
from controller.domain.work import WorkPlan
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile import metrics
from controller.reconcile.acks import Acknowledgements
from controller.reconcile.delivery import BindingsDelivery, Delivered
from controller.reconcile.events import EventRecorder
from controller.reconcile.holds import FINALIZER, WorkHolds
from controller.reconcile.kinds import report_failure, reported_failure, write_status
from controller.reconcile.passes import Pass
from controller.reconcile.result import CHANGED, UNCHANGED, Result, earliest
from controller.reconcile.rollouts import Rollouts
from controller.reconcile.sessions import SessionOutcome, Sessions
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, StaleWriteError, Writer

log = structlog.get_logger("bindery.agent")

Body = dict[str, Any]


@dataclass(frozen=True)
class Released:
    """What the release step (4) came to."""

    delivery: ack.DeliveryView
    """Where the session stands with the document (the holds still being released)."""
    requeue_after: float | None = None
    """When to look again: the acknowledgement timeout, or the release grace."""


@dataclass(frozen=True)
class Converged:
    """What steps 1 to 6 came to."""

    holding: WorkPlan
    """The hold step (1, 2, 4, 5) as it went."""
    session: SessionOutcome
    delivered: bool
    """Whether the bindings document was written."""
    delivery: ack.DeliveryView
    """Where the session stands with the document."""
    requeue_after: float | None = None
    """When to look again (the earliest any step asked for)."""


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
        rollouts: Rollouts | None = None,
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
        self.rollouts = rollouts
        """Told what each pass read and where the session stands (rollout status)."""
        self.namespace_terminating: Callable[[str], None] = lambda namespace: None
        """Called when the API server says a namespace is being deleted."""

    def _latest(self, pass_: Pass) -> Body:
        """The agent as the view holds it now (this pass's own writes included)."""
        return self.store.get(api.AGENTS, pass_.request.ref.key) or pass_.body

    async def reconcile(self, pass_: Pass) -> Result:
        """One pass; a failure of this agent's pass (its spec, its status, a fault on the way;
        the deletion path too) is reported on it by the one rule (:func:`report_failure`) and
        retried with backoff, never raised past it, but for the API server's own answers."""
        try:
            return await self._reconcile(pass_)
        except Exception as exc:
            if not reported_failure(exc):
                raise
            if isinstance(exc, InvalidInputError):
                self._rollout_gone(pass_.request)
            latest = self._latest(pass_)
            return await report_failure(self.writer, self.events, pass_, latest, exc, state=True)

    async def _reconcile(self, pass_: Pass) -> Result:
        request = pass_.request
        if request in self.suspects:  # something it owns was deleted: is the agent itself gone?
            self.suspects.discard(request)
            if not await self.writer.confirm(pass_, api.AGENTS, pass_.body):
                return UNCHANGED
            pass_ = pass_.seeing(self._latest(pass_))
        if pass_.body["metadata"].get("deletionTimestamp"):
            self._rollout_gone(request)
            return CHANGED.requeue(await self._finalize(pass_))
        error = self.parse_errors.get(request)
        agent = self.registry.agent(request.ref.key)
        if error or agent is None:
            self._rollout_gone(request)
            new = status.invalid_status(
                _generation(pass_), error or "not parsed", pass_.old, pass_.now.rfc3339, state=True
            )
            return Result(changed=await write_status(self.writer, pass_, pass_.body, new))
        resolution = self.registry.resolve(request.ref.key)
        try:
            converged = await self._converge(pass_, agent, resolution)
        except ForeignObjectError as exc:
            await self._stalled_by_foreign_object(pass_, exc)
            raise
        except ApiError as exc:
            if exc.namespace_terminating:
                # Its namespace is going away; kopf may have stopped watching it, so look at
                # what is being deleted there now rather than at the next periodic sweep.
                self.namespace_terminating(request.ref.namespace)
            if not exc.refused:
                raise
            await self._rejected(pass_, exc)
            raise
        changed = await self._report(pass_, agent, resolution, converged)
        if self.rollouts is not None:
            self.rollouts.observe(agent, resolution, converged.delivery, converged.session.view)
        return Result(changed or converged.delivered, converged.requeue_after)

    def _rollout_gone(self, request: Request) -> None:
        """An agent being deleted, or with a spec the models reject, depends on nothing."""
        if self.rollouts is not None:
            self.rollouts.forget(request.ref.key)

    async def _stalled_by_foreign_object(self, pass_: Pass, exc: ForeignObjectError) -> None:
        """Say in status that an object the agent needs belongs to someone else."""
        new = status.blocked_status(
            _generation(pass_),
            pass_.old,
            pass_.now.rfc3339,
            reason="ForeignObject",
            message=f"agent {pass_.request.ref.key}: {exc}",
            stalled=not exc.transient,
        )
        await write_status(self.writer, pass_, self._latest(pass_), new)

    async def _rejected(self, pass_: Pass, exc: ApiError) -> None:
        """Retrying the same request cannot succeed: say so in status (the worker keeps
        retrying with backoff: a quota or a webhook may still change its mind)."""
        new = status.rejected_status(
            _generation(pass_),
            pass_.old,
            pass_.now.rfc3339,
            what=f"{exc.method} {exc.path}",
            error=f"HTTP {exc.status} {exc.reason}: {exc.message}",
        )
        await write_status(self.writer, pass_, self._latest(pass_), new)

    async def _report(
        self,
        pass_: Pass,
        agent: AgentObject,
        resolution: AgentResolution,
        converged: Converged,
    ) -> bool:
        """Steps 7 and 8: status rebuilt whole, and the events of its transitions; whether
        status was written."""
        old, now = pass_.old, pass_.now.rfc3339
        holding = converged.holding
        new = status.agent_status(
            generation=_generation(pass_),
            resolution=resolution,
            work=holding,
            waiting_since=status.waiting_since(old, holding, now),
            config_map=names.bindings_config_map_name(agent.meta.name),
            session=converged.session.view,
            old=old,
            now=now,
            delivery=converged.delivery,
        )
        latest = self._latest(pass_)
        changed = await write_status(self.writer, pass_, latest, new)
        if changed:  # 8. events
            for note in status.agent_events(old, new, converged.session.launched):
                self.events.record(latest, note, pass_.now)
            self.holds.waited_on(agent, holding)
        key = pass_.request.ref.key
        self.gauges.count(key, new.get("state"), status.binding_counts(resolution))
        return changed

    async def _converge(
        self, pass_: Pass, agent: AgentObject, resolution: AgentResolution
    ) -> Converged:
        """Steps 1 to 6."""
        holding = await self.holds.plan(agent, resolution, pass_.old)
        if holding.uri or self.holds.of(agent):  # 1. finalizer
            await self.holds.ensure_finalizer(pass_, pass_.body, present=True)
        acquired = await self.holds.acquire(pass_, agent, holding)  # 2. acquire
        holding = acquired.plan
        fence = self.holds.held(agent, holding.uri) if holding.deliver else None
        document = delivery.bindings_document(  # 3. deliver
            agent, resolution, deliver_work=holding.deliver, fence=fence
        )
        recorded = str((pass_.old.get("delivery") or {}).get("digest") or "")
        delivered = await self.bindings.deliver(pass_, agent, document, recorded)
        released = await self._release(  # 4. release
            pass_,
            agent=agent,
            holding=holding,
            delivered=delivered,
        )
        if not holding.uri and not self.holds.of(agent):  # 5. drop finalizer
            await self.holds.ensure_finalizer(pass_, self._latest(pass_), present=False)
        idle = not holding.uri and not self.holds.of(agent)
        session = await self.sessions.converge(  # 6. session
            pass_, agent, idle=idle, held=holding.deliver
        )
        requeue = earliest(acquired.requeue_after, released.requeue_after)
        return Converged(
            holding=holding,
            session=session,
            delivered=delivered.written,
            delivery=released.delivery,
            requeue_after=earliest(requeue, session.requeue_after),
        )

    async def _release(
        self,
        pass_: Pass,
        *,
        agent: AgentObject,
        holding: WorkPlan,
        delivered: Delivered,
    ) -> Released:
        """Release the holds the document no longer carries once the session has let go of
        them."""
        digest = delivered.digest
        now = pass_.now.micro_rfc3339
        before = pass_.old.get("delivery") or {}
        written_at = str(before.get("writtenAt") or now)
        if delivered.written or before.get("digest") != digest:
            written_at = now
        elif not ack.countable_time(written_at, pass_.now.wall):
            written_at = now  # a time it cannot count from (written by others): from now on
        since = ack.seconds_since(written_at, pass_.now.wall)
        releasing = tuple(h.uri for h in holding.release)
        standing = self.acks.delivery_view(
            agent, digest, written_at, since_write=since, releasing=releasing
        )
        requeue = None
        if standing.pending and not standing.overdue:  # Stalled if it stays silent
            requeue = self.acks.timeout - since + 0.1
        if not holding.release:
            return Released(standing, requeue)
        releasable = self.acks.releasable(standing, since)
        if not releasable.now:
            if standing.confirmation is ack.Confirmation.UNVERIFIABLE:
                requeue = earliest(requeue, self.acks.grace - since + 0.1)
            return Released(standing, requeue)
        for hold in holding.release:  # only now that the session no longer works on it
            await self.holds.release(pass_, hold)
            if releasable.by_grace:
                self.events.record(
                    self._latest(pass_),
                    _released_unacknowledged(hold.uri, self.acks.grace),
                    pass_.now,
                )
        return Released(replace(standing, releasing=()), requeue)

    async def _finalize(self, pass_: Pass) -> float | None:
        """Deleting an agent: withdraw its work from the session, release holds, let it go;
        when to look again (while its session is being stopped)."""
        md = pass_.body["metadata"]
        if FINALIZER not in (md.get("finalizers") or []):
            return None
        own = self.holds.holds.of(md.get("uid", ""))
        if own:
            await self.bindings.withdraw_work(
                pass_, md.get("namespace", ""), md["name"], md.get("uid", "")
            )
            uris = sorted({h.uri for h in own})
            if not await self.sessions.stopped_or_acknowledged(pass_, pass_.body, uris):
                # the pod's end (or its acknowledgement) brings the next pass; look again anyway
                return self.sessions.recheck
        for hold in own:
            await self.holds.release(pass_, hold)
        if self.holds.holds.of(md.get("uid", "")):  # one changed meanwhile: not released yet
            key = pass_.request.ref.key
            raise StaleWriteError(f"agent {key}: its holds are not released yet")
        await self.holds.ensure_finalizer(pass_, self._latest(pass_), present=False)
        return None

    async def gone(self, pass_: Pass) -> None:
        """The agent has left the view: release holds still naming it (its finalizer was
        removed by hand, or it vanished while unwatched), once the API server confirms it is
        gone and its session has let go of them as a deleted agent's must (every pod labelled
        as its session stopped, or acknowledged a document without the work): the garbage
        collector stops a session some time after its agent went, and nothing told it the work
        was withdrawn. Nothing else would release them: a hold's finalizer waits for its
        holder. A session pod's end or acknowledgement brings the next such pass."""
        for hold in self.holds.holds.named(pass_.request.ref.key):
            if await self.holds.holder_exists(hold):
                continue
            holder = Ref.parse(hold.holder)
            ns, name, uid = holder.namespace, holder.name, hold.holder_uid
            await self.bindings.withdraw_work(pass_, ns, name, uid)
            uris = sorted({h.uri for h in self.holds.holds.of(uid)} | {hold.uri})
            if not self.sessions.acks.pods.let_go(ns, name, uid, uris):
                log.info(
                    "waiting for the session of an agent that is gone to stop before releasing "
                    "its work",
                    holder=hold.holder,
                    uri=hold.uri,
                )
                await self.sessions.stop(pass_, ns, name, uid)
                continue
            log.info("releasing the hold of an agent that is gone", holder=hold.holder)
            await self.holds.release(pass_, hold)


def _generation(pass_: Pass) -> int:
    return int(pass_.body["metadata"].get("generation", 0))


def _released_unacknowledged(uri: str, grace: float) -> status.Note:
    return status.Note(
        "ReleasedUnacknowledged",
        f"released work URI {uri!r} {grace:.0f} s after withdrawing it from a session that "
        "cannot acknowledge (no delivery sidecar): unverified; relaunch the session to give "
        "it one",
        warning=True,
    )
