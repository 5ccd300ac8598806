"""What resolution produces for one agent: every direct binding and every tool slot, with state.

These are the shapes the reconciler writes into ``status`` and into the bindings document the
session reads. They are plain, frozen, JSON-ready values.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar, Self

from bindery_session.wire import Access, BindingMode, BindingState
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

_new = object.__new__
# What model_construct sets on a new instance, through the setters of pydantic's own slots taken
# once: calling them skips a look-up by name per slot, a tenth of a result's cost.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


class ErrorCause(StrEnum):
    """What it takes to clear an error, which decides how status reports it (kstatus).

    The distinction is the one GitOps tools wait on: objects applied together arrive in any
    order, so an error that the rest of the apply clears by itself must read as progress
    (InProgress), and only an error a person must fix may read as a failure (Stalled).
    """

    MISSING = "Missing"
    """An object it names does not exist (yet): creating it clears the error, without a change
    to this object or to any other object's content (a missing Tool, Resource, ResourceType)."""
    CONFLICT = "Conflict"
    """Objects that exist disagree (a type incompatibility, an ambiguity) or a spec says
    something impossible: a person must change this object or another object's content."""


class Problem(str):
    """An error message that also says what clears it: for error lists kept as plain strings
    (a Resource's own errors), so they join, compare and print as the message does."""

    cause: ErrorCause

    def __new__(cls, message: str, cause: ErrorCause) -> Self:
        made = super().__new__(cls, message)
        made.cause = cause
        return made


class ResultModel(BaseModel):
    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    _every_field: ClassVar[set[str]] = set()
    """The names of the model's fields: the fields set of an instance made by :meth:`trusted`
    (shared, as pydantic copies a fields set before changing it, and never changes a frozen
    model's)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._every_field = set(cls.model_fields)

    @classmethod
    def trusted(cls, fields: dict[str, Any]) -> Self:
        """An instance made from values that already have their fields' types, with no
        validation: what :meth:`model_construct` makes, without its per-field handling of aliases
        and defaults (which costs more than validating).

        For resolution, which builds tens of results per agent from values it has checked. Every
        field must be given, by its Python name and in declaration order (the order dumps follow);
        the instance keeps ``fields`` as its ``__dict__``.
        """
        obj = _new(cls)
        _set_dict(obj, fields)
        _set_fields_set(obj, cls._every_field)
        _set_extra(obj, None)
        _set_private(obj, None)
        return obj


class BoundResource(ResultModel):
    """A concrete resource a binding resolved to.

    ``name``/``namespace``/``uid`` are empty for a resource that exists only as an agent's direct
    binding (no registered Resource has its URI).
    """

    uri: str
    type: str
    alias: str = ""
    name: str = ""
    namespace: str = ""
    uid: str = ""
    attributes: dict[str, str] = Field(default_factory=dict)
    """The registered Resource's free-form attributes: delivered to the session, not shown in
    status (status says what is bound; the session needs what it is)."""
    grant: str = ""
    """For a Resource of another namespace, the ResourceGrant (``namespace/name``) that lets it
    be bound; empty for a Resource of the referrer's own namespace."""

    def fields(self, *, attributes: bool = False) -> dict[str, Any]:
        """Its JSON fields, empty ones left out but for ``uri`` and ``type``; ``attributes``
        for the bindings document (whose keys are sorted when rendered), not for status.

        What ``model_dump(mode="json", by_alias=True, exclude_defaults=True, exclude=...)``
        gives, key for key and in order (tests/unit/test_status_fields.py checks it), built
        directly: every status row and every document has one, and a dump costs several times
        the dict.
        """
        out: dict[str, Any] = {"uri": self.uri, "type": self.type}
        if self.alias:
            out["alias"] = self.alias
        if self.name:
            out["name"] = self.name
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.grant:
            out["grant"] = self.grant
        if attributes and self.attributes:
            out["attributes"] = dict(self.attributes)
        return out


