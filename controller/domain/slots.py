"""How one tool slot is resolved: static (the Tool names the resource), contextual (chosen among
the agent's linked resources), or parameter (deferred while no value is given), and a Tool's
static slots validated on their own.

Error messages name the agent, tool and slot; notes on healthy slots (``Deferred``) name nothing
the slot result does not already carry, so identical slots can share one result.

A slot's ``candidates`` are the resources its choice was made among: for a contextual slot, the
type-compatible linked resources (each with why it was or was not chosen), or, when none is
compatible, every linked resource with why its type does not fit; for a static or parameter slot,
the one resource its setting names.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from bindery_session.wire import Access, BindingMode, BindingState

from controller.domain.crossing import granted, refused
from controller.domain.grants import GrantUse
from controller.domain.linked import Linked, registered
from controller.domain.messages import message, type_fix
from controller.domain.models import ResourceSlot, ToolObject
from controller.domain.registry_view import RegistryView
from controller.domain.results import (
    BoundResource,
    Candidate,
    ErrorCause,
    SlotResult,
    ToolValidation,
)
from controller.domain.types import TypeGraph

_MODES = {mode.value: mode for mode in BindingMode}

ONLY_VERDICT = "selected: the only compatible linked resource"
"""Why the one type-compatible linked resource of a contextual slot is chosen."""


def static_resource_key(tool_namespace: str, ref: str) -> str:
    """The Resource key a ``staticResource`` names: ``name`` is in the Tool's own namespace."""
    return ref if "/" in ref else f"{tool_namespace}/{ref}"


class SlotContext(Protocol):
    """Where a slot is resolved: the type graph, who messages are about, and the checks of a
    resource's type against a slot's that the resolution makes (see
    :class:`~controller.domain.type_reads.TypeReads`)."""

    types: TypeGraph
    pairs: set[tuple[str, str]]
    reach: set[str]
    """The other namespaces whose ResourceGrants the resolution consulted."""

    def who(self, tool: str) -> str:
        """The agent and tool (or the Tool alone) a slot's messages are about."""
        ...


@dataclass(slots=True)
class SlotCall:
    """One slot of a tool being resolved."""

    tool: str
    slot: ResourceSlot
    context: SlotContext

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
        return slot_result(
            self.tool, self.slot, state, resource, listed, message=message, cause=cause
        )

    def error(
        self,
        problem: str,
        fix: str,
        candidates: Sequence[Candidate] = (),
        *,
        cause: ErrorCause = ErrorCause.CONFLICT,
    ) -> SlotResult:
        said = message(self.subject, problem, fix, candidates)
        return self.result(BindingState.ERROR, candidates=candidates, message=said, cause=cause)

    def rejection(self, linked: Linked) -> str:
        """Why ``linked`` cannot fill this slot ("" if it can)."""
        return linked.problem or self.types.incompatibility(
            linked.resource.type, self.slot.resource_type
        )

    def bind(self, linked: Linked, named_by: str, fix: str) -> SlotResult:
        """Bind to the one resource the slot's own setting names, if its type is compatible."""
        wanted = self.slot.resource_type
        self.context.pairs.add((linked.resource.type, wanted))
        if wanted not in linked.stands_for:
            # Unfit because its type is not registered yet: creating that type may fit it.
            unknown = not linked.problem and linked.resource.type not in self.types
            return self.error(
                f"{named_by} names a resource that cannot fill it",
                type_fix(self.types, [linked.resource.type], fix),
                [linked.candidate(self.rejection(linked))],
                cause=ErrorCause.MISSING if unknown else ErrorCause.CONFLICT,
            )
        chosen = linked.candidate(f"selected: named by {named_by}")
        resource = linked.filling(wanted)
        return self.result(BindingState.BOUND, resource=resource, candidates=[chosen])


