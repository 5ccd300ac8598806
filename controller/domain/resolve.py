"""Binding resolution: one agent's direct bindings and tool slots, one Tool's static slots, and
one Resource's own validity.

Everything here is a pure function of the objects it is given and of a read-only
:class:`RegistryView`; the registry owns the indexes that make the view's look-ups cheap and
decides when a result must be recomputed.

Messages follow one shape so that a user reading ``status`` can act on any of them:
``<who>: <what is wrong>. Candidates: <each one considered and why it lost>. Fix: <what to do>.``
Error messages name the agent, tool and slot; notes on healthy slots (``Deferred``) name nothing
the slot result does not already carry, so identical slots can share one result.

A slot's ``candidates`` are the resources its choice was made among: for a contextual slot, the
type-compatible linked resources (each with why it was or was not chosen), or, when none is
compatible, every linked resource with why its type does not fit; for a static or parameter slot,
the one resource its setting names.

Results are built with :meth:`ResultModel.trusted <controller.domain.results.ResultModel.trusted>`
(no validation): every value put in them comes from validated objects or is made here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter, itemgetter
from typing import NamedTuple, Protocol

from controller.domain.models import (
    Access,
    AgentObject,
    BindingMode,
    DirectBinding,
    ResourceObject,
    ResourceSlot,
    ToolObject,
    ToolUse,
)
from controller.domain.results import (
    AgentResolution,
    BindingState,
    BoundResource,
    Candidate,
    DirectResult,
    ErrorCause,
    Problem,
    SlotResult,
    ToolValidation,
)
from controller.domain.types import TypeGraph

_MODES = {mode.value: mode for mode in BindingMode}
_BOUND = BindingState.BOUND
_MISSING = ErrorCause.MISSING
_CONFLICT = ErrorCause.CONFLICT

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)")
"""An RFC 3986 scheme at the start of a URI; matched as written (schemes are not case-folded)."""


class RegistryView(Protocol):
    """The look-ups resolution needs (the registry provides them, from its indexes)."""

    @property
    def types(self) -> TypeGraph: ...

    def resource(self, key: str) -> ResourceObject | None: ...

    def resource_by_uid(self, uid: str) -> ResourceObject | None: ...

    def resources_with_uri(self, namespace: str, uri: str) -> list[ResourceObject]: ...

    def tool(self, key: str) -> ToolObject | None: ...

    def validate_tool(self, tool_key: str) -> ToolValidation:
        """What :func:`validate_tool_slots` says of the Tool, possibly cached."""
        ...

    def selected_resources(self, agent_key: str) -> list[ResourceObject]: ...


def _bound_resource(resource: ResourceObject, alias: str | None = None) -> BoundResource:
    """A registered Resource as bindings report it, with its own alias unless given another."""
    meta, spec = resource.meta, resource.spec
    return BoundResource.trusted(
        {
            "uri": spec.uri,
            "type": spec.type,
            "alias": (spec.alias or "") if alias is None else alias,
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "attributes": dict(spec.attributes),
        }
    )


def static_resource_key(tool_namespace: str, ref: str) -> str:
    """The Resource key a ``staticResource`` names: ``name`` is in the Tool's own namespace."""
    return ref if "/" in ref else f"{tool_namespace}/{ref}"


def _message(
    subject: str, problem: str, fix: str, candidates: Sequence[Candidate] | None = None
) -> str:
    """``<subject>: <problem>. [Candidates: ... .] Fix: <fix>.`` (candidates only for slots)."""
    if candidates is None:
        return f"{subject}: {problem}. Fix: {fix}."
    considered = "; ".join(f"{c.uri!r}: {c.reason}" for c in candidates) or "none"
    return f"{subject}: {problem}. Candidates: {considered}. Fix: {fix}."


def _type_fix(types: TypeGraph, type_names: Iterable[str], otherwise: str) -> str:
    """The fix for a type mismatch: create the types that are missing, or ``otherwise``."""
    missing = sorted({name for name in type_names if name not in types})
    if not missing:
        return otherwise
    kind = "a ResourceType" if len(missing) == 1 else "ResourceTypes"
    named = " and ".join(repr(name) for name in missing)
    return f"create {kind} named {named}, or {otherwise}"


