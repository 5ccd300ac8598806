"""ResourceType graph: transitive closures of ``parentTypes``, cycles, and type compatibility.

A resource of type ``T`` can fill a slot asking for ``S`` when ``T == S`` or ``S`` is among ``T``'s
ancestors (its parents, their parents, ...). Users write ``parentTypes`` by hand, so the graph may
name types that do not exist yet and may contain cycles; both are reported, never fatal: every
closure is a finite set computed by a visited-set walk, and a type on a cycle still gets the
ancestors it reaches.

Closures are cached per type. A type's closure depends only on the types it reaches, so a change
to ``X`` invalidates exactly ``X`` and its descendants (the types that reach ``X``), which the
``children`` index finds without scanning the graph.

A closure is built from its parents' closures (each computed once and cached), not by walking the
whole graph above the type: a chain of ``n`` types costs ``n`` steps to close however it was
registered, where walking from every type cost ``n**2``, and re-closing the descendants after
every registration of a chain written child-first cost ``n**3``. Only a type on a cycle is closed
by a walk, which finds the cycle's shortest path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, KeysView
from dataclasses import dataclass

from controller.domain.models import ResourceTypeObject
from controller.domain.multiindex import MultiIndex


@dataclass(frozen=True, slots=True)
class Closure:
    """What one type reaches through ``parentTypes``."""

    ancestors: frozenset[str]
    """Registered types reached, the type itself excluded (even when it is on a cycle)."""
    cycle: tuple[str, ...]
    """The shortest path from the type back to itself, both ends included; empty if none."""
    unknown_parents: tuple[str, ...]
    """Names reached that are not registered ResourceTypes, sorted."""
    stands_for: frozenset[str]
    """The ancestors and the type itself: what a resource of the type can fill slots for."""


def _closure_of(name: str, types: dict[str, ResourceTypeObject]) -> tuple[Closure, int]:
    """Breadth-first walk up ``parentTypes`` from ``name``; also the number of links followed.

    Breadth-first with parents visited in sorted order makes the reported cycle the shortest one,
    and the same one whatever order the types were registered in.
    """
    steps = 0
    seen = {name}
    reached_from: dict[str, str] = {}
    closes_cycle = ""
    queue = deque([name])
    while queue:
        node = queue.popleft()
        obj = types.get(node)
        if obj is None:
            continue
        steps += len(obj.spec.parent_types)
        for parent in sorted(set(obj.spec.parent_types)):
            if parent == name and not closes_cycle:
                closes_cycle = node
            if parent not in seen:
                seen.add(parent)
                reached_from[parent] = node
                queue.append(parent)
    seen.discard(name)
    ancestors = frozenset(n for n in seen if n in types)
    closure = Closure(
        ancestors=ancestors,
        cycle=_path_back(name, closes_cycle, reached_from) if closes_cycle else (),
        unknown_parents=tuple(sorted(seen - ancestors)),
        stands_for=ancestors | {name},
    )
    return closure, steps


def _path_back(name: str, last: str, reached_from: dict[str, str]) -> tuple[str, ...]:
    """The cycle ``name -> ... -> last -> name`` rebuilt from the walk's predecessor links."""
    path = [name, last]
    while path[-1] != name:
        path.append(reached_from[path[-1]])
    return tuple(reversed(path))


