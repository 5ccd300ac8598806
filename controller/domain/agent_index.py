"""The registered agents, by key and by every input their resolution reads: the Tools they name,
their direct bindings' URIs and tags, and their parameter values (the Resources their selectors
select are kept by :class:`~controller.domain.selections.Selections`)."""

from __future__ import annotations

from collections.abc import Set

from controller.domain.models import AgentObject, ResourceObject
from controller.domain.multiindex import FiledObjects, Filer, MultiIndex


class AgentIndex(FiledObjects[AgentObject]):
    """Agents by key, with the reverse indexes from what they read back to them."""

    __slots__ = ("_by_local_param", "_by_param", "_by_tag", "_by_tool", "_by_uri")

    def __init__(self) -> None:
        super().__init__()
        self._by_tool: MultiIndex[str, str] = MultiIndex()
        """Tool key -> agents naming it in spec.tools (registered or not)."""
        self._by_uri: MultiIndex[tuple[str, str], str] = MultiIndex()
        """``(namespace, URI)`` of a direct binding -> agents with it."""
        self._by_tag: MultiIndex[str, str] = MultiIndex()
        """Direct-binding tag -> agents using it."""
        self._by_param: MultiIndex[str, str] = MultiIndex()
        """Parameter value -> agents passing it (for values naming a Resource anywhere: a
        ``namespace/name`` or a uid)."""
        self._by_local_param: MultiIndex[tuple[str, str], str] = MultiIndex()
        """``(agent namespace, parameter value)`` -> agents passing it (for values naming a
        Resource in the agent's namespace: a name or a URI)."""

    def _file(self, key: str, obj: AgentObject, op: Filer) -> None:
        """Add the agent to (or remove it from) the indexes of what its resolution reads."""
        namespace = obj.meta.namespace
        for use in obj.spec.tools:
            op(self._by_tool, f"{namespace}/{use.name}", key)
            for value in use.params.values():
                op(self._by_param, value, key)
                op(self._by_local_param, (namespace, value), key)
        for binding in obj.spec.resources:
            op(self._by_uri, (namespace, binding.uri), key)
            op(self._by_tag, binding.tag, key)

    def using_tool(self, tool: str) -> Set[str]:
        """Agents naming the Tool in spec.tools."""
        return self._by_tool.get(tool)

    def tagging(self, type_name: str) -> Set[str]:
        """Agents with a direct binding tagged with the type."""
        return self._by_tag.get(type_name)

    def naming(self, obj: ResourceObject) -> set[str]:
        """Agents that name the Resource themselves: by a direct binding's URI, or by a
        parameter value (its name, namespace/name, uid or URI)."""
        meta, uri = obj.meta, obj.spec.uri
        agents = set(self._by_uri.get((meta.namespace, uri)))
        agents |= self._by_param.get(meta.key)
        agents |= self._by_param.get(meta.uid) if meta.uid else frozenset()
        agents |= self._by_local_param.get((meta.namespace, meta.name))
        agents |= self._by_local_param.get((meta.namespace, uri))
        return agents
