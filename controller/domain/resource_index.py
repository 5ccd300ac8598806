"""The registered Resources, by key and by the uid, ``(namespace, URI)`` and type they carry."""

from __future__ import annotations

from collections.abc import Set

from controller.domain.models import ResourceObject
from controller.domain.multiindex import MultiIndex


class ResourceIndex:
    """Resources by key, with the indexes resolution and change impact look them up by."""

    __slots__ = ("_by_type", "_by_uid", "_by_uri", "_objects")

    def __init__(self) -> None:
        self._objects: dict[str, ResourceObject] = {}
        self._by_uid: dict[str, str] = {}
        self._by_uri: MultiIndex[tuple[str, str], str] = MultiIndex()
        """``(namespace, URI)`` -> the Resources registering it (more than one is an error)."""
        self._by_type: MultiIndex[str, str] = MultiIndex()
        """Type name -> the Resources of that type."""

    def get(self, key: str) -> ResourceObject | None:
        return self._objects.get(key)

    def __getitem__(self, key: str) -> ResourceObject:
        return self._objects[key]

    def by_uid(self, uid: str) -> ResourceObject | None:
        key = self._by_uid.get(uid)
        return None if key is None else self._objects[key]

    def with_uri(self, namespace: str, uri: str) -> Set[str]:
        """Keys of the Resources in ``namespace`` whose URI is byte-for-byte ``uri``."""
        return self._by_uri.get((namespace, uri))

    def of_type(self, type_name: str) -> Set[str]:
        """Keys of the Resources whose ``spec.type`` is the type (not its subtypes)."""
        return self._by_type.get(type_name)

    def put(self, obj: ResourceObject) -> ResourceObject | None:
        """Keep ``obj`` under its key and return the object it replaces; the indexes are not
        touched (see :meth:`file` and :meth:`unfile`)."""
        key = obj.meta.key
        old = self._objects.get(key)
        self._objects[key] = obj
        return old

    def remove(self, key: str) -> None:
        del self._objects[key]

    def file(self, obj: ResourceObject) -> None:
        meta, key = obj.meta, obj.meta.key
        if meta.uid:
            self._by_uid[meta.uid] = key
        self._by_uri.add((meta.namespace, obj.spec.uri), key)
        self._by_type.add(obj.spec.type, key)

    def unfile(self, obj: ResourceObject) -> None:
        meta, key = obj.meta, obj.meta.key
        if self._by_uid.get(meta.uid) == key:
            del self._by_uid[meta.uid]
        self._by_uri.discard((meta.namespace, obj.spec.uri), key)
        self._by_type.discard(obj.spec.type, key)
