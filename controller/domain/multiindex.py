"""The building blocks of the registry's indexes: a dict of sets (every reverse index), and
objects by key that file themselves in reverse indexes."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, KeysView, Set
from typing import Any, Generic, TypeVar

from controller.domain.models import AgentObject, ToolObject

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


class MultiIndex(Generic[K, V]):
    """Maps a key to the set of values filed under it.

    Most keys in the registry's indexes hold exactly one value (the Resource with a URI, the
    agent linking a Resource), and a one-element set costs some 200 bytes, so a lone value is
    stored bare and becomes a set only when a second one arrives. Values are hashable, so a
    stored ``set`` can only be the container. A key is dropped as soon as it holds nothing: an
    index's size follows the live objects, not their history.
    """

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[K, V | set[V]] = {}

    def add(self, key: K, value: V) -> None:
        if key not in self._values:
            self._values[key] = value
            return
        stored = self._values[key]
        if isinstance(stored, set):
            stored.add(value)
        elif stored != value:
            self._values[key] = {stored, value}

    def discard(self, key: K, value: V) -> None:
        if key not in self._values:
            return
        stored = self._values[key]
        if not isinstance(stored, set):
            if stored == value:
                del self._values[key]
            return
        stored.discard(value)
        if len(stored) == 1:
            self._values[key] = stored.pop()

    def get(self, key: K) -> Set[V]:
        """The values under ``key`` (possibly a live view: copy it before changing the index)."""
        if key not in self._values:
            return frozenset()
        stored = self._values[key]
        return stored if isinstance(stored, set) else frozenset((stored,))

    def count(self, key: K) -> int:
        return len(self.get(key))

    def keys(self) -> KeysView[K]:
        """The keys holding something, as a live view."""
        return self._values.keys()


Filer = Callable[[MultiIndex[Any, str], Any, str], None]
"""``MultiIndex.add`` or ``MultiIndex.discard``: one walk over an object files or unfiles it."""


Obj = TypeVar("Obj", bound=AgentObject | ToolObject)


class FiledObjects(ABC, Generic[Obj]):
    """Objects by key, each filed in the reverse indexes of what it reads (refiled when its spec
    changes, unfiled when it goes)."""

    __slots__ = ("_objects",)

    def __init__(self) -> None:
        self._objects: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        return self._objects.get(key)

    def __getitem__(self, key: str) -> Obj:
        return self._objects[key]

    def put(self, obj: Obj) -> bool:
        """Keep ``obj`` under its key, filed by what it reads; whether its spec changed."""
        key = obj.meta.key
        old = self._objects.get(key)
        self._objects[key] = obj
        if old is not None and old.spec == obj.spec:
            return False
        if old is not None:
            self._file(key, old, MultiIndex.discard)
        self._file(key, obj, MultiIndex.add)
        return True

    def remove(self, key: str) -> Obj | None:
        old = self._objects.pop(key, None)
        if old is not None:
            self._file(key, old, MultiIndex.discard)
        return old

    @abstractmethod
    def _file(self, key: str, obj: Obj, op: Filer) -> None:
        """Add the object to (or remove it from) the indexes, with ``MultiIndex.add`` or
        ``MultiIndex.discard``."""