class TypeGraph:
    """The registered ResourceTypes, with cached closures and a parent -> children index."""

    __slots__ = ("_children", "_closures", "_types", "steps")

    def __init__(self) -> None:
        self._types: dict[str, ResourceTypeObject] = {}
        self._children: MultiIndex[str, str] = MultiIndex()
        """Parent name (registered or not) -> registered types that list it in parentTypes."""
        self._closures: dict[str, Closure] = {}
        self.steps = 0
        """``parentTypes`` links followed to compute closures so far: the work closures cost,
        counted for tests and benchmarks."""

    def __contains__(self, name: object) -> bool:
        return name in self._types

    @property
    def names(self) -> KeysView[str]:
        """The registered types' names, as a live view (``in`` it costs no Python call)."""
        return self._types.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._types)

    def get(self, name: str) -> ResourceTypeObject | None:
        return self._types.get(name)

    def upsert(self, obj: ResourceTypeObject) -> None:
        name = obj.meta.name
        self._unlink(name)
        self._types[name] = obj
        for parent in obj.spec.parent_types:
            self._children.add(parent, name)
        self._invalidate(name)

    def delete(self, name: str) -> None:
        self._unlink(name)
        self._types.pop(name, None)
        self._invalidate(name)

    def _unlink(self, name: str) -> None:
        old = self._types.get(name)
        if old is not None:
            for parent in old.spec.parent_types:
                self._children.discard(parent, name)

    def _invalidate(self, name: str) -> None:
        self._closures.pop(name, None)
        for descendant in self.descendants(name):
            self._closures.pop(descendant, None)

    def descendants(self, name: str) -> set[str]:
        """Registered types whose closure reaches ``name`` (``name`` itself only via a cycle)."""
        found: set[str] = set()
        queue = deque([name])
        while queue:
            for child in self._children.get(queue.popleft()):
                if child not in found:
                    found.add(child)
                    queue.append(child)
        return found

    def closure(self, name: str) -> Closure:
        """The closure of ``name``; an unregistered name reaches nothing."""
        cached = self._closures.get(name)
        if cached is None:
            self._close(name)
            cached = self._closures[name]
        return cached

    def _close(self, name: str) -> None:
        """Cache the closure of ``name`` and of every type above it not cached yet, parents
        first (a depth-first walk up, one parent at a time, with an explicit stack)."""
        types, closures = self._types, self._closures
        path = [name]
        on_path = {name}
        while path:
            node = path[-1]
            obj = types.get(node)
            pending = (
                None
                if obj is None
                else next(
                    (p for p in obj.spec.parent_types if p in types and p not in closures), None
                )
            )
            if pending is not None and pending not in on_path:
                path.append(pending)
                on_path.add(pending)
                continue
            # Every registered parent is closed, or one is below on the path: ``node`` is on a
            # cycle, and a walk finds the cycle's shortest path.
            closures[node] = self._walk(node) if pending is not None else self._combine(node)
            path.pop()
            on_path.discard(node)

    def _walk(self, name: str) -> Closure:
        closure, steps = _closure_of(name, self._types)
        self.steps += steps
        return closure

    def _combine(self, name: str) -> Closure:
        """The closure of ``name`` from its parents' (all cached), or by a walk if it is on a
        cycle."""
        obj = self._types.get(name)
        if obj is None:
            return self._walk(name)
        ancestors: set[str] = set()
        unknown: set[str] = set()
        parents = obj.spec.parent_types
        self.steps += len(parents)
        types, closures = self._types, self._closures
        for parent in parents:
            if parent not in types:
                unknown.add(parent)
            else:  # closed by now
                above = closures[parent]
                ancestors |= above.stands_for
                unknown.update(above.unknown_parents)
        if name in ancestors:
            return self._walk(name)
        frozen = frozenset(ancestors)
        return Closure(
            ancestors=frozen,
            cycle=(),
            unknown_parents=tuple(sorted(unknown)),
            stands_for=frozen | {name},
        )

    def stands_for(self, type_name: str) -> frozenset[str]:
        """The types a resource of ``type_name`` can fill slots for: itself and its ancestors
        (nothing if it is not registered)."""
        if type_name not in self._types:
            return frozenset()
        cached = self._closures.get(type_name)
        return (self.closure(type_name) if cached is None else cached).stands_for

    def compatible(self, type_name: str, wanted: str) -> bool:
        """Whether a resource of ``type_name`` can fill a slot asking for ``wanted``."""
        return wanted in self.stands_for(type_name)

    def incompatibility(self, type_name: str, wanted: str) -> str:
        """Why a resource of ``type_name`` cannot fill a slot asking for ``wanted``; "" if it can.

        The caller checks that ``wanted`` is registered: that is a fault of the slot (or tag), not
        of any one resource, and is reported once, not per candidate.

        The reason names both types and the rule, never ``type_name``'s ancestors: it then changes
        only when compatibility does, so a change to a type's parents reaches only the agents that
        ask for a type it gains or loses (the type's own status lists its ancestors and cycle).
        """
        if type_name not in self._types:
            return f"type {type_name!r} is not a registered ResourceType"
        if self.compatible(type_name, wanted):
            return ""
        return (
            f"type {type_name!r} is neither {wanted!r} nor lists {wanted!r} in its parentTypes, "
            "directly or through its parents"
        )
