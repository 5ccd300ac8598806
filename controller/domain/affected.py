"""What must be reconciled again after a change to the registry."""

from __future__ import annotations

from dataclasses import dataclass

_NONE: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Affected:
    """What must be reconciled again after a change (keys are ``namespace/name``; types by name).

    It is falsy when nothing is affected, which is what an upsert of an unchanged object returns.
    """

    agents: frozenset[str] = _NONE
    """Agents whose resolution may have changed."""
    tools: frozenset[str] = _NONE
    """Tools whose static-slot validation may have changed."""
    resources: frozenset[str] = _NONE
    """Resources whose own validity (type, URI scheme) may have changed."""
    types: frozenset[str] = _NONE
    """ResourceTypes whose closure, cycle or unknown parents may have changed."""

    def __or__(self, other: Affected) -> Affected:
        if not other:  # the common case: most changes affect nothing more
            return self
        if not self:
            return other
        return Affected(
            agents=self.agents | other.agents,
            tools=self.tools | other.tools,
            resources=self.resources | other.resources,
            types=self.types | other.types,
        )

    def __bool__(self) -> bool:
        return bool(self.agents or self.tools or self.resources or self.types)
