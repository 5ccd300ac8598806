"""Bindings delivery: the agent's resolved bindings, written to the ConfigMap its session reads."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from controller.domain import delivery, names
from controller.domain.models import AgentObject
from controller.k8s import api, builders
from controller.reconcile.compact import data_of
from controller.reconcile.passes import Pass
from controller.reconcile.store import Store
from controller.reconcile.writer import Writer


def new_nonce() -> str:
    """A fresh nonce for a document about to be written (64 random bits)."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Delivered:
    """The document an agent's ConfigMap carries after :meth:`BindingsDelivery.deliver`."""

    digest: str
    """Its digest: what the session's acknowledgement must name."""
    written: bool
    """Whether this pass wrote it."""


class BindingsDelivery:
    """Creates or updates an agent's bindings ConfigMap; writes only when the document changed
    (or is not the one the controller recorded writing: see
    :func:`controller.domain.delivery.current_stands`)."""

    def __init__(self, store: Store, writer: Writer) -> None:
        self.store = store
        self.writer = writer
        self._written: dict[str, str] = {}
        """Agent key -> digest of the document this process last wrote for it: what a pass
        checks the ConfigMap against before the agent's status records it (a pass that failed
        after the write), and over a status written by others. Empty after a start: the status
        records the last write then."""

    def forget(self, agent_key: str) -> None:
        """The agent is gone: its last write is nothing to check against any more."""
        self._written.pop(agent_key, None)

    def delivered(self, agent_namespace: str, agent_name: str) -> dict[str, Any] | None:
        """The agent's bindings ConfigMap as last observed."""
        return self.store.get(
            api.CONFIG_MAPS, names.key(agent_namespace, names.bindings_config_map_name(agent_name))
        )

    async def deliver(
        self, pass_: Pass, agent: AgentObject, document: dict[str, Any], recorded_digest: str
    ) -> Delivered:
        """Make the ConfigMap carry ``document`` (built without a nonce); ``recorded_digest`` is
        the digest the agent's status records for the controller's last write."""
        key = names.key(agent.meta.namespace, agent.meta.name)
        current = self.delivered(agent.meta.namespace, agent.meta.name)
        if current is None:
            rendered = delivery.render(delivery.stamp(document, new_nonce()))
            desired = builders.bindings_config_map(agent, rendered)
            current, created = await self.writer.create(pass_, api.CONFIG_MAPS, desired)
            if created:
                return self._wrote(key, rendered)
        current = await self.writer.own(pass_, api.CONFIG_MAPS, current, agent, "ConfigMap")
        text = _document(current)
        expected = self._written.get(key, recorded_digest)
        if delivery.current_stands(text, document, expected):
            return Delivered(expected, written=False)
        rendered = delivery.render(delivery.stamp(document, new_nonce()))
        await self._write(pass_, current, rendered)
        return self._wrote(key, rendered)

    def _wrote(self, key: str, rendered: str) -> Delivered:
        written = Delivered(delivery.digest(rendered), written=True)
        self._written[key] = written.digest
        return written

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
            rendered = delivery.without_work(data, new_nonce())
            await self._write(pass_, current, rendered)
            self._written[names.key(agent_namespace, agent_name)] = delivery.digest(rendered)

    async def _write(self, pass_: Pass, current: dict[str, Any], rendered: str) -> None:
        await self.writer.patch_at(
            pass_, api.CONFIG_MAPS, current, {"data": {delivery.BINDINGS_FILE: rendered}}
        )


def _document(config_map: dict[str, Any]) -> str:
    return str(data_of(config_map).get(delivery.BINDINGS_FILE, ""))