# --------------------------------------------------------------------------------------------
# Linked resources: what a slot can be bound to


@dataclass(slots=True)
class _Linked:
    """A resource a slot may be bound to, with the names a slot name is matched against.

    Internal to one agent's resolution, and never changed after creation but for its cache of
    candidates (not frozen because frozen dataclasses are several times slower to create, and
    resolution creates many).
    """

    resource: BoundResource
    names: tuple[tuple[str, str], ...]
    """``(what, value)`` pairs, e.g. ``("alias", "repo")``, in the order they are tried."""
    stands_for: frozenset[str]
    """The slot types it can fill (see :meth:`TypeGraph.stands_for`); empty when in error."""
    problem: str = ""
    """Why it can fill no slot at all (its direct binding is in error); empty if it can."""
    candidates: dict[str, Candidate] = field(default_factory=dict)
    """The candidates made of it so far, by reason: an agent's slots often give it the same one
    (results are frozen, so they can share it)."""
    members: tuple[_Linked, ...] = ()
    """When several direct bindings share one URI (one resource under several roles): those that
    are not in error, in spec order. Empty for a resource linked once."""

    def filling(self, wanted: str, slot_name: str = "") -> BoundResource:
        """The resource as bound to a slot asking for ``wanted``: for a URI bound under several
        roles, as the role named like the slot if its type fits, else the first that fits."""
        fitting = [m for m in self.members if wanted in m.stands_for]
        named = next((m for m in fitting if m.name_matching(slot_name)), None)
        if named is not None:
            return named.resource
        return fitting[0].resource if fitting else self.resource

    def types_read(self) -> Iterable[str]:
        """The types it was examined as (one per role for a URI bound under several)."""
        return (m.resource.type for m in self.members) if self.members else (self.resource.type,)

    def candidate(self, reason: str) -> Candidate:
        made = self.candidates.get(reason)
        if made is None:
            r = self.resource
            made = self.candidates[reason] = Candidate.trusted(
                {"uri": r.uri, "type": r.type, "alias": r.alias, "reason": reason}
            )
        return made

    def name_matching(self, slot_name: str) -> str:
        """Which of its names equals ``slot_name`` (e.g. ``"alias"``), or "" if none does."""
        return next((what for what, value in self.names if value == slot_name), "")

    def names_text(self) -> str:
        return " and ".join(f"{what} {value!r}" for what, value in self.names)


_LINKED_ORDER = attrgetter("resource.uri", "resource.alias", "resource.namespace", "resource.name")
"""How linked resources are ordered (and so candidates listed): by URI, then alias, then key."""
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


def _registered(resource: ResourceObject, types: TypeGraph) -> _Linked:
    """A registered Resource as a slot sees it: matched by its alias, then its name."""
    alias, name = resource.spec.alias, resource.meta.name
    names = (("alias", alias), ("name", name)) if alias else (("name", name),)
    return _Linked(_bound_resource(resource), names, types.stands_for(resource.spec.type))


def _one_per_uri(direct: Sequence[_Linked]) -> list[_Linked]:
    """An agent's direct bindings as linked resources, one per URI: a URI identifies one resource,
    so bindings sharing it (e.g. ``work`` and ``review``) are one candidate, matched by any of
    their names and able to fill a slot any of them can."""
    groups: dict[str, list[_Linked]] = {}
    for item in direct:
        groups.setdefault(item.resource.uri, []).append(item)
    out: list[_Linked] = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        fine = tuple(item for item in group if not item.problem)
        first = fine[0] if fine else group[0]
        names = tuple(dict.fromkeys(name for item in group for name in item.names))
        stands_for = frozenset().union(*(item.stands_for for item in fine))
        problem = ""
        if not fine:
            roles = " and ".join(repr(value) for item in group for _, value in item.names[:1])
            problem = f"its direct bindings {roles} are in error"
        out.append(_Linked(first.resource, names, stands_for, problem, members=fine))
    return out


