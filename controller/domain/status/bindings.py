"""An agent's bindings as its status lists them: one row per direct binding and per tool slot,
and how many are in each state.

A ``work`` binding that resolved but whose URI another agent holds (or that waits its turn)
reads ``Waiting``, its message naming whom it waits for: it is withheld from the session's
document until the agent holds the URI, so ``Bound`` would say more than is true.
"""

from __future__ import annotations

from typing import Any

from bindery_session.wire import BindingState

from controller.domain.results import AgentResolution
from controller.domain.status.fields import candidate_field, resource_field
from controller.domain.work import WorkPlan, WorkState

MAX_CANDIDATES = 20
"""Candidates listed per slot in status; the rest are counted (a status must stay writable
however many Resources an agent selects)."""


WAITING = "Waiting"
"""The state of a ``work`` binding withheld while another agent holds its URI (status only:
resolution never yields it)."""


def withheld(work: WorkPlan | None) -> str:
    """Why the work binding is withheld from the session ("" when it is not)."""
    if work is None or work.state is not WorkState.WAITING or not work.uri:
        return ""
    who = work.waiting_for or "its release"
    return f"withheld from the session until this agent holds {work.uri!r}; waiting for {who}"


def binding_rows(resolution: AgentResolution, work: WorkPlan | None = None) -> list[dict[str, Any]]:
    """The ``bindings`` rows of status; ``work`` (this pass's work plan) marks a work binding
    that waits for its URI as ``Waiting``."""
    rows: list[dict[str, Any]] = []
    waiting = withheld(work)
    for d in resolution.direct:
        row: dict[str, Any] = {
            "name": d.name,
            "tag": d.tag,
            "uri": d.uri,
            "mode": "direct",
            "state": d.state.value,
        }
        if d.resource is not None:
            row["resource"] = resource_field(d.resource)
        if d.message:
            row["message"] = d.message
        if (
            waiting
            and work
            and d.name == "work"
            and d.state is BindingState.BOUND
            and d.uri == work.uri
        ):
            row["state"] = WAITING
            row["message"] = waiting
        rows.append(row)
    for s in resolution.slots:
        row = {
            "name": f"{s.tool}.{s.slot}",
            "tool": s.tool,
            "slot": s.slot,
            "mode": s.mode.value,
            "access": s.access.value,
            "resourceType": s.resource_type,
            "required": s.required,
            "state": s.state.value,
        }
        if s.resource is not None:
            row["resource"] = resource_field(s.resource)
        if s.message:
            row["message"] = s.message
        if s.candidates:
            row["candidates"] = [candidate_field(c) for c in s.candidates[:MAX_CANDIDATES]]
            if len(s.candidates) > MAX_CANDIDATES:
                row["candidatesOmitted"] = len(s.candidates) - MAX_CANDIDATES
        rows.append(row)
    return rows


def binding_counts(resolution: AgentResolution) -> dict[str, int]:
    """How many of an agent's bindings (direct and slots) are in each state."""
    by_state: dict[BindingState, int] = {}  # each state's value read once, not once a binding
    for state in [d.state for d in resolution.direct] + [s.state for s in resolution.slots]:
        by_state[state] = by_state.get(state, 0) + 1
    return {state.value: n for state, n in by_state.items()}
