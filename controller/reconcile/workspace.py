"""The session's workspace: a PersistentVolumeClaim made before the session and kept across it.

The claim is created once and adopted as found afterwards: a pass writes it only to make its
owner follow the reclaim policy or to grow it, so an idle controller never writes it. A claim of
the same name that is not Bindery's for this agent is never written (ForeignObjectError), and
the session is not launched on it.
"""

from __future__ import annotations

from typing import Any

import structlog

from controller.domain import names
from controller.domain import workspace as ws
from controller.domain.models import AgentObject, Runtime, Workspace
from controller.k8s import api, builders
from controller.k8s.api import ApiError
from controller.reconcile.passes import Pass
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, Writer

log = structlog.get_logger("bindery.workspace")

CLAIM = "PersistentVolumeClaim"


def _retained_by(claim: dict[str, Any], agent: AgentObject) -> bool:
    """Bindery's claim for an agent of this name, owned by none (a Retain claim)."""
    labels = (claim.get("metadata") or {}).get("labels") or {}
    return (
        labels.get(builders.MANAGED_BY) == builders.MANAGER
        and labels.get(builders.AGENT_LABEL) == agent.meta.name
        and builders.owner_of(claim) is None
    )


class Workspaces:
    """Converges an agent's workspace claim with ``spec.runtime.workspace``."""

    class_ttl = 300.0
    """Seconds a StorageClass's allowVolumeExpansion is remembered (read only to grow a claim)."""

    def __init__(self, store: Store, writer: Writer) -> None:
        self.store = store
        self.writer = writer
        self._expandable: dict[str, tuple[float, bool]] = {}

    async def converge(
        self, pass_: Pass, agent: AgentObject, runtime: Runtime
    ) -> ws.WorkspaceView | None:
        """The agent's claim, created if absent and adjusted; None without a workspace."""
        workspace = runtime.workspace
        if workspace is None:
            return None  # a claim made earlier stays until the agent goes (its data is kept)
        name = names.workspace_claim_name(agent.meta.name)
        claim = self.store.get(api.PERSISTENT_VOLUME_CLAIMS, names.key(agent.meta.namespace, name))
        if claim is None:
            desired = builders.workspace_claim(agent, workspace)
            claim, created = await self.writer.create(pass_, api.PERSISTENT_VOLUME_CLAIMS, desired)
            if created:
                log.info("created workspace claim", agent=agent.meta.key, claim=name)
        claim = await self._own(pass_, agent, workspace, claim)
        change = ws.size_change(claim, workspace)
        message = ws.unchangeable(claim, workspace, change)
        if change is ws.SizeChange.GROW:
            claim, refused = await self._grow(pass_, claim, workspace)
            message = "; ".join(m for m in (message, refused) if m)
        return ws.WorkspaceView(claim, workspace, message)

    async def _own(
        self, pass_: Pass, agent: AgentObject, workspace: Workspace, claim: dict[str, Any]
    ) -> dict[str, Any]:
        """The claim as the agent's, its owner as the reclaim policy says."""
        if workspace.reclaim_policy == "Delete":
            if _retained_by(claim, agent):  # was Retain: the agent owns it again
                adopted = await self.writer.patch_at(
                    pass_, api.PERSISTENT_VOLUME_CLAIMS, claim, builders.adoption(claim, agent)
                )
                if adopted is None:
                    raise ForeignObjectError(CLAIM, claim, agent.meta.name, agent.meta.uid)
                return adopted
            return await self.writer.own(pass_, api.PERSISTENT_VOLUME_CLAIMS, claim, agent, CLAIM)
        if _retained_by(claim, agent):
            return claim
        claim = await self.writer.own(pass_, api.PERSISTENT_VOLUME_CLAIMS, claim, agent, CLAIM)
        kept = [
            r for r in claim["metadata"].get("ownerReferences") or [] if not r.get("controller")
        ]
        released = await self.writer.patch_at(
            pass_, api.PERSISTENT_VOLUME_CLAIMS, claim, {"metadata": {"ownerReferences": kept}}
        )
        if released is None:
            raise ForeignObjectError(CLAIM, claim, agent.meta.name, agent.meta.uid)
        log.info("workspace claim retained", agent=agent.meta.key, claim=claim["metadata"]["name"])
        return released

    async def _grow(
        self, pass_: Pass, claim: dict[str, Any], workspace: Workspace
    ) -> tuple[dict[str, Any], str]:
        """The claim asked for the larger size if its class allows expansion, else why not."""
        storage_class = str((claim.get("spec") or {}).get("storageClassName") or "")
        if not await self._allows_expansion(storage_class, pass_.now.monotonic):
            return claim, ws.not_expandable(claim, workspace, storage_class)
        grown = await self.writer.patch_at(
            pass_, api.PERSISTENT_VOLUME_CLAIMS, claim, ws.resize_patch(workspace)
        )
        log.info("growing workspace claim", claim=claim["metadata"]["name"], size=workspace.size)
        return grown or claim, ""

    async def _allows_expansion(self, storage_class: str, now: float) -> bool:
        """Whether ``storage_class`` allows volume expansion (as read at most ``class_ttl``
        seconds before ``now``, in monotonic seconds)."""
        if not storage_class:
            return False
        known = self._expandable.get(storage_class)
        if known is not None and now - known[0] < self.class_ttl:
            return known[1]
        try:
            found = await self.writer.api.get(api.STORAGE_CLASSES, "", storage_class)
        except ApiError as exc:  # not allowed to read classes: report, do not guess
            log.debug("cannot read storage class", storage_class=storage_class, error=str(exc))
            found = None
        allows = bool((found or {}).get("allowVolumeExpansion"))
        self._expandable[storage_class] = (now, allows)
        return allows