def _scheme_problem(uri: str, allowed: Sequence[str], owner: str) -> str:
    """Why ``uri`` breaks ``owner``'s ``uriSchemes`` contract ("" if it does not): ``owner``
    is what names the allowed schemes, e.g. "ResourceType 'issue'"."""
    scheme = _SCHEME.match(uri)
    if not allowed or (scheme is not None and scheme.group() in allowed):
        return ""
    has = f"scheme {scheme.group()!r}" if scheme else "no scheme"
    return f"its URI {uri!r} has {has}, but {owner} accepts only " + ", ".join(
        repr(s) for s in allowed
    )


def _as_tagged(binding: DirectBinding) -> BoundResource:
    """A direct binding on its own: its URI, with its tag as type and its name as alias."""
    return BoundResource.trusted(
        {
            "uri": binding.uri,
            "type": binding.tag,
            "alias": binding.name,
            "name": "",
            "namespace": "",
            "uid": "",
            "attributes": {},
        }
    )


# --------------------------------------------------------------------------------------------
# Slots


class _Context(Protocol):
    """Where a slot is resolved: the type graph, who messages are about, and the checks of a
    resource's type against a slot's that the resolution makes (see :class:`TypeReads`)."""

    types: TypeGraph
    pairs: set[tuple[str, str]]

    def who(self, tool: str) -> str:
        """The agent and tool (or the Tool alone) a slot's messages are about."""
        ...


@dataclass(slots=True)
class _SlotCall:
    """One slot of a tool being resolved."""

    tool: str
    slot: ResourceSlot
    context: _Context

    @property
    def types(self) -> TypeGraph:
        return self.context.types

    @property
    def subject(self) -> str:
        return f"{self.context.who(self.tool)}, slot {self.slot.name!r}"

    def result(
        self,
        state: BindingState,
        *,
        resource: BoundResource | None = None,
        candidates: Sequence[Candidate] = (),
        message: str = "",
        cause: ErrorCause | None = None,
    ) -> SlotResult:
        listed = list(candidates)
        return _slot_result(
            self.tool, self.slot, state, resource, listed, message=message, cause=cause
        )

    def error(
        self,
        problem: str,
        fix: str,
        candidates: Sequence[Candidate] = (),
        *,
        cause: ErrorCause = _CONFLICT,
    ) -> SlotResult:
        message = _message(self.subject, problem, fix, candidates)
        return self.result(BindingState.ERROR, candidates=candidates, message=message, cause=cause)

    def rejection(self, linked: _Linked) -> str:
        """Why ``linked`` cannot fill this slot ("" if it can)."""
        return linked.problem or self.types.incompatibility(
            linked.resource.type, self.slot.resource_type
        )

    def bind(self, linked: _Linked, named_by: str, fix: str) -> SlotResult:
        """Bind to the one resource the slot's own setting names, if its type is compatible."""
        wanted = self.slot.resource_type
        self.context.pairs.add((linked.resource.type, wanted))
        if wanted not in linked.stands_for:
            # Unfit because its type is not registered yet: creating that type may fit it.
            unknown = not linked.problem and linked.resource.type not in self.types
            return self.error(
                f"{named_by} names a resource that cannot fill it",
                _type_fix(self.types, [linked.resource.type], fix),
                [linked.candidate(self.rejection(linked))],
                cause=_MISSING if unknown else _CONFLICT,
            )
        chosen = linked.candidate(f"selected: named by {named_by}")
        resource = linked.filling(wanted)
        return self.result(BindingState.BOUND, resource=resource, candidates=[chosen])


def _slot_result(
    tool: str,
    slot: ResourceSlot,
    state: BindingState,
    resource: BoundResource | None,
    candidates: list[Candidate],
    *,
    message: str = "",
    cause: ErrorCause | None = None,
) -> SlotResult:
    """A slot's result (``candidates`` is kept, not copied)."""
    return SlotResult.trusted(
        {
            "tool": tool,
            "slot": slot.name,
            "mode": _MODES[slot.binding],
            "access": slot.access,
            "resource_type": slot.resource_type,
            "required": slot.required,
            "state": state,
            "resource": resource,
            "message": message,
            "candidates": candidates,
            "cause": cause,
        }
    )


