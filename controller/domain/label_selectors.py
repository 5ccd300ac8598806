"""Kubernetes label selectors, and the two indexes that evaluate them without scanning.

Selector semantics are Kubernetes': ``matchLabels`` and every ``matchExpressions`` requirement
must all hold; ``NotIn`` also matches objects without the key; an empty selector matches every
object.

An agent's ``resourceSelector`` is evaluated in both directions: "which Resources does this agent
select?" when the agent changes, and "which agents select this Resource?" when the Resource
changes. Both start from an *anchor*: one positive term of the selector (a label value, a set of
values, or a key that must exist) that every selected object necessarily carries. The anchor
narrows the search to the objects (or agents) filed under it; the full selector then filters that
short list. Only selectors without a positive term (just ``NotIn``/``DoesNotExist``, or empty)
fall back to the whole namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.domain.models import LabelSelector, LabelSelectorRequirement
from controller.domain.multiindex import MultiIndex


def _requirement_holds(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    value = labels.get(req.key)
    if req.operator == "In":
        return value is not None and value in req.values
    if req.operator == "NotIn":
        return value is None or value not in req.values
    if req.operator == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Whether an object with ``labels`` is selected by ``selector``."""
    return all(labels.get(k) == v for k, v in selector.match_labels.items()) and all(
        _requirement_holds(req, labels) for req in selector.match_expressions
    )


@dataclass(frozen=True, slots=True)
class Anchor:
    """A label condition every object a selector selects must meet.

    ``values`` empty means "the key exists" (from ``Exists``, or from an ``In`` without values,
    which matches nothing: the looser condition is still a necessary one); otherwise the
    object's value for ``key`` is one of ``values`` (from ``matchLabels`` or ``In``).
    """

    key: str
    values: tuple[str, ...] = ()


def anchors(selector: LabelSelector) -> list[Anchor]:
    """Every positive term of ``selector``, each a necessary condition for a match."""
    found = [Anchor(k, (v,)) for k, v in sorted(selector.match_labels.items())]
    for req in selector.match_expressions:
        if req.operator == "In":
            found.append(Anchor(req.key, tuple(sorted(set(req.values)))))
        elif req.operator == "Exists":
            found.append(Anchor(req.key))
    return found


Filing = tuple[str, ...]
"""Where an index files an entry: ``(ns,)``, ``(ns, key)`` or ``(ns, key, value)``."""


def _label_filings(namespace: str, labels: Mapping[str, str]) -> list[Filing]:
    """Every filing an object with ``labels`` is found under: its namespace, keys and values."""
    filings: list[Filing] = [(namespace,)]
    for k, v in labels.items():
        filings += [(namespace, k), (namespace, k, v)]
    return filings


def _anchor_filings(namespace: str, anchor: Anchor | None) -> list[Filing]:
    """The filings that hold every object meeting ``anchor`` (the namespace if there is none)."""
    if anchor is None:
        return [(namespace,)]
    if anchor.values:
        return [(namespace, anchor.key, v) for v in anchor.values]
    return [(namespace, anchor.key)]


class LabelIndex:
    """Objects (by key) filed by namespace, label key and label value."""

    __slots__ = ("_filed", "_labels")

    def __init__(self) -> None:
        self._labels: dict[str, tuple[str, Mapping[str, str]]] = {}
        self._filed: MultiIndex[Filing, str] = MultiIndex()

    def add(self, namespace: str, key: str, labels: Mapping[str, str]) -> None:
        self._labels[key] = (namespace, labels)
        for filing in _label_filings(namespace, labels):
            self._filed.add(filing, key)

    def discard(self, key: str) -> None:
        """Unfile an object that was added (KeyError if it was not)."""
        for filing in _label_filings(*self._labels.pop(key)):
            self._filed.discard(filing, key)

    def best_anchor(self, namespace: str, selector: LabelSelector) -> Anchor | None:
        """The anchor with the fewest objects under it now; ``None`` if the selector has none."""
        return min(
            anchors(selector),
            key=lambda a: sum(self._filed.count(f) for f in _anchor_filings(namespace, a)),
            default=None,
        )

    def select(self, namespace: str, selector: LabelSelector, anchor: Anchor | None) -> set[str]:
        """Keys of the objects in ``namespace`` that ``selector`` selects.

        ``anchor`` must be one of the selector's anchors (or ``None`` to search the namespace);
        the caller picks it with :meth:`best_anchor`, and may file the selector under it.
        """
        pool = set().union(*(self._filed.get(f) for f in _anchor_filings(namespace, anchor)))
        return {key for key in pool if matches(selector, self._labels[key][1])}


class SelectorIndex:
    """Selectors (of agents, by key) filed by their anchor, to find who selects given labels."""

    __slots__ = ("_filed", "_selectors")

    def __init__(self) -> None:
        self._selectors: dict[str, tuple[LabelSelector, list[Filing]]] = {}
        self._filed: MultiIndex[Filing, str] = MultiIndex()

    def add(
        self,
        namespace: str | Sequence[str],
        key: str,
        selector: LabelSelector,
        anchor: Anchor | None,
    ) -> None:
        """File the selector under ``anchor`` in ``namespace`` (or in each of several)."""
        spaces = (namespace,) if isinstance(namespace, str) else namespace
        filings = [f for space in spaces for f in _anchor_filings(space, anchor)]
        self._selectors[key] = (selector, filings)
        for filing in filings:
            self._filed.add(filing, key)

    def discard(self, key: str) -> None:
        entry = self._selectors.pop(key, None)
        if entry is not None:
            for filing in entry[1]:
                self._filed.discard(filing, key)

    def selecting(self, namespace: str, labels: Mapping[str, str]) -> set[str]:
        """Keys of the selectors in ``namespace`` that select an object with ``labels``."""
        pool = set().union(*(self._filed.get(f) for f in _label_filings(namespace, labels)))
        return {key for key in pool if matches(self._selectors[key][0], labels)}
