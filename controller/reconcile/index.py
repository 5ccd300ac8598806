"""Indexes the intake keeps beside the store: observed work holds, who wants which work URI,
and which pods are which agent's session."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from controller.domain.models import AgentObject
from controller.domain.multiindex import MultiIndex
from controller.domain.names import session_pod_name
from controller.domain.session_pods import AGENT_LABEL, COMPONENT_LABEL, SESSION_COMPONENT
from controller.domain.work import Hold, WorkScope, hold_name, in_scope

Slot = tuple[str, str]
"""(namespace, work URI): where a hold lives, or which namespace's agents want a URI."""


def hold_problem(body: dict[str, Any], hold: Hold | None, hold_namespace: str = "") -> str:
    """Why a Lease labelled as a hold cannot be one Bindery made ("" if it can be).

    Bindery names a hold after its URI, creates it in its holder's namespace (or, in the cluster
    work scope, in ``hold_namespace``) with the holder's uid, and never changes it: anything else
    was made or edited by someone else. A hold in ``hold_namespace`` is accepted in either scope,
    so that holds made before a scope switch keep counting.
    """
    if hold is None:
        return "it records no URI or no holder"
    md = body.get("metadata") or {}
    holder_ns = hold.holder.rpartition("/")[0]
    if md.get("name") != hold_name(hold.uri):
        return f"its name is not {hold_name(hold.uri)!r}, the one Bindery derives from its URI"
    where = md.get("namespace") or ""
    if holder_ns != where and not (hold_namespace and where == hold_namespace):
        return f"it names a holder in another namespace ({hold.holder})"
    if not hold.holder_uid:
        return "it records no holder uid"
    return ""


class HoldIndex:
    """Observed holds by (namespace, URI), by URI and by holder uid; Leases that only pose as
    holds."""

    def __init__(self) -> None:
        self.by_slot: dict[Slot, Hold] = {}
        self.by_uri: MultiIndex[str, str] = MultiIndex()
        """URI -> the namespaces a hold for it lives in."""
        self.by_holder: MultiIndex[str, Slot] = MultiIndex()
        self.ignored: dict[tuple[str, str], str] = {}
        """(namespace, Lease name) -> why that Lease does not count as a hold."""

    def get(self, namespace: str, uri: str) -> Hold | None:
        return self.by_slot.get((namespace, uri))

    def everywhere(self, uri: str) -> list[Hold]:
        """The holds for ``uri`` in every namespace, in a stable order."""
        return [self.by_slot[(ns, uri)] for ns in sorted(self.by_uri.get(uri))]

    def counting(self, scope: WorkScope, namespace: str, uri: str) -> list[Hold]:
        """The holds for ``uri`` that exclude an agent of ``namespace`` under ``scope``."""
        return [h for h in self.everywhere(uri) if in_scope(scope, namespace, h)]

    def holding(self, namespace: str, uri: str) -> Hold | None:
        """The hold for ``uri`` of an agent of ``namespace``, wherever it lives (the one in
        ``namespace`` first)."""
        return self.get(namespace, uri) or next(
            (h for h in self.everywhere(uri) if h.holder.rpartition("/")[0] == namespace), None
        )

    def of(self, holder_uid: str) -> list[Hold]:
        """The holds naming ``holder_uid``, in a stable order."""
        return [self.by_slot[slot] for slot in sorted(self.by_holder.get(holder_uid))]

    def named(self, holder: str) -> list[Hold]:
        """The holds whose holderIdentity is ``holder`` (``namespace/name``), whatever its uid."""
        return [h for h in self.by_slot.values() if h.holder == holder]

    def file(self, namespace: str, hold: Hold, *, present: bool) -> None:
        """Record (or forget) a hold under its URI and under its holder's uid."""
        slot = (namespace, hold.uri)
        current = self.by_slot.get(slot)
        if current is not None and (present or current.uid == hold.uid):
            del self.by_slot[slot]
            self.by_uri.discard(hold.uri, namespace)
            self.by_holder.discard(current.holder_uid, slot)
        if present:
            self.by_slot[slot] = hold
            self.by_uri.add(hold.uri, namespace)
            self.by_holder.add(hold.holder_uid, slot)


class WantedIndex:
    """Which agents' specs ask for which work URI, so a released URI finds its claimants."""

    def __init__(self, scope: WorkScope = WorkScope.NAMESPACE) -> None:
        self.scope = scope
        """Whose line an agent waits in: its namespace's claimants of a URI, or the cluster's."""
        self.claimants: MultiIndex[Slot, str] = MultiIndex()
        self.by_uri: MultiIndex[str, str] = MultiIndex()
        """URI -> the agents (keys) in every namespace asking for it."""
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
        """The agents of ``namespace`` asking for ``uri``."""
        return self.claimants.get((namespace, uri))

    def line(self, namespace: str, uri: str) -> AbstractSet[str]:
        """The agents an agent of ``namespace`` waits in line with for ``uri`` under the scope."""
        if self.scope is WorkScope.CLUSTER:
            return self.by_uri.get(uri)
        return self.get(namespace, uri)

    def everywhere(self, uri: str) -> AbstractSet[str]:
        """The agents in every namespace asking for ``uri``."""
        return self.by_uri.get(uri)

    def update(self, namespace: str, key: str, agent: AgentObject | None) -> str | None:
        """File ``agent``'s work URI under ``key``; return the URI it asked for before, if any."""
        old = self.work_of.pop(key, None)
        if old is not None:
            self.claimants.discard((namespace, old), key)
            self.by_uri.discard(old, key)
        if agent is None:
            self.blocked.discard(key)
        work = agent.spec.work() if agent else None
        if work is not None:
            self.work_of[key] = work.uri
            self.claimants.add((namespace, work.uri), key)
            self.by_uri.add(work.uri, key)
        return old


class SessionPodIndex:
    """The keys of the observed pods labelled as an agent's session, by (namespace, agent name):
    found by what they are, not by the StatefulSet that made them."""

    def __init__(self) -> None:
        self._pods: dict[tuple[str, str], set[str]] = {}
        self._of: dict[str, tuple[str, str]] = {}

    def file(self, key: str, body: dict[str, Any] | None) -> None:
        """The pod ``key`` is now ``body`` (None: gone)."""
        before = self._of.pop(key, None)
        if before is not None:
            keys = self._pods.get(before, set())
            keys.discard(key)
            if not keys:
                self._pods.pop(before, None)
        labels = ((body or {}).get("metadata") or {}).get("labels") or {}
        agent = labels.get(AGENT_LABEL)
        if body is None or not agent or labels.get(COMPONENT_LABEL) != SESSION_COMPONENT:
            return
        where = (key.partition("/")[0], str(agent))
        self._of[key] = where
        self._pods.setdefault(where, set()).add(key)

    def of(self, namespace: str, agent_name: str) -> list[str]:
        """The keys of the pods labelled as ``agent_name``'s session in ``namespace``, the
        StatefulSet's own name first."""
        keys = self._pods.get((namespace, agent_name), set())
        first = f"{namespace}/{session_pod_name(agent_name)}"
        return sorted(keys, key=lambda k: (k != first, k))
