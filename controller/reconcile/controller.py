"""The composition root: the view, the queue, the write seam and one reconciler per kind."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from controller.domain.refs import Kind, Ref, Request
from controller.domain.registry import Registry
from controller.domain.work import WorkScope
from controller.k8s import api as k8s_api
from controller.k8s import builders
from controller.k8s.api import KubeApi
from controller.reconcile.acks import Acknowledgements
from controller.reconcile.agent import AgentGauges, AgentReconciler
from controller.reconcile.catchup import CatchUp, Listing
from controller.reconcile.clock import LOOP_CLOCK, Clock
from controller.reconcile.delivery import BindingsDelivery
from controller.reconcile.events import EventRecorder
from controller.reconcile.holds import WorkHolds
from controller.reconcile.informer import Informers
from controller.reconcile.intake import OWNED, OWNED_SELECTOR, Intake
from controller.reconcile.kinds import (
    GrantReconciler,
    Reconciler,
    ResourceReconciler,
    ResourceTypeReconciler,
    ToolReconciler,
)
from controller.reconcile.queue import WorkQueue
from controller.reconcile.result import Result
from controller.reconcile.resync import Sweeper
from controller.reconcile.rollouts import Rollouts
from controller.reconcile.session_pods import SessionPods
from controller.reconcile.sessions import Sessions
from controller.reconcile.store import Store, key_of
from controller.reconcile.workers import WorkerPool
from controller.reconcile.writer import Writer


class Controller:
    """Wires the reconcile layer together and is what kopf's handlers and the operator see.

    Watch events go in through :meth:`observe`; the requests they affect are queued; workers run
    the per-kind reconcilers, whose writes come back through the same intake.
    """

    def __init__(
        self,
        api: KubeApi,
        *,
        workers: int = 8,
        instance: str = "",
        session_service_account: str = "",
        namespaces: Sequence[str] = (),
        resync_period: float = 30.0,
        delivery_image: str = "",
        unacknowledged_release: float = 120.0,
        acknowledge_timeout: float = 60.0,
        work_scope: WorkScope = WorkScope.NAMESPACE,
        work_hold_namespace: str = "",
        clock: Clock = LOOP_CLOCK,
        rollout_delay: float = 1.0,
        rollout_settle: float = 120.0,
    ) -> None:
        self.api = api
        self.instance = instance or f"bindery-{uuid.uuid4().hex[:8]}"
        self.registry = Registry()
        self.store = Store()
        self.intake = Intake(self.store, self.registry)
        self.intake.hold_namespace = work_hold_namespace
        self.intake.wanted.scope = work_scope
        self.queue: WorkQueue[Request] = WorkQueue(clock)
        self.writer = Writer(api, self._written)
        self.events = EventRecorder(api, instance=self.instance)
        gauges = AgentGauges()
        self.rollouts = Rollouts(self.registry, self.queue.add_after, delay=rollout_delay)
        self.rollouts.on_warm = self._enqueue_supporting
        self.rollout_settle = rollout_settle
        """Seconds after a start by which rollouts are counted even if an agent's passes keep
        failing."""
        self.clock = clock

        def agent_gone(key: str) -> None:
            gauges.forget(key)
            self.rollouts.forget(key)
            self.bindings.forget(key)

        self.intake.on_agent_gone = agent_gone
        self.session_pods = SessionPods(self.store, self.intake.session_pods)
        self.holds = WorkHolds(
            store=self.store,
            registry=self.registry,
            holds=self.intake.holds,
            wanted=self.intake.wanted,
            writer=self.writer,
            pods=self.session_pods,
            wake=self.queue.add,
            scope=work_scope,
            hold_namespace=work_hold_namespace,
        )
        self.bindings = BindingsDelivery(self.store, self.writer)
        self.acks = Acknowledgements(
            self.store,
            self.writer,
            pods=self.session_pods,
            delivery=builders.SessionDelivery(delivery_image) if delivery_image else None,
            service_account=session_service_account,
            grace=unacknowledged_release,
            timeout=acknowledge_timeout,
        )
        self.sessions = Sessions(
            self.store,
            self.writer,
            acks=self.acks,
            service_account=session_service_account,
        )
        agents = self._agent_reconciler(gauges)
        reconcilers = self._reconcilers(agents)
        self.pool = WorkerPool(self.queue, self.store, reconcilers, workers=workers)
        watched = [(e, "") for e in k8s_api.ENDPOINTS.values()]
        owned = [(e, OWNED_SELECTOR) for e in OWNED]
        self.sweeper = Sweeper(
            api,
            self.store,
            self.observe,
            kinds=watched + owned,
            namespaces=namespaces,
            period=resync_period,
            clock=clock,
        )
        self.informers = Informers(
            api, self.store, self.observe, kinds=owned, namespaces=namespaces, clock=clock
        )
        """The owned kinds' own list+watch (kopf watches the five kinds)."""
        self.catching_up = CatchUp(
            api,
            self.store,
            self.observe,
            kinds=watched,
            namespaces=namespaces,
            read_directly=self.sweeper.read_directly,
            clock=clock,
        )
        agents.namespace_terminating = lambda namespace: self.sweeper.soon()

    def _agent_reconciler(self, gauges: AgentGauges) -> AgentReconciler:
        """The agents' reconciler, on the controller's shared parts."""
        return AgentReconciler(
            store=self.store,
            registry=self.registry,
            writer=self.writer,
            parse_errors=self.intake.parse_errors,
            holds=self.holds,
            bindings=self.bindings,
            sessions=self.sessions,
            acks=self.acks,
            events=self.events,
            gauges=gauges,
            suspects=self.intake.suspects,
            rollouts=self.rollouts,
        )

    def _reconcilers(self, agents: AgentReconciler) -> dict[Kind, Reconciler]:
        """One reconciler per kind: ``agents`` for AgentSpecs, and the supporting kinds'."""
        errors, rollouts, events = self.intake.parse_errors, self.rollouts, self.events
        return {
            Kind.TYPE: ResourceTypeReconciler(
                self.registry, self.writer, errors, rollouts, events=events
            ),
            Kind.RESOURCE: ResourceReconciler(
                self.registry, self.writer, errors, self.intake.holds, rollouts, events=events
            ),
            Kind.TOOL: ToolReconciler(self.registry, self.writer, errors, events, rollouts),
            Kind.AGENT: agents,
            Kind.GRANT: GrantReconciler(
                self.registry, self.writer, errors, rollouts, events=events
            ),
        }

    # ------------------------------------------------------------------ intake

    def observe(
        self, endpoint: k8s_api.Endpoint, body: dict[str, Any], deleted: bool = False
    ) -> None:
        """An object was listed, added, modified or deleted: queue what it affects."""
        for request in self.intake.observe(endpoint, body, deleted=deleted):
            self.queue.add(request)

    def _written(
        self, endpoint: k8s_api.Endpoint, body: dict[str, Any], deleted: bool, by: Request
    ) -> None:
        for request in self.intake.observe(endpoint, body, deleted=deleted, by=by):
            self.queue.add(request)

    def listed(self, endpoint: k8s_api.Endpoint, body: dict[str, Any]) -> None:
        """kopf's listing delivered ``body`` (after :meth:`observe`): when kopf is listing
        ``endpoint`` again, sweep out what was deleted unseen, soon."""
        self.sweeper.listed(endpoint, key_of(body))

    def watched(self, endpoint: k8s_api.Endpoint) -> None:
        """A watch event of ``endpoint`` arrived: kopf's first listing of it is over."""
        self.sweeper.watched(endpoint)

    def relisted(self, endpoint: k8s_api.Endpoint) -> None:
        """Sweep ``endpoint`` soon: what was deleted unseen leaves the view."""
        self.sweeper.relisted(endpoint)

    async def listing(self) -> Listing:
        """What exists now, by key and version, for :meth:`catch_up` (a metadata LIST)."""
        return await self.catching_up.listing()

    async def catch_up(self, listing: Listing, *, stall: float = 3.0) -> None:
        """Wait until the view holds everything ``listing`` showed (see ``CatchUp.catch_up``)
        and a whole listing of every owned kind (:meth:`watch` must have begun)."""
        await asyncio.gather(
            self.catching_up.catch_up(listing, stall=stall), self.informers.synced()
        )

    def enqueue_all(self) -> None:
        """Queue every object of the five kinds (the first pass after start-up). Rollouts are
        counted once every agent has had its pass (or after ``rollout_settle`` seconds)."""
        self.rollouts.expect(Ref.of(b).key for b in self.store.of(k8s_api.AGENTS).values())
        if not self.rollouts.warm:
            self.clock.call_at(self.clock.now() + self.rollout_settle, self.rollouts.settle)
        for kind, endpoint in k8s_api.ENDPOINTS.items():
            for body in self.store.of(endpoint).values():
                self.queue.add(Request(kind, Ref.of(body)))

    def _enqueue_supporting(self) -> None:
        """Rollouts are known now: look at every object agents depend on once (a pass writes
        only what changed)."""
        for kind, endpoint in k8s_api.ENDPOINTS.items():
            if kind is not Kind.AGENT:
                for body in self.store.of(endpoint).values():
                    self.queue.add(Request(kind, Ref.of(body)))

    # ------------------------------------------------------------------ lifecycle

    def watch(self) -> None:
        """Begin listing and watching the owned kinds into the view (leading or not)."""
        self.informers.start()

    def start(self) -> None:
        self.pool.start()
        self.sweeper.start()

    async def stop(self) -> None:
        await self.informers.stop()
        await self.sweeper.stop()
        await self.pool.stop()
        await self.events.stop()

    async def process(self, request: Request) -> Result | None:
        """Run one pass for ``request`` now (the workers' path, for tools and benchmarks); what
        it came to (None: its object is no longer in the view)."""
        return await self.pool.process(request)
