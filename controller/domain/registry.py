"""The in-memory registry of ResourceTypes, Resources, Tools and agents, and what a change affects.

The reconciler feeds every observed object into the registry and asks it two things: the
resolution of an agent (or the validation of a Tool, a Resource, a type), and, after each change,
which objects must be reconciled again (:class:`Affected`). Both are answered from indexes, so
the cost of a change follows what depends on it, never the size of the cluster:

* Resources are indexed by key, uid, ``(namespace, URI)``, type and labels.
* Every input an agent's resolution reads is indexed back to the agent: the Tools it names, its
  direct bindings' URIs and tags, its parameter values, and the Resources its selector selects
  (kept as links in both directions, updated when either side changes).
* Tools are indexed by the types their slots ask for and the Resources their static slots name.

Agents' resolutions are computed on demand and not kept: they are large (about 30 kB for an agent
with twenty slots), the reconciler keeps what it writes, and one costs well under a millisecond.
What is kept is small or shared by many agents: type closures, Tool validations (each dropped
when a change affects it), and, per agent, which type checks its last resolution made (see
:class:`TypeReads`), so that a type change re-resolves only the agents it can affect.

Invariant: every key an :class:`Affected` lists names an object that is still registered (a
deleted object is the caller's to clean up, not to reconcile).
"""

from __future__ import annotations

from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any

from controller.domain.label_selectors import LabelIndex, SelectorIndex
from controller.domain.models import (
    AgentObject,
    RegisteredObject,
    ResourceObject,
    ResourceTypeObject,
    ResourceTypeSpec,
    ToolObject,
)
from controller.domain.multiindex import MultiIndex
from controller.domain.resolve import (
    TypeReads,
    resolve_agent,
    resource_errors,
    static_resource_key,
    validate_tool_slots,
)
from controller.domain.results import AgentResolution, Problem, ToolValidation, TypeClosure
from controller.domain.types import TypeGraph

_NONE: frozenset[str] = frozenset()

_Filer = Callable[[MultiIndex[Any, str], Any, str], None]
"""``MultiIndex.add`` or ``MultiIndex.discard``: one walk over an object files or unfiles it."""


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


def _parents(spec: ResourceTypeSpec | None) -> frozenset[str] | None:
    return None if spec is None else frozenset(spec.parent_types)


def _schemes(spec: ResourceTypeSpec | None) -> frozenset[str] | None:
    return None if spec is None else frozenset(spec.uri_schemes)


class _TypeReads:
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