_DEFERRED_NOTE = "no value in spec.tools[].params, so it is resolved when the tool is invoked"


@lru_cache(maxsize=4096)
def _deferred(
    tool: str, slot: str, access: Access, resource_type: str, required: bool
) -> SlotResult:
    """A parameter slot with no value yet: the same for every agent, so built once (and cached
    by the fields it shows, cheaper to hash than the slot itself)."""
    return SlotResult.trusted(
        {
            "tool": tool,
            "slot": slot,
            "mode": BindingMode.PARAMETER,
            "access": access,
            "resource_type": resource_type,
            "required": required,
            "state": BindingState.DEFERRED,
            "resource": None,
            "message": _DEFERRED_NOTE,
            "candidates": [],
            "cause": None,
        }
    )


def _unknown_slot_type(call: _SlotCall) -> SlotResult:
    """The error for a slot asking for an unregistered type: no resource can ever fill it."""
    wanted = call.slot.resource_type
    return call.error(
        f"its resourceType {wanted!r} is not a registered ResourceType",
        f"create a ResourceType named {wanted!r}, or change the slot's resourceType",
        cause=_MISSING,
    )


def _static(call: _SlotCall, tool_namespace: str, view: RegistryView) -> SlotResult:
    ref = call.slot.static_resource
    if not ref:
        return call.error(
            "it is static but has no staticResource",
            "set staticResource to a Resource's name or namespace/name",
        )
    key = static_resource_key(tool_namespace, ref)
    if key.rpartition("/")[0] != tool_namespace:  # asked before looking: no existence oracle
        return call.error(
            f"its staticResource {ref!r} is in namespace {key.rpartition('/')[0]!r}, and a Tool "
            f"may name only Resources in its own namespace ({tool_namespace!r})",
            f"register the resource in namespace {tool_namespace!r} and name it there",
            cause=_CONFLICT,
        )
    resource = view.resource(key)
    if resource is None:
        return call.error(
            f"its staticResource {ref!r} names Resource {key}, which does not exist",
            "create that Resource, or point staticResource at an existing one",
            cause=_MISSING,
        )
    fix = (
        f"point staticResource at a Resource of type {call.slot.resource_type!r} "
        "(or a subtype), or change the slot's resourceType"
    )
    return call.bind(_registered(resource, view.types), f"its staticResource {ref!r}", fix)


@dataclass(frozen=True, slots=True)
class _Choice:
    """The outcome of choosing among several type-compatible resources."""

    chosen: int | None
    """Index of the chosen resource; ``None`` when the slot name does not single one out."""
    verdicts: list[str]
    """Why each resource was or was not chosen, in the order given."""
    problem: str = ""
    fix: str = ""


_ONLY_VERDICT = "selected: the only compatible linked resource"


def _choose(compatible: Sequence[_Linked], slot_name: str) -> _Choice:
    """The one whose alias (or short name) is the slot name, among several compatible ones."""
    matching = [linked.name_matching(slot_name) for linked in compatible]
    named = [i for i, what in enumerate(matching) if what]
    verdicts = [
        f"{linked.names_text()} also matches the slot name"
        if what
        else f"{linked.names_text()} != slot name {slot_name!r}"
        for linked, what in zip(compatible, matching, strict=True)
    ]
    if len(named) == 1:
        verdicts[named[0]] = f"selected: its {matching[named[0]]} equals the slot name"
        return _Choice(named[0], verdicts)
    if named:
        return _Choice(
            None,
            verdicts,
            f"{len(named)} compatible linked resources are named {slot_name!r}",
            f"keep the alias or name {slot_name!r} on only one of them",
        )
    return _Choice(
        None,
        verdicts,
        f"{len(compatible)} linked resources are compatible and none is named {slot_name!r}",
        f"give the one to use the alias {slot_name!r} (or name its direct binding "
        f"{slot_name!r}), or select fewer resources",
    )


