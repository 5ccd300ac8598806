"""A change to a ResourceType applied to the type graph, and which agents, Tools, Resources and
types may see it: found from the indexes and from what each resolution read of the graph, never
by resolving every agent again."""

from __future__ import annotations

from controller.domain.affected import Affected
from controller.domain.agent_index import AgentIndex
from controller.domain.models import ResourceTypeObject, ResourceTypeSpec
from controller.domain.resource_index import ResourceIndex
from controller.domain.tool_index import ToolIndex
from controller.domain.type_reads import TypeReadIndex
from controller.domain.types import TypeGraph


def _parents(spec: ResourceTypeSpec | None) -> frozenset[str] | None:
    return None if spec is None else frozenset(spec.parent_types)


def _schemes(spec: ResourceTypeSpec | None) -> frozenset[str] | None:
    return None if spec is None else frozenset(spec.uri_schemes)


class TypeChanges:
    """Applies ResourceType changes to the registry's type graph and reads its other indexes
    (it changes none of them)."""

    __slots__ = ("_agents", "_graph", "_reads", "_resources", "_tools")

    def __init__(
        self,
        graph: TypeGraph,
        resources: ResourceIndex,
        tools: ToolIndex,
        agents: AgentIndex,
        reads: TypeReadIndex,
    ) -> None:
        self._graph = graph
        self._resources = resources
        self._tools = tools
        self._agents = agents
        self._reads = reads

    def apply(
        self, name: str, old: ResourceTypeObject | None, new: ResourceTypeObject | None
    ) -> Affected:
        """Apply a change to ResourceType ``name`` (``None``: absent) and say who may see it.

        * Its URI schemes changed: its Resources' validity changed.
        * Its parents changed: the ancestors of it and of every type reaching it may have
          changed. A check "is T compatible with S" changes only for ``S`` among the ancestors
          gained or lost, so an agent is affected when it checked a resource of type ``T``
          against such an ``S`` (no message prints ``T``'s ancestors); a Tool, when a static
          slot asking for such an ``S`` names a resource of type ``T``, and then so are the
          agents using the Tool, whose results include its static slots.
        * It appeared or vanished: besides, every slot and tag asking for it changed validity
          (a Tool's, whatever the slot's binding), and every agent examining a resource of a
          type it reaches may see a change.
        """
        old_spec = None if old is None else old.spec
        new_spec = None if new is None else new.spec
        reached = set()
        if _parents(old_spec) != _parents(new_spec):
            reached = {name} | self._graph.descendants(name)
        # Closures are compared only for the types something read: listing the types reached
        # costs what the change affects, but closing each of them again would cost that times
        # their depth (a long chain registered child-first: the depth cubed).
        watched = [t for t in reached if self._is_read(t)]
        before = {t: self._graph.closure(t).ancestors for t in watched}
        reach_before = self._graph.stands_for(name)
        if new is None:
            self._graph.delete(name)
        else:
            self._graph.upsert(new)
        registered = (reached | {name}) if new is not None else (reached - {name})
        affected = Affected(types=frozenset(registered))
        if _schemes(old_spec) != _schemes(new_spec):
            # Its Resources' URIs, and the URIs of direct bindings tagged with it, are checked
            # against its schemes.
            affected |= Affected(
                resources=frozenset(self._resources.of_type(name)),
                agents=frozenset(self._agents.tagging(name)),
            )
        appeared_or_vanished = (old is None) != (new is None)
        if appeared_or_vanished:
            affected |= Affected(
                agents=frozenset(self._askers_of(name)),
                tools=frozenset(self._tools.asking(name)),
            )
        for t in watched:
            changed = before[t] ^ self._graph.closure(t).ancestors
            if not (changed or appeared_or_vanished):
                continue
            of_type = self._resources.of_type(t)
            if appeared_or_vanished:
                agents = set(self._reads.examining(t))
                tools = self._tools.static_checkers(of_type, None)
            else:
                agents = self._reads.checking(t, changed)
                tools = self._tools.static_checkers(of_type, changed)
            for tool in tools:  # their users share the Tool's validation of its static slots
                agents |= self._agents.using_tool(tool)
            affected |= Affected(agents=frozenset(agents), tools=frozenset(tools))
        # What the type stands for changed exactly when some reached type's ancestors did: the
        # types reaching it gain or lose only through it.
        if reached and (appeared_or_vanished or reach_before != self._graph.stands_for(name)):
            affected |= Affected(agents=frozenset(self._reads.unknown))
        return affected

    def _is_read(self, type_name: str) -> bool:
        """Whether an agent's last resolution examined a resource of the type, or a Tool's
        static slot names a Resource of it: only then can a change of its ancestors be seen."""
        return bool(self._reads.examining(type_name)) or self._tools.name_any(
            self._resources.of_type(type_name)
        )

    def _askers_of(self, type_name: str) -> set[str]:
        """Agents with a slot (through a Tool they use) or a tag asking for the type."""
        agents = set(self._agents.tagging(type_name))
        for key in self._tools.asking(type_name):
            agents |= self._agents.using_tool(key)
        return agents
