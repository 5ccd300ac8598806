"""Acknowledgements: the per-agent objects a session's delivery sidecar needs, and what its
acknowledgements say about the document the controller last wrote.

With a delivery sidecar configured (``--session-delivery-image``), every agent with a runtime
gets, before its session is launched: its own ServiceAccount (unless the runtime or the
installation names one), a Role and RoleBinding that let that ServiceAccount read the agent's
ConfigMap and write its acknowledgement Lease (by name: nothing else), and the Lease itself.
The Lease is created last, so its presence in the view says all four are in place; they are
(re)applied at every launch, when the ServiceAccount the pod runs as may change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain import session_pods as sp
from controller.domain.models import AgentObject, Runtime
from controller.k8s import api, builders
from controller.reconcile.passes import Pass
from controller.reconcile.session_pods import SessionPods
from controller.reconcile.store import Store
from controller.reconcile.writer import Writer


@dataclass(frozen=True)
class Releasable:
    """Whether holds withdrawn from the document may be released in this pass."""

    now: bool
    by_grace: bool = False
    """Only because the grace period passed (a session that cannot acknowledge: unverified)."""


class Acknowledgements:
    """Creates an agent's delivery objects and reads its session's acknowledgements."""

    def __init__(
        self,
        store: Store,
        writer: Writer,
        *,
        pods: SessionPods,
        delivery: builders.SessionDelivery | None,
        service_account: str = "",
        grace: float = 120.0,
        timeout: float = 60.0,
    ) -> None:
        self.store = store
        self.writer = writer
        self.pods = pods
        """The agents' session pods, found by their labels (not through the StatefulSet)."""
        self.delivery = delivery
        self.service_account = service_account
        self.grace = grace
        """Seconds after which a hold is released for a session that cannot acknowledge."""
        self.timeout = timeout
        """Seconds after which a session that can acknowledge and has not is Stalled."""

    def _lease(self, agent: AgentObject) -> dict[str, Any] | None:
        lease = names.ack_lease_name(agent.meta.name)
        return self.store.get(api.LEASES, names.key(agent.meta.namespace, lease))

    async def ensure(
        self, pass_: Pass, agent: AgentObject, runtime: Runtime, *, launching: bool
    ) -> None:
        """The agent's delivery objects; at a launch every one, else only when one is missing."""
        if self.delivery is None or (not launching and self._lease(agent) is not None):
            return
        account = runtime.service_account_name or self.service_account
        if not account:
            account = names.session_service_account_name(agent.meta.name)
            await self._apply(
                pass_, agent, api.SERVICE_ACCOUNTS, builders.session_service_account(agent)
            )
        await self._apply(pass_, agent, api.ROLES, builders.session_role(agent))
        binding = builders.session_role_binding(agent, account)
        await self._apply(pass_, agent, api.ROLE_BINDINGS, binding)
        if self._lease(agent) is None:
            found, _ = await self.writer.create(
                pass_, api.LEASES, builders.acknowledgement_lease(agent)
            )
            await self.writer.own(pass_, api.LEASES, found, agent, "Lease")

    async def _apply(
        self, pass_: Pass, agent: AgentObject, endpoint: api.Endpoint, desired: dict[str, Any]
    ) -> None:
        """Create ``desired``, or own what is there and bring its rules or subjects to it."""
        found, created = await self.writer.create(pass_, endpoint, desired)
        if created:
            return
        found = await self.writer.own(pass_, endpoint, found, agent, str(desired["kind"]))
        drift: dict[str, Any] = {
            k: desired[k]
            for k in ("rules", "subjects")
            if k in desired and found.get(k) != desired[k]
        }
        if drift:
            await self.writer.patch_at(pass_, endpoint, found, drift)

    def delivery_view(
        self,
        agent: AgentObject,
        digest: str,
        written_at: str,
        *,
        since_write: float,
        releasing: tuple[str, ...],
    ) -> ack.DeliveryView:
        """Where ``agent``'s session stands with the document ``digest`` (written at
        ``written_at``, ``since_write`` seconds ago): every pod labelled as its session counts,
        whoever owns it (an orphaned pod is still the session)."""
        # With or without a runtime now: a session launched before the runtime was removed
        # runs until its pod ends.
        ns, name = agent.meta.namespace, agent.meta.name
        pods = self.pods.of(ns, name, agent.meta.uid)  # by what they are, whoever owns them
        record = self.pods.record(ns, name)
        confirmation, session = sp.standing(pods, record, digest)
        if record is not None and (session is None or record.pod_uid != session.uid):
            record = None
        return ack.DeliveryView(
            digest,
            written_at,
            confirmation,
            record=record,
            pod_uid=session.uid if session else "",
            overdue=confirmation is ack.Confirmation.PENDING and since_write >= self.timeout,
            releasing=releasing,
        )

    def releasable(self, view: ack.DeliveryView, since_write: float) -> Releasable:
        """Whether holds withdrawn from the document may go now (see :class:`Releasable`)."""
        if view.confirmation is ack.Confirmation.CONFIRMED:
            return Releasable(now=True)
        if view.confirmation is ack.Confirmation.UNVERIFIABLE and since_write >= self.grace:
            return Releasable(now=True, by_grace=self.grace > 0)
        return Releasable(now=False)