def _contextual(
    call: _SlotCall, linked: Sequence[_Linked], compatible: Sequence[_Linked]
) -> SlotResult:
    """A contextual slot filled from ``linked``, of which ``compatible`` can fill it: not just
    one (the caller binds that one itself, the common case)."""
    wanted = call.slot.resource_type
    if compatible:
        choice = _choose(compatible, call.slot.name)
        candidates = [
            item.candidate(verdict)
            for item, verdict in zip(compatible, choice.verdicts, strict=True)
        ]
        if choice.chosen is None:
            return call.error(choice.problem, choice.fix, candidates)
        chosen = compatible[choice.chosen].filling(wanted, call.slot.name)
        return call.result(BindingState.BOUND, resource=chosen, candidates=candidates)
    candidates = [item.candidate(call.rejection(item)) for item in linked]
    problem = f"no linked resource is compatible with {wanted!r}"
    fix = _type_fix(
        call.types,
        (item.resource.type for item in linked if not item.problem),
        f"link a Resource of type {wanted!r} (or a subtype) through spec.resources or "
        "spec.resourceSelector",
    )
    if call.slot.required:
        # The Resource it needs is missing: one created later (selected by the agent, or
        # registered under a direct binding's URI with a fitting type) fills it.
        return call.error(
            problem,
            f"{fix}, or make the slot optional (required: false)",
            candidates,
            cause=_MISSING,
        )
    message = _message(call.subject, f"optional, and {problem}", fix, candidates)
    return call.result(BindingState.UNBOUND, candidates=candidates, message=message)


# --------------------------------------------------------------------------------------------
# One agent


class TypeReads(NamedTuple):
    """What a resolution read of the type graph: the types of the resources it examined, and
    which of them it checked against which slot types and tags.

    Messages name types, never their ancestors, so a change to the ancestors of ``T`` changes a
    resolution only if it checked a resource of type ``T`` against a type gained or lost; ``T``
    appearing or vanishing changes every check of ``T``. The registry keeps these to know which
    agents a type change affects without resolving every agent again. Tuples, not sets: the
    registry keeps one per agent, and they are small.
    """

    linked: tuple[str, ...]
    """Types of the agent's linked resources, each checked against every type in ``wanted``."""
    wanted: tuple[str, ...]
    """Types the agent's contextual slots ask for."""
    pairs: tuple[tuple[str, str], ...]
    """The other checks, as ``(resource type, type asked for)``: a direct binding's registered
    Resource against its tag, a resource named by a static or parameter slot against the slot."""

    @property
    def examined(self) -> frozenset[str]:
        """Types of the resources it examined (linked, named by a slot, or merged into a
        binding)."""
        return frozenset(self.linked).union(map(_FIRST, self.pairs))

    @property
    def asked(self) -> frozenset[str]:
        """The types it checked resources against (slot types and tags)."""
        return frozenset(self.wanted).union(map(_SECOND, self.pairs))

    def checks(self, type_name: str, asked: Set[str]) -> bool:
        """Whether it checked a resource of ``type_name`` against one of the types ``asked``."""
        if type_name in self.linked and not asked.isdisjoint(self.wanted):
            return True
        return any(checked == type_name and wanted in asked for checked, wanted in self.pairs)


class Resolved(NamedTuple):
    """An agent's resolution, and what it read of the type graph."""

    resolution: AgentResolution
    reads: TypeReads


class _Merged(NamedTuple):
    """A direct binding merged with the registered Resource of its URI (or standing alone)."""

    resource: BoundResource
    names: tuple[tuple[str, str], ...]
    """The binding name, then the registered Resource's alias and name: a Resource keeps its
    names when an agent also binds it directly."""


