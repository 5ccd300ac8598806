"""Typed names for what the controller reconciles: the kinds, object references and requests."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Kind(StrEnum):
    """The Bindery kinds; the value is the short label used in logs and metrics."""

    TYPE = "type"
    RESOURCE = "resource"
    TOOL = "tool"
    AGENT = "agent"
    GRANT = "grant"

    @property
    def kind_name(self) -> str:
        """The API kind, as in ``kind:`` of a manifest."""
        return _KIND_NAMES[self]

    @property
    def plural(self) -> str:
        return _PLURALS[self]

    @property
    def namespaced(self) -> bool:
        return self is not Kind.TYPE


_KIND_NAMES = {
    Kind.TYPE: "ResourceType",
    Kind.RESOURCE: "Resource",
    Kind.TOOL: "Tool",
    Kind.AGENT: "AgentSpec",
    Kind.GRANT: "ResourceGrant",
}
_PLURALS = {
    Kind.TYPE: "resourcetypes",
    Kind.RESOURCE: "resources",
    Kind.TOOL: "tools",
    Kind.AGENT: "agentspecs",
    Kind.GRANT: "resourcegrants",
}


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """A reference to one object: its namespace (empty for cluster-scoped kinds) and name."""

    namespace: str
    name: str

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for a cluster-scoped object (the registry's keys)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return self.key

    @classmethod
    def parse(cls, key: str) -> Ref:
        """The reference a :attr:`key` names."""
        namespace, _, name = key.rpartition("/")
        return cls(namespace, name)

    @classmethod
    def of(cls, body: dict[str, Any]) -> Ref:
        """The reference of an object body."""
        md = body.get("metadata") or {}
        return cls(md.get("namespace") or "", md.get("name") or "")


@dataclass(frozen=True, slots=True, order=True)
class Request:
    """One unit of work for the reconcile workers: reconcile this object of this kind."""

    kind: Kind
    ref: Ref

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.ref.key}"

    @classmethod
    def agent(cls, key: str) -> Request:
        return cls(Kind.AGENT, Ref.parse(key))
