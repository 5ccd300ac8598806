"""One agent's resolution: its direct bindings, then every slot of every tool it uses, in spec
order.

Everything here is a pure function of the objects it is given and of a read-only
:class:`~controller.domain.registry_view.RegistryView`; the registry owns the indexes that make
the view's look-ups cheap and decides when a result must be recomputed. What the parts are:
linked resources (:mod:`~controller.domain.linked`), one slot (:mod:`~controller.domain.slots`),
a parameter's value (:mod:`~controller.domain.parameters`), and the message shape
(:mod:`~controller.domain.messages`).
"""

from __future__ import annotations

from typing import NamedTuple

from bindery_session.wire import BindingState

from controller.domain.linked import Linked, link_resources
from controller.domain.models import AgentObject, ToolObject, ToolUse
from controller.domain.parameters import parameter_slot
from controller.domain.registry_view import RegistryView
from controller.domain.results import AgentResolution, SlotResult
from controller.domain.slots import (
    ONLY_VERDICT,
    SlotCall,
    contextual_slot,
    deferred,
    slot_result,
    static_slot,
    unknown_slot_type,
)
from controller.domain.type_reads import TypeReads


class Resolved(NamedTuple):
    """An agent's resolution, and what it read of the type graph."""

    resolution: AgentResolution
    reads: TypeReads
    reach: frozenset[str]
    """The other namespaces whose ResourceGrants the resolution consulted."""


class _AgentResolver:
    """Resolves one agent: its direct bindings first, since its contextual slots draw on them."""

    def __init__(self, agent: AgentObject, view: RegistryView) -> None:
        self.agent = agent
        self.key = agent.meta.key
        self.namespace = agent.meta.namespace
        self.view = view
        self.types = view.types
        self.pairs: set[tuple[str, str]] = set()
        self.reach: set[str] = set()
        self.wanted: set[str] = set()
        self.compatible: dict[str, list[Linked]] = {}
        """Slot type -> the linked resources that can fill it (slots often ask alike)."""
        self.links = link_resources(agent, view, self.pairs, self.reach)

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
                "direct": self.links.direct,
                "slots": slots,
                "missing_tools": missing,
            }
        )
        linked_types = {t for item in self.links.linked for t in item.types_read()}
        reads = TypeReads(tuple(linked_types), tuple(self.wanted), tuple(self.pairs))
        return Resolved(resolution, reads, frozenset(self.reach))

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
            # here directly; the others go through a SlotCall, which knows how to explain.
            wanted = slot.resource_type
            if wanted not in registered:
                out.append(unknown_slot_type(SlotCall(tool_name, slot, self)))
            elif binding == "contextual":
                compatible = self.compatible.get(wanted)
                if compatible is None:
                    self.wanted.add(wanted)
                    compatible = [item for item in self.links.linked if wanted in item.stands_for]
                    self.compatible[wanted] = compatible
                if len(compatible) == 1:
                    only = compatible[0]
                    chosen = [only.candidate(ONLY_VERDICT)]
                    filled = only.filling(wanted, slot.name) if only.members else only.resource
                    out.append(slot_result(tool_name, slot, BindingState.BOUND, filled, chosen))
                else:
                    call = SlotCall(tool_name, slot, self)
                    out.append(contextual_slot(call, self.links.linked, compatible))
            elif binding == "static":
                out.append(static_slot(SlotCall(tool_name, slot, self), self.namespace, self.view))
            elif (value := use.params.get(slot.name)) is None:
                out.append(deferred(tool_name, slot.name, slot.access, wanted, slot.required))
            else:
                call = SlotCall(tool_name, slot, self)
                out.append(
                    parameter_slot(call, value, self.namespace, self.view, self.links.direct_linked)
                )


def resolve_agent(agent: AgentObject, view: RegistryView) -> Resolved:
    """Every direct binding and every tool slot of ``agent``, in spec order."""
    return _AgentResolver(agent, view).resolve()
