"""The registered Tools, by key and by what their slots read: the types they ask for and the
Resources their static slots name."""

from __future__ import annotations

from collections.abc import Set

from controller.domain.models import ToolObject
from controller.domain.multiindex import FiledObjects, Filer, MultiIndex
from controller.domain.slots import static_resource_key


class ToolIndex(FiledObjects[ToolObject]):
    """Tools by key, with the reverse indexes a change to a type or a Resource is looked up in."""

    __slots__ = ("_asking", "_naming")

    def __init__(self) -> None:
        super().__init__()
        self._asking: MultiIndex[str, str] = MultiIndex()
        """Slot resourceType -> Tools with a slot asking for it."""
        self._naming: MultiIndex[str, str] = MultiIndex()
        """Resource key -> Tools whose static slots name it."""

    def _file(self, key: str, obj: ToolObject, op: Filer) -> None:
        """Add the Tool to (or remove it from) the indexes, with ``MultiIndex.add``/``discard``."""
        namespace = obj.meta.namespace
        for slot in obj.spec.resource_slots:
            op(self._asking, slot.resource_type, key)
            if slot.binding == "static" and slot.static_resource:
                op(self._naming, static_resource_key(namespace, slot.static_resource), key)

    def asking(self, type_name: str) -> Set[str]:
        """Tools with a slot (of any binding) asking for the type."""
        return self._asking.get(type_name)

    def naming(self, resource: str) -> Set[str]:
        """Tools whose static slots name the Resource."""
        return self._naming.get(resource)

    def name_any(self, resources: Set[str]) -> bool:
        """Whether a Tool's static slot names one of the Resources."""
        return not self._naming.keys().isdisjoint(resources)

    def static_checkers(self, resources: Set[str], asked: Set[str] | None) -> set[str]:
        """Tools with a static slot naming one of the Resources and asking for one of the types
        ``asked`` (for any type when ``None``): their validation checks the Resource's type."""
        tools: set[str] = set()
        for key in self._naming.keys() & resources:
            for tool in self._naming.get(key):
                obj = self._objects[tool]
                namespace = obj.meta.namespace
                if any(
                    slot.binding == "static"
                    and (asked is None or slot.resource_type in asked)
                    and static_resource_key(namespace, slot.static_resource or "") == key
                    for slot in obj.spec.resource_slots
                ):
                    tools.add(tool)
        return tools
