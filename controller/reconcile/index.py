"""Indexes the intake keeps beside the store: observed work holds, and who wants which work URI."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from controller.domain.models import AgentObject
from controller.domain.multiindex import MultiIndex
from controller.domain.work import Hold
from controller.k8s import builders

Slot = tuple[str, str]
"""(namespace, work URI)."""


def hold_from(body: dict[str, Any] | None) -> Hold | None:
    """The hold a Lease body records, or None if it records none."""
    if not body:
        return None
    md = body.get("metadata") or {}
    ann = md.get("annotations") or {}
    uri = ann.get(builders.URI_ANNOTATION)
    holder = (body.get("spec") or {}).get("holderIdentity")
    if not uri or not holder:
        return None
    return Hold(
        uri=uri,
        holder=holder,
        holder_uid=ann.get(builders.HOLDER_UID_ANNOTATION, ""),
        name=md.get("name", ""),
        resource_version=str(md.get("resourceVersion", "")),
        uid=md.get("uid", ""),
    )


class HoldIndex:
    """Observed holds by (namespace, URI) and by holder uid."""

    def __init__(self) -> None:
        self.by_slot: dict[Slot, Hold] = {}
        self.by_holder: MultiIndex[str, Slot] = MultiIndex()

    def get(self, namespace: str, uri: str) -> Hold | None:
        return self.by_slot.get((namespace, uri))

    def of(self, holder_uid: str) -> list[Hold]:
        """The holds naming ``holder_uid``, in a stable order."""
        return [self.by_slot[slot] for slot in sorted(self.by_holder.get(holder_uid))]

    def file(self, namespace: str, hold: Hold, *, present: bool) -> None:
        """Record (or forget) a hold under its URI and under its holder's uid."""
        slot = (namespace, hold.uri)
        current = self.by_slot.get(slot)
        if current is not None and (present or current.uid == hold.uid):
            del self.by_slot[slot]
            self.by_holder.discard(current.holder_uid, slot)
        if present:
            self.by_slot[slot] = hold
            self.by_holder.add(hold.holder_uid, slot)


class WantedIndex:
    """Which agents' specs ask for which work URI, so a released URI finds its claimants."""

    def __init__(self) -> None:
        self.claimants: MultiIndex[Slot, str] = MultiIndex()
        self.work_of: dict[str, str] = {}
        """agent key -> the work URI its spec asks for."""
        self.blocked: set[str] = set()
        """Agents whose work binding is in error: they cannot hold, so they wait in no line."""

    def block(self, key: str, blocked: bool) -> bool:
        """Record whether ``key``'s work binding is in error; whether that changed."""
        if blocked == (key in self.blocked):
            return False
        if blocked:
            self.blocked.add(key)
        else:
            self.blocked.discard(key)
        return True

    def get(self, namespace: str, uri: str) -> AbstractSet[str]:
        return self.claimants.get((namespace, uri))

    def update(self, namespace: str, key: str, agent: AgentObject | None) -> str | None:
        """File ``agent``'s work URI under ``key``; return the URI it asked for before, if any."""
        old = self.work_of.pop(key, None)
        if old is not None:
            self.claimants.discard((namespace, old), key)
        if agent is None:
            self.blocked.discard(key)
        work = agent.spec.work() if agent else None
        if work is not None:
            self.work_of[key] = work.uri
            self.claimants.add((namespace, work.uri), key)
        return old
