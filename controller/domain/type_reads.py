"""What a resolution read of the type graph, and the index from types back to the agents that
read them: a type change re-resolves only the agents it can affect."""

from __future__ import annotations

from collections.abc import Set
from operator import itemgetter
from typing import NamedTuple

_NONE: frozenset[str] = frozenset()
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


class TypeReads(NamedTuple):
    """What a resolution read of the type graph: the types of the resources it examined, and
    which of them it checked against which slot types and tags.

    Messages name types, never their ancestors, so a change to the ancestors of ``T`` changes a
    resolution only if it checked a resource of type ``T`` against a type gained or lost; ``T``
    appearing or vanishing changes every check of ``T``. The registry keeps these to know which
    agents a type change affects without resolving every agent again. Tuples, not sets: the
    registry keeps one per agent, and they are small.
    """

    linked: tuple[str, ...]
    """Types of the agent's linked resources, each checked against every type in ``wanted``."""
    wanted: tuple[str, ...]
    """Types the agent's contextual slots ask for."""
    pairs: tuple[tuple[str, str], ...]
    """The other checks, as ``(resource type, type asked for)``: a direct binding's registered
    Resource against its tag, a resource named by a static or parameter slot against the slot."""

    @property
    def examined(self) -> frozenset[str]:
        """Types of the resources it examined (linked, named by a slot, or merged into a
        binding)."""
        return frozenset(self.linked).union(map(_FIRST, self.pairs))

    @property
    def asked(self) -> frozenset[str]:
        """The types it checked resources against (slot types and tags)."""
        return frozenset(self.wanted).union(map(_SECOND, self.pairs))

    def checks(self, type_name: str, asked: Set[str]) -> bool:
        """Whether it checked a resource of ``type_name`` against one of the types ``asked``."""
        if type_name in self.linked and not asked.isdisjoint(self.wanted):
            return True
        return any(checked == type_name and wanted in asked for checked, wanted in self.pairs)


class TypeReadIndex:
    """What each agent's last resolution read of the type graph (see :class:`TypeReads`),
    indexed by the types of the resources it examined and by the types it checked them against.

    An agent is *unknown* from the moment a change affects it until it is resolved again, and is
    then assumed to read every type: it is due a reconcile anyway.

    The two indexes are keyed by type: few keys, each with many agents, so they are plain dicts of
    sets (filed without a call per entry, as every resolution files its agent again).
    """

    __slots__ = ("_asking", "_examining", "_records", "unknown")

    def __init__(self) -> None:
        self._records: dict[str, TypeReads] = {}
        """Agent -> what its last resolution read: never the resolution itself."""
        self._examining: dict[str, set[str]] = {}
        self._asking: dict[str, set[str]] = {}
        self.unknown: set[str] = set()

    def record(self, agent: str, reads: TypeReads) -> None:
        self._drop_record(agent)
        self.unknown.discard(agent)
        self._records[agent] = reads
        for index, type_names in ((self._examining, reads.examined), (self._asking, reads.asked)):
            for type_name in type_names:
                agents = index.get(type_name)
                if agents is None:
                    index[type_name] = {agent}
                else:
                    agents.add(agent)

    def forget(self, agent: str) -> None:
        """The agent's last resolution is stale: it is unknown until resolved again."""
        self._drop_record(agent)
        self.unknown.add(agent)

    def drop(self, agent: str) -> None:
        """The agent is gone."""
        self._drop_record(agent)
        self.unknown.discard(agent)

    def _drop_record(self, agent: str) -> None:
        reads = self._records.pop(agent, None)
        if reads is None:
            return
        for index, type_names in ((self._examining, reads.examined), (self._asking, reads.asked)):
            for type_name in type_names:
                agents = index[type_name]
                agents.discard(agent)
                if not agents:
                    del index[type_name]

    def examining(self, type_name: str) -> Set[str]:
        """Agents that examined a resource of the type."""
        return self._examining.get(type_name, _NONE)

    def checking(self, type_name: str, asked: Set[str]) -> set[str]:
        """Agents that checked a resource of the type against one of the types ``asked``: among
        those that examined the type and asked for one of them (set operations narrow a type's
        many readers down to a few), those whose checks pair the two."""
        examining = self._examining.get(type_name, _NONE)
        maybe: set[str] = set()
        for wanted in asked:
            maybe |= examining & self._asking.get(wanted, _NONE)
        records = self._records
        return {agent for agent in maybe if records[agent].checks(type_name, asked)}