class Registry:
    """Every object the controller has observed, indexed for resolution and for change impact."""

    def __init__(self) -> None:
        self._types = TypeGraph()
        self._resources: dict[str, ResourceObject] = {}
        self._tools: dict[str, ToolObject] = {}
        self._agents: dict[str, AgentObject] = {}

        self._by_uid: dict[str, str] = {}
        self._by_uri: MultiIndex[tuple[str, str], str] = MultiIndex()
        self._by_type: MultiIndex[str, str] = MultiIndex()
        self._labels = LabelIndex()

        self._tools_asking: MultiIndex[str, str] = MultiIndex()
        """Slot resourceType -> Tools with a slot asking for it."""
        self._static_users: MultiIndex[str, str] = MultiIndex()
        """Resource key -> Tools whose static slots name it."""

        self._tool_users: MultiIndex[str, str] = MultiIndex()
        """Tool key -> agents naming it in spec.tools (registered or not)."""
        self._uri_users: MultiIndex[tuple[str, str], str] = MultiIndex()
        """``(namespace, URI)`` of a direct binding -> agents with it."""
        self._tag_users: MultiIndex[str, str] = MultiIndex()
        """Direct-binding tag -> agents using it."""
        self._param_users: MultiIndex[str, str] = MultiIndex()
        """Parameter value -> agents passing it (for values naming a Resource anywhere: a
        ``namespace/name`` or a uid)."""
        self._local_param_users: MultiIndex[tuple[str, str], str] = MultiIndex()
        """``(agent namespace, parameter value)`` -> agents passing it (for values naming a
        Resource in the agent's namespace: a name or a URI)."""
        self._selectors = SelectorIndex()
        self._links: MultiIndex[str, str] = MultiIndex()
        """Agent -> the Resources its selector selects."""
        self._linked_by: MultiIndex[str, str] = MultiIndex()
        """Resource key -> the agents whose selectors select it."""

        self._reads = _TypeReads()
        self._validations: dict[str, ToolValidation] = {}
        """Tool key -> its validation, until a change affects it."""

    # -- reads ---------------------------------------------------------------------------------

    @property
    def types(self) -> TypeGraph:
        return self._types

    def agent(self, key: str) -> AgentObject | None:
        return self._agents.get(key)

    def tool(self, key: str) -> ToolObject | None:
        return self._tools.get(key)

    def resource(self, key: str) -> ResourceObject | None:
        return self._resources.get(key)

    def resource_type(self, name: str) -> ResourceTypeObject | None:
        return self._types.get(name)

    def resource_by_uid(self, uid: str) -> ResourceObject | None:
        key = self._by_uid.get(uid)
        return None if key is None else self._resources[key]

    def resources_with_uri(self, namespace: str, uri: str) -> list[ResourceObject]:
        """The Resources in ``namespace`` whose URI is byte-for-byte ``uri``, by name."""
        return [self._resources[key] for key in sorted(self._by_uri.get((namespace, uri)))]

    def selected_resources(self, agent_key: str) -> list[ResourceObject]:
        """The Resources an agent's ``resourceSelector`` selects, by key."""
        return [self._resources[key] for key in sorted(self._links.get(agent_key))]

    def resolve(self, agent_key: str) -> AgentResolution:
        """The agent's resolution, computed afresh. KeyError if unknown."""
        resolution, reads = resolve_agent(self._agents[agent_key], self)
        self._reads.record(agent_key, reads)
        return resolution

    def validate_tool(self, tool_key: str) -> ToolValidation:
        """The Tool's static slots checked on their own, cached. KeyError if unknown."""
        validation = self._validations.get(tool_key)
        if validation is None:
            validation = validate_tool_slots(self._tools[tool_key], self)
            self._validations[tool_key] = validation
        return validation

    def validate_resource(self, resource_key: str) -> list[Problem]:
        """What is wrong with the Resource on its own, including other Resources in its namespace
        registering the same URI. KeyError if unknown."""
        obj = self._resources[resource_key]
        same_uri = self.resources_with_uri(obj.meta.namespace, obj.spec.uri)
        return resource_errors(obj, self._types, same_uri)

    def closure(self, type_name: str) -> TypeClosure:
        """The type's ancestors, the cycle it is on, its unknown parents. KeyError if unknown."""
        if type_name not in self._types:
            raise KeyError(type_name)
        closure = self._types.closure(type_name)
        return TypeClosure(
            name=type_name,
            ancestors=sorted(closure.ancestors),
            cycle=list(closure.cycle),
            unknown_parents=list(closure.unknown_parents),
        )

    # -- ResourceTypes -------------------------------------------------------------------------

    def upsert(self, obj: RegisteredObject) -> Affected:
        """Add or replace an object of any of the four kinds."""
        match obj:
            case ResourceTypeObject():
                return self.upsert_type(obj)
            case ResourceObject():
                return self.upsert_resource(obj)
            case ToolObject():
                return self.upsert_tool(obj)
            case AgentObject():
                return self.upsert_agent(obj)
        raise TypeError(f"not a registered kind: {type(obj).__name__}")

    def upsert_type(self, obj: ResourceTypeObject) -> Affected:
        old = self._types.get(obj.meta.name)
        if old is not None and old.spec == obj.spec:
            self._types.upsert(obj)
            return Affected()
        return self._invalidate(self._retype(obj.meta.name, old, obj))

    def delete_type(self, name: str) -> Affected:
        old = self._types.get(name)
        return Affected() if old is None else self._invalidate(self._retype(name, old, None))

    def _retype(
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
        * It appeared or vanished: besides, every slot and tag asking for it changed validity,
          and every agent examining a resource of a type it reaches may see a change.
        """
        old_spec = None if old is None else old.spec
        new_spec = None if new is None else new.spec
        reached = set()
        if _parents(old_spec) != _parents(new_spec):
            reached = {name} | self._types.descendants(name)
        # Closures are compared only for the types something read: listing the types reached
        # costs what the change affects, but closing each of them again would cost that times
        # their depth (a long chain registered child-first: the depth cubed).
        watched = [t for t in reached if self._is_read(t)]
        before = {t: self._types.closure(t).ancestors for t in watched}
        reach_before = self._types.stands_for(name)
        if new is None:
            self._types.delete(name)
        else:
            self._types.upsert(new)
        registered = (reached | {name}) if new is not None else (reached - {name})
        affected = Affected(types=frozenset(registered))
        if _schemes(old_spec) != _schemes(new_spec):
            # Its Resources' URIs, and the URIs of direct bindings tagged with it, are checked
            # against its schemes.
            affected |= Affected(
                resources=frozenset(self._by_type.get(name)),
                agents=frozenset(self._tag_users.get(name)),
            )
        appeared_or_vanished = (old is None) != (new is None)
        if appeared_or_vanished:
            affected |= Affected(
                agents=frozenset(self._askers_of(name)),
                tools=frozenset(self._static_askers_of(name)),
            )
        for t in watched:
            changed = before[t] ^ self._types.closure(t).ancestors
            if not (changed or appeared_or_vanished):
                continue
            if appeared_or_vanished:
                agents = set(self._reads.examining(t))
                tools = self._static_checkers_of(t, None)
            else:
                agents = self._reads.checking(t, changed)
                tools = self._static_checkers_of(t, changed)
            for tool in tools:  # their users share the Tool's validation of its static slots
                agents |= self._tool_users.get(tool)
            affected |= Affected(agents=frozenset(agents), tools=frozenset(tools))
        # What the type stands for changed exactly when some reached type's ancestors did: the
        # types reaching it gain or lose only through it.
        if reached and (appeared_or_vanished or reach_before != self._types.stands_for(name)):
            affected |= Affected(agents=frozenset(self._reads.unknown))
        return affected

    def _is_read(self, type_name: str) -> bool:
        """Whether an agent's last resolution examined a resource of the type, or a Tool's
        static slot names a Resource of it: only then can a change of its ancestors be seen."""
        return bool(self._reads.examining(type_name)) or not self._static_users.keys().isdisjoint(
            self._by_type.get(type_name)
        )

    def _static_checkers_of(self, type_name: str, asked: Set[str] | None) -> set[str]:
        """Tools with a static slot naming a Resource of the type and asking for one of the
        types ``asked`` (for any type when ``None``): their validation checks the type."""
        tools: set[str] = set()
        for key in self._static_users.keys() & self._by_type.get(type_name):
            for tool in self._static_users.get(key):
                obj = self._tools[tool]
                namespace = obj.meta.namespace
                if any(
                    slot.binding == "static"
                    and (asked is None or slot.resource_type in asked)
                    and static_resource_key(namespace, slot.static_resource or "") == key
                    for slot in obj.spec.resource_slots
                ):
                    tools.add(tool)
        return tools

    def _askers_of(self, type_name: str) -> set[str]:
        """Agents with a slot (through a Tool they use) or a tag asking for the type."""
        agents = set(self._tag_users.get(type_name))
        for key in self._tools_asking.get(type_name):
            agents |= self._tool_users.get(key)
        return agents

    def _static_askers_of(self, type_name: str) -> set[str]:
        """Tools with a static slot asking for the type: their validation depends on it."""
        return {
            key
            for key in self._tools_asking.get(type_name)
            if any(
                s.binding == "static" and s.resource_type == type_name
                for s in self._tools[key].spec.resource_slots
            )
        }

    # -- Resources -----------------------------------------------------------------------------

    def upsert_resource(self, obj: ResourceObject) -> Affected:
        key = obj.meta.key
        old = self._resources.get(key)
        self._resources[key] = obj
        if old is not None and (old.spec, old.meta.labels, old.meta.uid) == (
            obj.spec,
            obj.meta.labels,
            obj.meta.uid,
        ):
            return Affected()
        before = Affected()
        if old is not None:
            before = self._dependents_of(old) | self._same_uri(old)
            self._unindex_resource(key, old)
        self._index_resource(key, obj)
        after = self._dependents_of(obj) | self._same_uri(obj)
        return self._invalidate(before | after | Affected(resources=frozenset({key})))

    def delete_resource(self, namespace: str, name: str) -> Affected:
        old = self._resources.get(f"{namespace}/{name}")
        if old is None:
            return Affected()
        affected = self._dependents_of(old)
        self._unindex_resource(old.meta.key, old)
        del self._resources[old.meta.key]
        return self._invalidate(affected | self._same_uri(old))

    def _same_uri(self, obj: ResourceObject) -> Affected:
        """The other Resources registering ``obj``'s URI in its namespace (as indexed now): each
        reports the URI registered twice, so they change when ``obj`` comes or goes."""
        peers = self._by_uri.get((obj.meta.namespace, obj.spec.uri))
        return Affected(resources=frozenset(peers - {obj.meta.key}))

    def _index_resource(self, key: str, obj: ResourceObject) -> None:
        meta = obj.meta
        if meta.uid:
            self._by_uid[meta.uid] = key
        self._by_uri.add((meta.namespace, obj.spec.uri), key)
        self._by_type.add(obj.spec.type, key)
        self._labels.add(meta.namespace, key, meta.labels)
        for agent in self._selectors.selecting(meta.namespace, meta.labels):
            self._link(agent, key)

    def _unindex_resource(self, key: str, obj: ResourceObject) -> None:
        meta = obj.meta
        if self._by_uid.get(meta.uid) == key:
            del self._by_uid[meta.uid]
        self._by_uri.discard((meta.namespace, obj.spec.uri), key)
        self._by_type.discard(obj.spec.type, key)
        self._labels.discard(key)
        for agent in list(self._linked_by.get(key)):
            self._unlink(agent, key)

    def _dependents_of(self, obj: ResourceObject) -> Affected:
        """Agents and Tools whose results read the Resource (as indexed now).

        An agent reads a Resource when it is a direct binding's URI, when its selector selects
        it, when a parameter value names it (by name, namespace/name, uid or URI), or when a Tool
        it uses names it in a static slot; that Tool reads it too.
        """
        meta, uri = obj.meta, obj.spec.uri
        agents = set(self._uri_users.get((meta.namespace, uri)))
        agents |= self._linked_by.get(meta.key)
        agents |= self._param_users.get(meta.key)
        agents |= self._param_users.get(meta.uid) if meta.uid else _NONE
        agents |= self._local_param_users.get((meta.namespace, meta.name))
        agents |= self._local_param_users.get((meta.namespace, uri))
        static = self._static_users.get(meta.key)
        agents.update(*(self._tool_users.get(tool) for tool in static))
        return Affected(agents=frozenset(agents), tools=frozenset(static))

    # -- Tools ---------------------------------------------------------------------------------

    def upsert_tool(self, obj: ToolObject) -> Affected:
        key = obj.meta.key
        old = self._tools.get(key)
        self._tools[key] = obj
        if old is not None and old.spec == obj.spec:
            return Affected()
        if old is not None:
            self._file_tool(key, old, MultiIndex.discard)
        self._file_tool(key, obj, MultiIndex.add)
        users = frozenset(self._tool_users.get(key))
        return self._invalidate(Affected(agents=users, tools=frozenset({key})))

    def delete_tool(self, namespace: str, name: str) -> Affected:
        old = self._tools.pop(f"{namespace}/{name}", None)
        if old is None:
            return Affected()
        self._file_tool(old.meta.key, old, MultiIndex.discard)
        self._validations.pop(old.meta.key, None)
        return self._invalidate(Affected(agents=frozenset(self._tool_users.get(old.meta.key))))

    def _file_tool(self, key: str, obj: ToolObject, op: _Filer) -> None:
        """Add the Tool to (or remove it from) the indexes, with ``MultiIndex.add``/``discard``."""
        namespace = obj.meta.namespace
        for slot in obj.spec.resource_slots:
            op(self._tools_asking, slot.resource_type, key)
            if slot.binding == "static" and slot.static_resource:
                op(self._static_users, static_resource_key(namespace, slot.static_resource), key)

    # -- agents --------------------------------------------------------------------------------

    def upsert_agent(self, obj: AgentObject) -> Affected:
        key = obj.meta.key
        old = self._agents.get(key)
        self._agents[key] = obj
        if old is not None and old.spec == obj.spec:
            return Affected()
        if old is not None:
            self._unindex_agent(key, old)
        self._index_agent(key, obj)
        return self._invalidate(Affected(agents=frozenset({key})))

    def delete_agent(self, namespace: str, name: str) -> Affected:
        old = self._agents.get(f"{namespace}/{name}")
        if old is not None:
            self._unindex_agent(old.meta.key, old)
            del self._agents[old.meta.key]
            self._reads.drop(old.meta.key)
        return Affected()

    def _index_agent(self, key: str, obj: AgentObject) -> None:
        self._file_agent(key, obj, MultiIndex.add)
        namespace, selector = obj.meta.namespace, obj.spec.resource_selector
        if selector is not None:
            anchor = self._labels.best_anchor(namespace, selector)
            self._selectors.add(namespace, key, selector, anchor)
            for resource in self._labels.select(namespace, selector, anchor):
                self._link(key, resource)

    def _unindex_agent(self, key: str, obj: AgentObject) -> None:
        self._file_agent(key, obj, MultiIndex.discard)
        self._selectors.discard(key)
        for resource in list(self._links.get(key)):
            self._unlink(key, resource)

    def _file_agent(self, key: str, obj: AgentObject, op: _Filer) -> None:
        """Add the agent to (or remove it from) the indexes of what its resolution reads."""
        namespace = obj.meta.namespace
        for use in obj.spec.tools:
            op(self._tool_users, f"{namespace}/{use.name}", key)
            for value in use.params.values():
                op(self._param_users, value, key)
                op(self._local_param_users, (namespace, value), key)
        for binding in obj.spec.resources:
            op(self._uri_users, (namespace, binding.uri), key)
            op(self._tag_users, binding.tag, key)

    def _link(self, agent: str, resource: str) -> None:
        self._links.add(agent, resource)
        self._linked_by.add(resource, agent)

    def _unlink(self, agent: str, resource: str) -> None:
        self._links.discard(agent, resource)
        self._linked_by.discard(resource, agent)

    # -- caches --------------------------------------------------------------------------------

    def _invalidate(self, affected: Affected) -> Affected:
        """Forget what ``affected`` makes stale (what its agents' resolutions read, its Tools'
        validations), and pass it on."""
        for agent in affected.agents:
            self._reads.forget(agent)
        for tool in affected.tools:
            self._validations.pop(tool, None)
        return affected