class _AgentResolver:
    """Resolves one agent: its direct bindings first, since its contextual slots draw on them."""

    def __init__(self, agent: AgentObject, view: RegistryView) -> None:
        self.agent = agent
        self.key = agent.meta.key
        self.namespace = agent.meta.namespace
        self.view = view
        self.types = view.types
        self.pairs: set[tuple[str, str]] = set()
        self.wanted: set[str] = set()
        self.compatible: dict[str, list[_Linked]] = {}
        """Slot type -> the linked resources that can fill it (slots often ask alike)."""
        self.direct = [(binding, *self._direct(binding)) for binding in agent.spec.resources]
        self.direct_linked = _one_per_uri([linked for _, _, linked in self.direct])
        direct_uris = {binding.uri for binding in agent.spec.resources}
        selected = [
            _registered(r, self.types)
            for r in view.selected_resources(self.key)
            if r.spec.uri not in direct_uris
        ]
        self.linked = sorted(self.direct_linked + selected, key=_LINKED_ORDER)

    def resolve(self) -> Resolved:
        slots: list[SlotResult] = []
        missing: list[str] = []
        for use in self.agent.spec.tools:
            tool_key = f"{self.namespace}/{use.name}"
            tool = self.view.tool(tool_key)
            if tool is not None:
                self._tool_slots(use, tool_key, tool, slots)
            elif use.name not in missing:
                missing.append(use.name)
        resolution = AgentResolution.trusted(
            {
                "agent": self.key,
                "direct": [result for _, result, _ in self.direct],
                "slots": slots,
                "missing_tools": missing,
            }
        )
        linked_types = {t for item in self.linked for t in item.types_read()}
        reads = TypeReads(tuple(linked_types), tuple(self.wanted), tuple(self.pairs))
        return Resolved(resolution, reads)

    # -- direct bindings -----------------------------------------------------------------------

    def _direct(self, binding: DirectBinding) -> tuple[DirectResult, _Linked]:
        names = (("binding name", binding.name),)
        outcome = self._merge(binding)
        name, tag, uri = binding.name, binding.tag, binding.uri
        if isinstance(outcome, _Merged):
            bound = outcome.resource
            result = DirectResult.trusted(
                {
                    "name": name,
                    "tag": tag,
                    "uri": uri,
                    "state": BindingState.BOUND,
                    "resource": bound,
                    "message": "",
                    "cause": None,
                }
            )
            return result, _Linked(bound, outcome.names, self.types.stands_for(bound.type))
        subject = f"agent {self.key}, direct binding {binding.name!r}"
        problem, fix, cause = outcome
        message = _message(subject, problem, fix)
        result = DirectResult.trusted(
            {
                "name": name,
                "tag": tag,
                "uri": uri,
                "state": BindingState.ERROR,
                "resource": None,
                "message": message,
                "cause": cause,
            }
        )
        problem = f"its direct binding {binding.name!r} is in error"
        return result, _Linked(_as_tagged(binding), names, frozenset(), problem)

    def _merge(self, binding: DirectBinding) -> _Merged | tuple[str, str, ErrorCause]:
        """The resource a direct binding stands for: the registered Resource with its URI (whose
        more precise type then stands, as it must be compatible with the tag), or else the URI
        with the tag as its type.

        Returns what is wrong with the binding, how to fix it and what clears it instead, when it
        cannot be bound.
        """
        types = self.types
        tag_type = types.get(binding.tag)
        if tag_type is None:
            return (
                f"its tag {binding.tag!r} is not a registered ResourceType",
                f"create a ResourceType named {binding.tag!r}, or change the tag",
                _MISSING,
            )
        wrong_scheme = _scheme_problem(
            binding.uri, tag_type.spec.uri_schemes, f"its tag, ResourceType {binding.tag!r},"
        )
        if wrong_scheme:
            return (
                wrong_scheme,
                "use a URI with one of those schemes, or change the tag to a type that accepts it",
                _CONFLICT,
            )
        own_name = (("binding name", binding.name),)
        registered = self.view.resources_with_uri(self.namespace, binding.uri)
        if not registered:
            return _Merged(_as_tagged(binding), own_name)
        if len(registered) > 1:
            keys = ", ".join(r.meta.key for r in registered)
            return (
                f"its URI {binding.uri!r} is registered by {len(registered)} Resources ({keys}), "
                "so which one it is is ambiguous",
                "delete all but one of those Resources",
                _CONFLICT,
            )
        resource = registered[0]
        self.pairs.add((resource.spec.type, binding.tag))
        if binding.tag not in types.stands_for(resource.spec.type):
            reason = types.incompatibility(resource.spec.type, binding.tag)
            return (
                f"its URI {binding.uri!r} is Resource {resource.meta.key}, and its {reason}",
                _type_fix(types, [resource.spec.type], "change the tag or the Resource's type"),
                _MISSING if resource.spec.type not in types else _CONFLICT,
            )
        alias, name = resource.spec.alias, resource.meta.name
        kept = (("alias", alias), ("name", name)) if alias else (("name", name),)
        names = own_name + tuple(pair for pair in kept if pair[1] != binding.name)
        return _Merged(_bound_resource(resource, alias=binding.name), names)

    # -- tool slots ----------------------------------------------------------------------------

    def who(self, tool: str) -> str:
        return f"agent {self.key}, tool {tool!r}"

    def _tool_slots(
        self, use: ToolUse, tool_key: str, tool: ToolObject, out: list[SlotResult]
    ) -> None:
        """Append one tool's slots to ``out``.

        A static slot reuses the Tool's own validation unless that is an error: it is then the
        same for every agent, since only errors name the agent (and the agent depends on that
        result through the Tool, not through what it reads itself).
        """
        validated = iter(self.view.validate_tool(tool_key).static_slots)
        registered, tool_name = self.types.names, use.name
        for slot in tool.spec.resource_slots:
            binding = slot.binding
            if binding == "static":
                shared = next(validated)
                if shared.state is not BindingState.ERROR:
                    out.append(shared)
                    continue
            # The common outcomes (one compatible linked resource, no parameter value) are built
            # here directly; the others go through a _SlotCall, which knows how to explain.
            wanted = slot.resource_type
            if wanted not in registered:
                out.append(_unknown_slot_type(_SlotCall(tool_name, slot, self)))
            elif binding == "contextual":
                compatible = self.compatible.get(wanted)
                if compatible is None:
                    self.wanted.add(wanted)
                    compatible = [item for item in self.linked if wanted in item.stands_for]
                    self.compatible[wanted] = compatible
                if len(compatible) == 1:
                    only = compatible[0]
                    chosen = [only.candidate(_ONLY_VERDICT)]
                    filled = only.filling(wanted, slot.name) if only.members else only.resource
                    out.append(_slot_result(tool_name, slot, _BOUND, filled, chosen))
                else:
                    call = _SlotCall(tool_name, slot, self)
                    out.append(_contextual(call, self.linked, compatible))
            elif binding == "static":
                out.append(_static(_SlotCall(tool_name, slot, self), self.namespace, self.view))
            elif (value := use.params.get(slot.name)) is None:
                out.append(_deferred(tool_name, slot.name, slot.access, wanted, slot.required))
            else:
                out.append(self._parameter(_SlotCall(tool_name, slot, self), value))

    def _parameter(self, call: _SlotCall, value: str) -> SlotResult:
        elsewhere, _, _ = value.rpartition("/")
        if elsewhere and "/" not in elsewhere and ":" not in value and elsewhere != self.namespace:
            return call.error(
                f"its parameter value {value!r} names a Resource in namespace {elsewhere!r}, and "
                f"an agent may use only Resources in its own namespace ({self.namespace!r})",
                f"register the resource in namespace {self.namespace!r} and name it there",
                cause=_CONFLICT,
            )
        found, how = self._lookup(value)
        if not found:
            return call.error(
                f"its parameter value {value!r} names no resource: it is not the name of a "
                f"Resource in namespace {self.namespace!r}, a namespace/name, a uid, or the URI "
                "of a Resource in the namespace or of a direct binding",
                "set the parameter to one of those",
                cause=_MISSING,
            )
        if len(found) > 1:
            return call.error(
                f"its parameter value {value!r} is the URI of {len(found)} resources",
                "keep one Resource per URI, or name the Resource by namespace/name",
                [item.candidate(f"another resource also has URI {value!r}") for item in found],
            )
        fix = (
            f"set the parameter to a resource of type {call.slot.resource_type!r} "
            "(or a subtype), or change the slot's resourceType"
        )
        return call.bind(found[0], f"its parameter value {value!r} (by {how})", fix)

    def _lookup(self, value: str) -> tuple[list[_Linked], str]:
        """What a parameter value names, by the first rule that finds anything.

        Rules in order: a Resource name in the agent's namespace, ``namespace/name``, a uid, then
        a URI among the namespace's Resources and, failing those, the agent's direct bindings.
        """
        view = self.view
        by_name = view.resource(f"{self.namespace}/{value}")
        if by_name is not None:
            return [_registered(by_name, self.types)], "name"
        by_key = view.resource(value)
        if by_key is not None and by_key.meta.namespace == self.namespace:
            return [_registered(by_key, self.types)], "namespace/name"
        by_uid = view.resource_by_uid(value)
        if by_uid is not None and by_uid.meta.namespace == self.namespace:  # never another's
            return [_registered(by_uid, self.types)], "uid"
        by_uri = [
            _registered(r, self.types) for r in view.resources_with_uri(self.namespace, value)
        ]
        return by_uri or [item for item in self.direct_linked if item.resource.uri == value], "URI"


