"""Bindings delivery: the agent's resolved bindings, written to the ConfigMap its session reads."""

from __future__ import annotations

from typing import Any

from controller.domain import delivery, names
from controller.domain.models import AgentObject
from controller.k8s import api, builders
from controller.reconcile.compact import data_of
from controller.reconcile.passes import Pass
from controller.reconcile.store import Store
from controller.reconcile.writer import Writer


class BindingsDelivery:
    """Creates or updates an agent's bindings ConfigMap; writes only when the document changed."""

    def __init__(self, store: Store, writer: Writer) -> None:
        self.store = store
        self.writer = writer

    def delivered(self, agent_namespace: str, agent_name: str) -> dict[str, Any] | None:
        """The agent's bindings ConfigMap as last observed."""
        return self.store.get(
            api.CONFIG_MAPS, names.key(agent_namespace, names.bindings_config_map_name(agent_name))
        )

    async def deliver(self, pass_: Pass, agent: AgentObject, rendered: str) -> bool:
        """Make the ConfigMap carry ``rendered``; whether anything was written."""
        current = self.delivered(agent.meta.namespace, agent.meta.name)
        if current is None:
            desired = builders.bindings_config_map(agent, rendered)
            current, created = await self.writer.create(pass_, api.CONFIG_MAPS, desired)
            if created:
                return True
        current = await self.writer.own(pass_, api.CONFIG_MAPS, current, agent, "ConfigMap")
        if _document(current) == rendered:
            return False
        await self._write(pass_, current, rendered)
        return True

    async def withdraw_work(
        self, pass_: Pass, agent_namespace: str, agent_name: str, agent_uid: str
    ) -> None:
        """Deliver the agent's last document without its work URI (before its hold goes).

        That is the agent's ConfigMap even once the garbage collector has orphaned it (an agent
        deleted with ``propagationPolicy: Orphan`` loses its owner reference before its
        finalizer runs), or its labels were removed (read from the API server then): only a
        ConfigMap another owner controls (by uid) is left alone.
        """
        current = self.delivered(agent_namespace, agent_name)
        if current is None:
            # Not in view, which is not proof that it is gone: a ConfigMap whose Bindery label
            # was removed left the watch's selection (seen as deleted) and still exists.
            name = names.bindings_config_map_name(agent_name)
            current = await self.writer.api.get(api.CONFIG_MAPS, agent_namespace, name)
        if current is None:
            return
        owner = builders.owner_of(current)
        if owner is not None and owner[2] != agent_uid:
            return
        data = _document(current)
        if delivery.delivered_work_uris(data):
            await self._write(pass_, current, delivery.without_work(data))

    async def _write(self, pass_: Pass, current: dict[str, Any], rendered: str) -> None:
        await self.writer.patch_at(
            pass_, api.CONFIG_MAPS, current, {"data": {delivery.BINDINGS_FILE: rendered}}
        )


def _document(config_map: dict[str, Any]) -> str:
    return str(data_of(config_map).get(delivery.BINDINGS_FILE, ""))
