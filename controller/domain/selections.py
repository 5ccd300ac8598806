"""Which Resources each agent's ``resourceSelector`` selects, kept in both directions as either
side changes (see :mod:`~controller.domain.label_selectors` for how selectors are evaluated)."""

from __future__ import annotations

from collections.abc import Mapping, Set

from controller.domain.label_selectors import LabelIndex, SelectorIndex
from controller.domain.models import ResourceSelector
from controller.domain.multiindex import MultiIndex


class Selections:
    """Resources by labels, agents by selector, and the links between them."""

    __slots__ = ("_labels", "_linked_by", "_links", "_selectors")

    def __init__(self) -> None:
        self._labels = LabelIndex()
        self._selectors = SelectorIndex()
        self._links: MultiIndex[str, str] = MultiIndex()
        """Agent -> the Resources its selector selects."""
        self._linked_by: MultiIndex[str, str] = MultiIndex()
        """Resource key -> the agents whose selectors select it."""

    def selected(self, agent: str) -> Set[str]:
        """Keys of the Resources the agent's selector selects (a live view)."""
        return self._links.get(agent)

    def selecting(self, resource: str) -> Set[str]:
        """Keys of the agents whose selectors select the Resource (a live view)."""
        return self._linked_by.get(resource)

    def add_resource(self, namespace: str, key: str, labels: Mapping[str, str]) -> None:
        self._labels.add(namespace, key, labels)
        for agent in self._selectors.selecting(namespace, labels):
            self._link(agent, key)

    def discard_resource(self, key: str) -> None:
        """Unfile a Resource that was added (KeyError if it was not)."""
        self._labels.discard(key)
        for agent in list(self._linked_by.get(key)):
            self._unlink(agent, key)

    def add_agent(self, namespace: str, key: str, selector: ResourceSelector | None) -> None:
        """File the agent's selector: in its own namespace and in the others it lists (whether
        a grant admits what it selects there is resolution's to decide)."""
        if selector is None:
            return
        spaces = [namespace, *(other for other in selector.namespaces if other != namespace)]
        anchor = self._labels.best_anchor(namespace, selector)
        self._selectors.add(spaces, key, selector, anchor)
        for space in spaces:
            for resource in self._labels.select(space, selector, anchor):
                self._link(key, resource)

    def discard_agent(self, key: str) -> None:
        self._selectors.discard(key)
        for resource in list(self._links.get(key)):
            self._unlink(key, resource)

    def _link(self, agent: str, resource: str) -> None:
        self._links.add(agent, resource)
        self._linked_by.add(resource, agent)

    def _unlink(self, agent: str, resource: str) -> None:
        self._links.discard(agent, resource)
        self._linked_by.discard(resource, agent)