class Candidate(ResultModel):
    """One resource considered for a slot, and why it was or was not chosen."""

    uri: str
    type: str
    alias: str = ""
    reason: str


class DirectResult(ResultModel):
    """One entry of ``spec.resources`` after resolution."""

    name: str
    tag: str
    uri: str
    state: BindingState
    resource: BoundResource | None = None
    message: str = ""
    cause: ErrorCause | None = None
    """What clears the error, when ``state`` is ``Error``; ``None`` otherwise."""


class SlotResult(ResultModel):
    """One tool slot after resolution for one agent."""

    tool: str
    slot: str
    mode: BindingMode
    access: Access
    resource_type: str
    required: bool = True
    state: BindingState
    resource: BoundResource | None = None
    message: str = ""
    candidates: list[Candidate] = Field(default_factory=list)
    cause: ErrorCause | None = None
    """What clears the error, when ``state`` is ``Error``; ``None`` otherwise."""


class AgentResolution(ResultModel):
    """Everything resolved for one agent; deterministic for a given registry and agent."""

    agent: str
    """``namespace/name`` of the agent."""
    direct: list[DirectResult] = Field(default_factory=list)
    slots: list[SlotResult] = Field(default_factory=list)
    missing_tools: list[str] = Field(default_factory=list)
    """Tools named in ``spec.tools`` that are not registered in the agent's namespace."""

    @property
    def errors(self) -> list[str]:
        """Every error message, direct bindings first, then slots, then missing tools."""
        out = [d.message for d in self.direct if d.state is BindingState.ERROR]
        out += [s.message for s in self.slots if s.state is BindingState.ERROR]
        out += [
            f"agent {self.agent}: tool {t!r} is not registered in namespace "
            f"{self.agent.split('/', 1)[0]!r}; create the Tool or remove it from spec.tools"
            for t in self.missing_tools
        ]
        return out

    @property
    def conflicts(self) -> list[str]:
        """The errors a person must fix (see :class:`ErrorCause`), in the order of ``errors``.

        Every error not listed here waits for an object to be created; missing tools are such
        errors. An error result without a cause counts as a conflict: reporting a failure that
        the next apply would clear is the lesser harm than waiting forever on one it would not.
        """
        out = [
            d.message
            for d in self.direct
            if d.state is BindingState.ERROR and d.cause is not ErrorCause.MISSING
        ]
        out += [
            s.message
            for s in self.slots
            if s.state is BindingState.ERROR and s.cause is not ErrorCause.MISSING
        ]
        return out

    @property
    def ok(self) -> bool:
        return not self.errors


class ToolValidation(ResultModel):
    """A Tool checked on its own (registration time): are its static slots valid, and does every
    other slot ask for a registered type?"""

    tool: str
    static_slots: list[SlotResult] = Field(default_factory=list)
    unregistered_slots: list[SlotResult] = Field(default_factory=list)
    """The contextual and parameter slots whose ``resourceType`` is not a registered
    ResourceType (no resource can fill them until it is): missing, never a conflict."""

    @property
    def static_valid(self) -> bool:
        return not any(s.state is BindingState.ERROR for s in self.static_slots)

    @property
    def errors(self) -> list[str]:
        return [
            s.message
            for s in [*self.static_slots, *self.unregistered_slots]
            if s.state is BindingState.ERROR
        ]

    @property
    def conflicts(self) -> list[str]:
        """The errors a person must fix (see :meth:`AgentResolution.conflicts`)."""
        return [
            s.message
            for s in self.static_slots
            if s.state is BindingState.ERROR and s.cause is not ErrorCause.MISSING
        ]


class TypeClosure(ResultModel):
    """A ResourceType's resolved ancestors (itself excluded), or the cycle it sits on."""

    name: str
    ancestors: list[str] = Field(default_factory=list)
    cycle: list[str] = Field(default_factory=list)
    unknown_parents: list[str] = Field(default_factory=list)
