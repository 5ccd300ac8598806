"""The in-memory registry of ResourceTypes, Resources, Tools and agents, and what a change affects.

The reconciler feeds every observed object into the registry and asks it two things: the
resolution of an agent (or the validation of a Tool, a Resource, a type), and, after each change,
which objects must be reconciled again (:class:`Affected`). Both are answered from indexes, so
the cost of a change follows what depends on it, never the size of the cluster:

* Resources are indexed by key, uid, ``(namespace, URI)`` and type
  (:class:`~controller.domain.resource_index.ResourceIndex`).
* Every input an agent's resolution reads is indexed back to the agent: the Tools it names, its
  direct bindings' URIs and tags, its parameter values
  (:class:`~controller.domain.agent_index.AgentIndex`), and the Resources its selector selects
  (:class:`~controller.domain.selections.Selections`: kept as links in both directions, updated
  when either side changes).
* Tools are indexed by the types their slots ask for and the Resources their static slots name
  (:class:`~controller.domain.tool_index.ToolIndex`).
* ResourceGrants are kept by namespace, with the Namespaces' labels, and every agent and Tool by
  the other namespaces whose grants its last resolution consulted
  (:class:`~controller.domain.grant_index.GrantIndex`): a grant's change re-resolves those.

The registry composes these indexes and owns what crosses them: which objects a change affects.
Agents' resolutions are computed on demand and not kept: they are large (about 30 kB for an agent
with twenty slots), the reconciler keeps what it writes, and one costs well under a millisecond.
What is kept is small or shared by many agents: type closures, Tool validations (each dropped
when a change affects it), and, per agent, which type checks its last resolution made (see
:class:`~controller.domain.type_reads.TypeReadIndex`), so that a type change re-resolves only the
agents it can affect.

Invariant: every key an :class:`Affected` lists names an object that is still registered (a
deleted object is the caller's to clean up, not to reconcile).
"""

from __future__ import annotations

from collections.abc import Set

from controller.domain.affected import Affected
from controller.domain.agent_index import AgentIndex
from controller.domain.grant_index import GrantIndex
from controller.domain.grants import GrantUse, ResourceGrantObject, Target
from controller.domain.models import (
    AgentObject,
    RegisteredObject,
    ResourceObject,
    ResourceTypeObject,
    ToolObject,
)
from controller.domain.resolve import resolve_agent
from controller.domain.resource_index import ResourceIndex
from controller.domain.resource_validity import resource_errors
from controller.domain.results import AgentResolution, Problem, ToolValidation, TypeClosure
from controller.domain.selections import Selections
from controller.domain.slots import checked_tool_slots
from controller.domain.tool_index import ToolIndex
from controller.domain.type_changes import TypeChanges
from controller.domain.type_reads import TypeReadIndex
from controller.domain.types import TypeGraph

__all__ = ["Affected", "Registry"]