def resolve_agent(agent: AgentObject, view: RegistryView) -> Resolved:
    """Every direct binding and every tool slot of ``agent``, in spec order."""
    return _AgentResolver(agent, view).resolve()


@dataclass(slots=True)
class _ToolContext:
    """A Tool checked on its own. What it reads is not kept: a change to a type reaches the
    Tools whose static slots name a resource of that type and ask for a type it gains or loses
    (see ``Registry._retype``)."""

    key: str
    types: TypeGraph
    pairs: set[tuple[str, str]]

    def who(self, tool: str) -> str:
        return f"tool {self.key}"


def validate_tool_slots(tool: ToolObject, view: RegistryView) -> ToolValidation:
    """A Tool's static slots checked on their own, as at registration time."""
    key, namespace = tool.meta.key, tool.meta.namespace
    context = _ToolContext(key, view.types, set())
    results = []
    for slot in tool.spec.resource_slots:
        if slot.binding == "static":
            call = _SlotCall(tool.meta.name, slot, context)
            known = slot.resource_type in view.types
            results.append(_static(call, namespace, view) if known else _unknown_slot_type(call))
    return ToolValidation.trusted({"tool": key, "static_slots": results})


def resource_errors(
    resource: ResourceObject, types: TypeGraph, same_uri: Sequence[ResourceObject] = ()
) -> list[Problem]:
    """What is wrong with a Resource on its own: an unknown type, a URI scheme its type refuses,
    or a URI that other Resources in its namespace (``same_uri``, itself excluded) register too."""
    subject, spec = f"Resource {resource.meta.key}", resource.spec
    errors: list[Problem] = []
    rtype = types.get(spec.type)
    if rtype is None:
        fix = f"create a ResourceType named {spec.type!r}, or change spec.type"
        problem = f"its type {spec.type!r} is not a registered ResourceType"
        errors.append(Problem(_message(subject, problem, fix), _MISSING))
    else:
        problem = _scheme_problem(spec.uri, rtype.spec.uri_schemes, f"ResourceType {spec.type!r}")
        if problem:
            fix = "use a URI with one of those schemes, or change spec.type"
            errors.append(Problem(_message(subject, problem, fix), _CONFLICT))
    others = sorted(r.meta.key for r in same_uri if r.meta.key != resource.meta.key)
    if others:
        times = "twice" if len(others) == 1 else f"{len(others) + 1} times"
        kind = "Resource" if len(others) == 1 else "Resources"
        errors.append(
            Problem(
                _message(
                    subject,
                    f"its URI {spec.uri!r} is registered {times} in namespace "
                    f"{resource.meta.namespace!r}: {kind} {', '.join(others)} "
                    f"{'has' if len(others) == 1 else 'have'} it too, and a URI identifies one "
                    "resource, so agents binding it cannot tell which one it is",
                    "delete all but one of the Resources with this URI "
                    "(spec.uri cannot be changed)",
                ),
                _CONFLICT,
            )
        )
    return errors