def slot_result(
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
def deferred(
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


def unknown_slot_type(call: SlotCall) -> SlotResult:
    """The error for a slot asking for an unregistered type: no resource can ever fill it."""
    wanted = call.slot.resource_type
    return call.error(
        f"its resourceType {wanted!r} is not a registered ResourceType",
        f"create a ResourceType named {wanted!r}, or change the slot's resourceType",
        cause=ErrorCause.MISSING,
    )


def static_slot(call: SlotCall, tool_namespace: str, view: RegistryView) -> SlotResult:
    """A static slot bound to the Resource its ``staticResource`` names."""
    ref = call.slot.static_resource
    if not ref:
        return call.error(
            "it is static but has no staticResource",
            "set staticResource to a Resource's name or namespace/name",
        )
    key = static_resource_key(tool_namespace, ref)
    resource = view.resource(key)
    grant = ""
    if key.rpartition("/")[0] != tool_namespace:
        found = granted(
            view, tool_namespace, key, resource, use=GrantUse.STATIC, reach=call.context.reach
        )
        if found is None:  # refused before saying whether it exists: no existence oracle
            why, fix = refused(tool_namespace, key, GrantUse.STATIC)
            # Missing, not a conflict: the owner's grant, applied later, admits it as it stands.
            return call.error(
                f"its staticResource names another namespace's Resource: {why}",
                f"{fix}; or register the resource in namespace {tool_namespace!r}",
                cause=ErrorCause.MISSING,
            )
        grant = found
    if resource is None:
        return call.error(
            f"its staticResource {ref!r} names Resource {key}, which does not exist",
            "create that Resource, or point staticResource at an existing one",
            cause=ErrorCause.MISSING,
        )
    fix = (
        f"point staticResource at a Resource of type {call.slot.resource_type!r} "
        "(or a subtype), or change the slot's resourceType"
    )
    linked = registered(resource, view.types, grant)
    return call.bind(linked, f"its staticResource {ref!r}", fix)


@dataclass(frozen=True, slots=True)
class _Choice:
    """The outcome of choosing among several type-compatible resources."""

    chosen: int | None
    """Index of the chosen resource; ``None`` when the slot name does not single one out."""
    verdicts: list[str]
    """Why each resource was or was not chosen, in the order given."""
    problem: str = ""
    fix: str = ""


def _choose(compatible: Sequence[Linked], slot_name: str) -> _Choice:
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


def contextual_slot(
    call: SlotCall, linked: Sequence[Linked], compatible: Sequence[Linked]
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
    fix = type_fix(
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
            cause=ErrorCause.MISSING,
        )
    said = message(call.subject, f"optional, and {problem}", fix, candidates)
    return call.result(BindingState.UNBOUND, candidates=candidates, message=said)


@dataclass(slots=True)
class _ToolContext:
    """A Tool checked on its own. What it reads is not kept: a change to a type reaches the
    Tools whose static slots name a resource of that type and ask for a type it gains or loses
    (see :meth:`TypeChanges.apply <controller.domain.type_changes.TypeChanges.apply>`)."""

    key: str
    types: TypeGraph
    pairs: set[tuple[str, str]]
    reach: set[str]

    def who(self, tool: str) -> str:
        return f"tool {self.key}"


def checked_tool_slots(tool: ToolObject, view: RegistryView) -> tuple[ToolValidation, set[str]]:
    """A Tool's static slots checked on their own, its other slots' types checked against the
    registry, and the other namespaces whose grants the check consulted."""
    key, namespace = tool.meta.key, tool.meta.namespace
    context = _ToolContext(key, view.types, set(), set())
    results, unregistered = [], []
    for slot in tool.spec.resource_slots:
        call = SlotCall(tool.meta.name, slot, context)
        known = slot.resource_type in view.types
        if slot.binding == "static":
            results.append(static_slot(call, namespace, view) if known else unknown_slot_type(call))
        elif not known:
            unregistered.append(unknown_slot_type(call))
    validation = ToolValidation.trusted(
        {"tool": key, "static_slots": results, "unregistered_slots": unregistered}
    )
    return validation, context.reach