class Registry:
    """Every object the controller has observed, indexed for resolution and for change impact."""

    def __init__(self) -> None:
        self._types = TypeGraph()
        self._resources = ResourceIndex()
        self._tools = ToolIndex()
        self._agents = AgentIndex()
        self._selections = Selections()
        self._reads = TypeReadIndex()
        self._grants = GrantIndex()
        self._type_changes = TypeChanges(
            self._types, self._resources, self._tools, self._agents, self._reads
        )
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
        return self._resources.by_uid(uid)

    def resources_with_uri(self, namespace: str, uri: str) -> list[ResourceObject]:
        """The Resources in ``namespace`` whose URI is byte-for-byte ``uri``, by name."""
        keys = self._resources.with_uri(namespace, uri)
        return [self._resources[key] for key in sorted(keys)]

    def selected_resources(self, agent_key: str) -> list[ResourceObject]:
        """The Resources an agent's ``resourceSelector`` selects, by key."""
        return [self._resources[key] for key in sorted(self._selections.selected(agent_key))]

    def resolve(self, agent_key: str) -> AgentResolution:
        """The agent's resolution, computed afresh. KeyError if unknown."""
        resolution, reads, reach = resolve_agent(self._agents[agent_key], self)
        self._reads.record(agent_key, reads)
        self._grants.record_agent(agent_key, reach)
        return resolution

    def validate_tool(self, tool_key: str) -> ToolValidation:
        """The Tool's static slots checked on their own, cached. KeyError if unknown."""
        validation = self._validations.get(tool_key)
        if validation is None:
            validation, reach = checked_tool_slots(self._tools[tool_key], self)
            self._validations[tool_key] = validation
            self._grants.record_tool(tool_key, reach)
        return validation

    def grant(self, key: str) -> ResourceGrantObject | None:
        """The ResourceGrant ``namespace/name``, if registered."""
        return self._grants.grant(key)

    def grant_for(self, referrer: str, target: Target, use: GrantUse) -> ResourceGrantObject | None:
        return self._grants.grant_for(referrer, target, use)

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

    def upsert(self, obj: RegisteredObject | ResourceGrantObject) -> Affected:
        """Add or replace an object of any of the five kinds."""
        match obj:
            case ResourceTypeObject():
                return self.upsert_type(obj)
            case ResourceObject():
                return self.upsert_resource(obj)
            case ToolObject():
                return self.upsert_tool(obj)
            case AgentObject():
                return self.upsert_agent(obj)
            case ResourceGrantObject():
                return self.upsert_grant(obj)
        raise TypeError(f"not a registered kind: {type(obj).__name__}")

    def upsert_type(self, obj: ResourceTypeObject) -> Affected:
        old = self._types.get(obj.meta.name)
        if old is not None and old.spec == obj.spec:
            self._types.upsert(obj)
            return Affected()
        return self._invalidate(self._type_changes.apply(obj.meta.name, old, obj))

    def delete_type(self, name: str) -> Affected:
        old = self._types.get(name)
        return (
            Affected()
            if old is None
            else self._invalidate(self._type_changes.apply(name, old, None))
        )

    # -- Resources -----------------------------------------------------------------------------

    def upsert_resource(self, obj: ResourceObject) -> Affected:
        key = obj.meta.key
        old = self._resources.put(obj)
        if old is not None and (old.spec, old.meta.labels, old.meta.uid) == (
            obj.spec,
            obj.meta.labels,
            obj.meta.uid,
        ):
            return Affected()
        before = Affected()
        if old is not None:
            before = self._dependents_of(old) | self._same_uri(old)
            self._unindex_resource(old)
        self._index_resource(obj)
        after = self._dependents_of(obj) | self._same_uri(obj)
        return self._invalidate(before | after | Affected(resources=frozenset({key})))

    def delete_resource(self, namespace: str, name: str) -> Affected:
        old = self._resources.get(f"{namespace}/{name}")
        if old is None:
            return Affected()
        affected = self._dependents_of(old)
        self._unindex_resource(old)
        self._resources.remove(old.meta.key)
        return self._invalidate(affected | self._same_uri(old))

    def _same_uri(self, obj: ResourceObject) -> Affected:
        """The other Resources registering ``obj``'s URI in its namespace (as indexed now): each
        reports the URI registered twice, so they change when ``obj`` comes or goes."""
        peers = self._resources.with_uri(obj.meta.namespace, obj.spec.uri)
        return Affected(resources=frozenset(peers - {obj.meta.key}))

    def _index_resource(self, obj: ResourceObject) -> None:
        self._resources.file(obj)
        self._selections.add_resource(obj.meta.namespace, obj.meta.key, obj.meta.labels)

    def _unindex_resource(self, obj: ResourceObject) -> None:
        self._resources.unfile(obj)
        self._selections.discard_resource(obj.meta.key)

    def _dependents_of(self, obj: ResourceObject) -> Affected:
        """Agents and Tools whose results read the Resource (as indexed now).

        An agent reads a Resource when it is a direct binding's URI, when its selector selects
        it, when a parameter value names it (by name, namespace/name, uid or URI), or when a Tool
        it uses names it in a static slot; that Tool reads it too.
        """
        agents = self._agents.naming(obj)
        agents |= self._selections.selecting(obj.meta.key)
        static = self._tools.naming(obj.meta.key)
        agents.update(*(self._agents.using_tool(tool) for tool in static))
        return Affected(agents=frozenset(agents), tools=frozenset(static))

    # -- Tools ---------------------------------------------------------------------------------

    def upsert_tool(self, obj: ToolObject) -> Affected:
        key = obj.meta.key
        if not self._tools.put(obj):
            return Affected()
        users = frozenset(self._agents.using_tool(key))
        return self._invalidate(Affected(agents=users, tools=frozenset({key})))

    def delete_tool(self, namespace: str, name: str) -> Affected:
        key = f"{namespace}/{name}"
        if self._tools.remove(key) is None:
            return Affected()
        self._validations.pop(key, None)
        self._grants.drop_tool(key)
        return self._invalidate(Affected(agents=frozenset(self._agents.using_tool(key))))

    # -- agents --------------------------------------------------------------------------------

    def upsert_agent(self, obj: AgentObject) -> Affected:
        key = obj.meta.key
        if not self._agents.put(obj):
            return Affected()
        self._selections.discard_agent(key)
        self._selections.add_agent(obj.meta.namespace, key, obj.spec.resource_selector)
        return self._invalidate(Affected(agents=frozenset({key})))

    def delete_agent(self, namespace: str, name: str) -> Affected:
        key = f"{namespace}/{name}"
        if self._agents.remove(key) is not None:
            self._selections.discard_agent(key)
            self._reads.drop(key)
            self._grants.drop_agent(key)
        return Affected()

    # -- ResourceGrants and Namespaces ---------------------------------------------------------

    def upsert_grant(self, obj: ResourceGrantObject) -> Affected:
        """Add or replace a grant: the referrers that consulted its namespace's grants (those it
        lets bind, those refused there) are re-resolved."""
        if not self._grants.put(obj):
            return Affected()
        return self._invalidate(self._reaching(obj.meta.namespace))

    def delete_grant(self, namespace: str, name: str) -> Affected:
        """Revoke a grant: the referrers that consulted its namespace's grants are re-resolved
        (those it let bind lose the Resource)."""
        if not self._grants.remove(namespace, name):
            return Affected()
        return self._invalidate(self._reaching(namespace))

    def upsert_namespace(self, name: str, labels: dict[str, str]) -> Affected:
        """A Namespace's labels (which grants' ``namespaceSelector`` reads): when they change, its
        referrers that consulted any grant are re-resolved."""
        if not self._grants.set_labels(name, labels):
            return Affected()
        return self._invalidate(self._reaching_from(name))

    def delete_namespace(self, name: str) -> Affected:
        if not self._grants.set_labels(name, None):
            return Affected()
        return self._invalidate(self._reaching_from(name))

    def _reaching(self, namespace: str) -> Affected:
        agents, tools = self._grants.reaching(namespace)
        return self._referrers(agents, tools)

    def _reaching_from(self, namespace: str) -> Affected:
        agents, tools = self._grants.reaching_from(namespace)
        return self._referrers(agents, tools)

    def _referrers(self, agents: Set[str], tools: Set[str]) -> Affected:
        """The agents and Tools given, and the agents using those Tools (a static slot's result
        is the Tool's)."""
        users = set(agents)
        users.update(*(self._agents.using_tool(tool) for tool in tools))
        return Affected(agents=frozenset(users), tools=frozenset(tools))

    # -- caches --------------------------------------------------------------------------------

    def _invalidate(self, affected: Affected) -> Affected:
        """Forget what ``affected`` makes stale (what its agents' resolutions read, its Tools'
        validations), and pass it on."""
        for agent in affected.agents:
            self._reads.forget(agent)
        for tool in affected.tools:
            self._validations.pop(tool, None)
        return affected
