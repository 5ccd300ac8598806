"""ResourceGrants by namespace, Namespaces' labels, and which referrers each grant decision was
made for: the reverse index a change to a grant (or to a referrer's Namespace labels) is looked
up in.

A referrer is an agent or a Tool (by key). Each resolution records the other namespaces whose
grants it consulted (its *reach*: a Resource it bound there by a grant, or was refused), so a
change to a grant in namespace ``N`` re-resolves exactly the referrers that reached into ``N``,
and a change to namespace ``R``'s labels (which ``namespaceSelector`` reads) exactly the
referrers in ``R`` that reached anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from controller.domain.grants import (
    GrantUse,
    Referrer,
    ResourceGrantObject,
    Target,
    granting,
)
from controller.domain.multiindex import MultiIndex

_NONE: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Reach:
    """For one kind of referrer: key -> namespaces reached, and the reverse."""

    of: dict[str, frozenset[str]] = field(default_factory=dict)
    into: MultiIndex[str, str] = field(default_factory=MultiIndex)
    """Target namespace -> referrers that reached into it."""
    living: MultiIndex[str, str] = field(default_factory=MultiIndex)
    """Referrer's own namespace -> its referrers that reached anywhere."""

    def record(self, key: str, reach: Set[str]) -> None:
        self.drop(key)
        if not reach:
            return
        self.of[key] = frozenset(reach)
        for namespace in reach:
            self.into.add(namespace, key)
        self.living.add(key.partition("/")[0], key)

    def drop(self, key: str) -> None:
        old = self.of.pop(key, _NONE)
        for namespace in old:
            self.into.discard(namespace, key)
        if old:
            self.living.discard(key.partition("/")[0], key)


class GrantIndex:
    """The grants of every namespace, its labels, and the referrers of each."""

    __slots__ = ("_agents", "_grants", "_labels", "_tools")

    def __init__(self) -> None:
        self._grants: dict[str, dict[str, ResourceGrantObject]] = {}
        """Namespace -> grant name -> grant."""
        self._labels: dict[str, Mapping[str, str]] = {}
        """Namespace -> its labels (as last observed)."""
        self._agents = _Reach()
        self._tools = _Reach()

    # -- reads ---------------------------------------------------------------------------------

    def grant(self, key: str) -> ResourceGrantObject | None:
        namespace, _, name = key.rpartition("/")
        return self._grants.get(namespace, {}).get(name)

    def labels(self, namespace: str) -> Mapping[str, str]:
        return self._labels.get(namespace, {})

    def grant_for(self, referrer: str, target: Target, use: GrantUse) -> ResourceGrantObject | None:
        grants = self._grants.get(target.namespace)
        if not grants:
            return None
        return granting(grants.values(), Referrer(referrer, self.labels(referrer)), target, use)

    def reaching(self, namespace: str) -> tuple[Set[str], Set[str]]:
        """The agents and Tools whose last resolution consulted ``namespace``'s grants."""
        return self._agents.into.get(namespace), self._tools.into.get(namespace)

    def reaching_from(self, namespace: str) -> tuple[Set[str], Set[str]]:
        """The agents and Tools of ``namespace`` whose last resolution consulted any grant."""
        return self._agents.living.get(namespace), self._tools.living.get(namespace)

    # -- changes -------------------------------------------------------------------------------

    def put(self, obj: ResourceGrantObject) -> bool:
        """Add or replace a grant; False when its spec is unchanged (nothing to re-resolve)."""
        grants = self._grants.setdefault(obj.meta.namespace, {})
        old = grants.get(obj.meta.name)
        grants[obj.meta.name] = obj
        return old is None or old.spec != obj.spec

    def remove(self, namespace: str, name: str) -> bool:
        grants = self._grants.get(namespace, {})
        if grants.pop(name, None) is None:
            return False
        if not grants:
            self._grants.pop(namespace, None)
        return True

    def set_labels(self, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """Record a Namespace's labels (None: the Namespace is gone); whether they changed."""
        old = self._labels.get(namespace)
        if labels is None:
            self._labels.pop(namespace, None)
            return bool(old)
        self._labels[namespace] = dict(labels)
        return dict(old or {}) != dict(labels)

    def record_agent(self, key: str, reach: Set[str]) -> None:
        self._agents.record(key, reach)

    def record_tool(self, key: str, reach: Set[str]) -> None:
        self._tools.record(key, reach)

    def drop_agent(self, key: str) -> None:
        self._agents.drop(key)

    def drop_tool(self, key: str) -> None:
        self._tools.drop(key)
