"""The status semantics table (docs/design.md, "Status semantics") as data: one row per situation
of each kind, with the status the controller writes in it and what kstatus and Argo CD make of it.

Statuses come from the real builders (``controller.domain.status`` and the reconciler's invalid
spec status), so the unit tests check the builders and the shipped Argo CD script against the
table, and the kstatus tests run the real kstatus on the very same objects. The rows on a
session's health (item 1 of the issue on status) are written out as the contract that work must
meet; the Argo CD script and kstatus already read them by the generic rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bindery_session.wire import Access, BindingMode, BindingState

from controller.domain.launch import LaunchAction, LaunchPlan
from controller.domain.models import ToolSpec
from controller.domain.refs import Kind
from controller.domain.results import (
    AgentResolution,
    ErrorCause,
    Problem,
    SlotResult,
    ToolValidation,
    TypeClosure,
)
from controller.domain.rollout import AgentRollout, AgentState, Rollout, Source, count
from controller.domain.session_health import suspended_health
from controller.domain.status import (
    SessionView,
    agent_status,
    condition,
    grant_status,
    health_conditions,
    invalid_status,
    resource_status,
    resource_type_status,
    tool_status,
)
from controller.domain.status.failure import failed_status
from controller.domain.work import WorkPlan, WorkState

NOW = "2024-01-01T00:00:00Z"
GENERATION = 3
AGENT = "team/alice"
KIND_PLURALS = {
    "AgentSpec": "agentspecs",
    "Tool": "tools",
    "Resource": "resources",
    "ResourceType": "resourcetypes",
    "ResourceGrant": "resourcegrants",
}


@dataclass(frozen=True)
class Row:
    kind: str
    situation: str
    status: dict[str, Any] | None
    """The object's whole ``status`` (None: none at all)."""
    ready: str | None
    """Ready's status ("True"/"False"), or None where there is no Ready condition."""
    reason: str | None
    reconciling: bool
    stalled: bool
    kstatus: str
    argo: str
    generation: int = GENERATION
    deleting: bool = False

    @property
    def id(self) -> str:
        return f"{self.kind}: {self.situation}"

    def object(self) -> dict[str, Any]:
        """The object as the API server would return it."""
        namespaced = self.kind != "ResourceType"
        metadata: dict[str, Any] = {"name": "x", "generation": self.generation, "uid": "u-1"}
        if namespaced:
            metadata["namespace"] = "team"
        if self.deleting:
            metadata["deletionTimestamp"] = NOW
            metadata["finalizers"] = ["bindery.dev/work-hold"]
        obj: dict[str, Any] = {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": self.kind,
            "metadata": metadata,
            "spec": {},
        }
        if self.status is not None:
            obj["status"] = self.status
        return obj


def _slot(state: BindingState, cause: ErrorCause | None = None) -> SlotResult:
    return SlotResult(
        tool="git",
        slot="config",
        mode=BindingMode.STATIC,
        access=Access.READ_ONLY,
        resource_type="fs-directory",
        state=state,
        message=f"slot 'config': {cause or 'bound'}",
        cause=cause,
    )


def _agent(
    *,
    slots: list[SlotResult] | None = None,
    missing_tools: list[str] | None = None,
    work: WorkPlan | None = None,
) -> dict[str, Any]:
    return agent_status(
        generation=GENERATION,
        resolution=AgentResolution(
            agent=AGENT, slots=slots or [], missing_tools=missing_tools or []
        ),
        work=work or WorkPlan(state=WorkState.IDLE),
        waiting_since=NOW if work is not None and work.state is WorkState.WAITING else "",
        config_map="alice-bindings",
        session=None,
        old={},
        now=NOW,
    )


def _suspended() -> dict[str, Any]:
    """An idle agent whose session its idle policy scaled to zero (no pod)."""
    plan = LaunchPlan(LaunchAction.KEEP, 0, "sha256:a", 0, "sha256:a", launched_at=NOW)
    session = SessionView(plan, None, "sha256:a", NOW, suspended_health(None, 30), NOW, 30)
    return agent_status(
        generation=GENERATION,
        resolution=AgentResolution(agent=AGENT, slots=[_slot(BindingState.BOUND)]),
        work=WorkPlan(state=WorkState.IDLE),
        waiting_since="",
        config_map="alice-bindings",
        session=session,
        old={"observedLaunchGeneration": 0},
        now=NOW,
    )


def _drifted() -> dict[str, Any]:
    """A running agent whose spec.runtime changed without a change of relaunchGeneration."""
    plan = LaunchPlan(LaunchAction.KEEP, 1, "sha256:b", 1, "sha256:a", launched_at=NOW)
    return agent_status(
        generation=GENERATION,
        resolution=AgentResolution(agent=AGENT, slots=[_slot(BindingState.BOUND)]),
        work=WorkPlan(state=WorkState.IDLE),
        waiting_since="",
        config_map="alice-bindings",
        session=SessionView(plan, 1, "sha256:a", NOW),
        old={},
        now=NOW,
    )


def _session(ready: dict[str, Any], *, stalled: bool) -> dict[str, Any]:
    """An agent status whose session is not running (the session-health contract)."""
    status = _agent()
    status["conditions"] = health_conditions(ready, progressing=True, stalled=stalled)
    return status


_TOOL = ToolSpec.model_validate(
    {
        "resourceSlots": [
            {
                "name": "config",
                "resourceType": "fs-directory",
                "binding": "static",
                "staticResource": "etc",
            }
        ]
    }
)


def _tool(
    state: BindingState, cause: ErrorCause | None = None, rollout: Rollout | None = None
) -> dict[str, Any]:
    validation = ToolValidation(tool="team/git", static_slots=[_slot(state, cause)])
    return tool_status(
        generation=GENERATION, tool=_TOOL, validation=validation, old={}, now=NOW, rollout=rollout
    )


def _tool_asking_for_an_unregistered_type() -> dict[str, Any]:
    unregistered = _slot(BindingState.ERROR, ErrorCause.MISSING).model_copy(
        update={"mode": BindingMode.CONTEXTUAL, "resource_type": "ghost"}
    )
    validation = ToolValidation(
        tool="team/git", static_slots=[_slot(BindingState.BOUND)], unregistered_slots=[unregistered]
    )
    return tool_status(generation=GENERATION, tool=_TOOL, validation=validation, old={}, now=NOW)


def _resource(*errors: str, rollout: Rollout | None = None) -> dict[str, Any]:
    return resource_status(
        generation=GENERATION, errors=list(errors), holder=None, old={}, now=NOW, rollout=rollout
    )


def _type(closure: TypeClosure, rollout: Rollout | None = None) -> dict[str, Any]:
    return resource_type_status(
        generation=GENERATION, closure=closure, old={}, now=NOW, rollout=rollout
    )


def _grant(rollout: Rollout | None = None) -> dict[str, Any]:
    return grant_status(generation=GENERATION, uses=["static"], old={}, now=NOW, rollout=rollout)


def _rollout(*states: AgentState) -> Rollout:
    """A rollout of generation 3 over one dependent agent per state given."""
    source = frozenset({Source(Kind.RESOURCE, "team/x", GENERATION)})
    entries = [(f"team/a{i}", AgentRollout(source, s, "why")) for i, s in enumerate(states)]
    return count(Kind.RESOURCE, "team/x", GENERATION, entries)


_PENDING = _rollout(AgentState.APPLIED, AgentState.PENDING)
_REFUSED = _rollout(AgentState.APPLIED, AgentState.REFUSED)
_DELIVERED = _rollout(AgentState.APPLIED, AgentState.SUSPENDED)
_PENDING_ROW = "a change not yet applied by a dependent agent (Delivered=False, Pending)"
_REFUSED_ROW = "a change refused by a dependent agent (Delivered=False, Refused)"
_DELIVERED_ROW = "a change applied by every dependent agent (Delivered=True)"


_NOT_OBSERVED = {"observedGeneration": -1}  # the CRD default: what a new object reads
_MISSING, _CONFLICT = ErrorCause.MISSING, ErrorCause.CONFLICT


def _common(kind: str, healthy: dict[str, Any], reason: str) -> list[Row]:
    """The rows every kind shares: not yet seen, a stale status, being deleted, invalid spec."""
    stale = {**healthy, "observedGeneration": GENERATION - 1}
    invalid = invalid_status(GENERATION, "spec.x: not valid; fix spec.x", {}, NOW)
    message = "the pass failed: status.x: TypeError: y; Fix: report it"
    failed = failed_status(generation=GENERATION, old=stale, now=NOW, message=message)
    failed_again = failed_status(generation=GENERATION, old=healthy, now=NOW, message=message)
    return [
        Row(kind, "not yet seen by the controller", _NOT_OBSERVED, None, None,
            False, False, "InProgress", "Progressing", generation=1),
        Row(kind, "no status at all (a CRD without the default)", None, None, None,
            False, False, "Current", "Progressing", generation=1),
        Row(kind, "spec changed, not yet reconciled", stale, "True", reason,
            False, False, "InProgress", "Progressing"),
        Row(kind, "invalid spec", invalid, "False", "InvalidSpec",
            False, True, "Failed", "Degraded"),
        Row(kind, "its pass failed (the new generation not claimed)", failed, "False",
            "ReconcileFailed", False, True, "InProgress", "Progressing"),
        Row(kind, "its pass failed (the generation already observed)", failed_again, "False",
            "ReconcileFailed", False, True, "Failed", "Degraded"),
        Row(kind, "being deleted", healthy, "True", reason,
            False, False, "Terminating", "Progressing", deleting=True),
    ]  # fmt: skip


def rows() -> list[Row]:
    bound = _slot(BindingState.BOUND)
    waiting = WorkPlan(state=WorkState.WAITING, uri="x://1", waiting_for="team/bob")
    healthy_agent = _agent(slots=[bound])
    starting = condition("Ready", False, "SessionStarting", "the session pod is starting", 3)
    refused = condition(
        "Ready", False, "SessionFailedCreate", "pods violate PodSecurity restricted", 3
    )
    unresolved = TypeClosure(name="x", unknown_parents=["ghost"])
    return [
        # AgentSpec
        Row("AgentSpec", "bindings delivered", healthy_agent, "True", "BindingsDelivered",
            False, False, "Current", "Healthy"),
        Row("AgentSpec", "missing Tool", _agent(missing_tools=["ghost"]), "False",
            "MissingDependency", True, False, "InProgress", "Progressing"),
        Row("AgentSpec", "missing Resource or ResourceType",
            _agent(slots=[_slot(BindingState.ERROR, _MISSING)]), "False", "MissingDependency",
            True, False, "InProgress", "Progressing"),
        Row("AgentSpec", "waiting for a work hold", _agent(work=waiting), "False",
            "WaitingForWork", True, False, "InProgress", "Progressing"),
        Row("AgentSpec", "type incompatibility or ambiguity",
            _agent(slots=[_slot(BindingState.ERROR, _CONFLICT)]), "False", "BindingError",
            False, True, "Failed", "Degraded"),
        Row("AgentSpec", "a conflict and a missing object", _agent(
            slots=[_slot(BindingState.ERROR, _CONFLICT)], missing_tools=["ghost"]), "False",
            "BindingError", False, True, "Failed", "Degraded"),
        Row("AgentSpec", "spec.runtime drifted, relaunchGeneration unchanged", _drifted(),
            "True", "BindingsDelivered", False, False, "Current", "Healthy"),
        Row("AgentSpec", "idle and suspended by its idle policy (no pod)", _suspended(), "True",
            "Suspended", False, False, "Current", "Healthy"),
        Row("AgentSpec", "session starting (contract)", _session(starting, stalled=False),
            "False", "SessionStarting", True, False, "InProgress", "Progressing"),
        Row("AgentSpec", "session refused by policy (contract)", _session(refused, stalled=True),
            "False", "SessionFailedCreate", False, True, "Failed", "Degraded"),
        *_common("AgentSpec", healthy_agent, "BindingsDelivered"),
        # Tool
        Row("Tool", "static slots valid", _tool(BindingState.BOUND), "True", "Valid",
            False, False, "Current", "Healthy"),
        Row("Tool", "staticResource or slot type missing", _tool(BindingState.ERROR, _MISSING),
            "False", "MissingDependency", True, False, "InProgress", "Progressing"),
        Row("Tool", "a contextual slot's type missing", _tool_asking_for_an_unregistered_type(),
            "False", "MissingDependency", True, False, "InProgress", "Progressing"),
        Row("Tool", "staticResource of an incompatible type",
            _tool(BindingState.ERROR, _CONFLICT), "False", "InvalidStaticSlot",
            False, True, "Failed", "Degraded"),
        Row("Tool", _PENDING_ROW, _tool(BindingState.BOUND, rollout=_PENDING),
            "True", "Valid", True, False, "InProgress", "Progressing"),
        *_common("Tool", _tool(BindingState.BOUND), "Valid"),
        # Resource
        Row("Resource", "valid", _resource(), "True", "Valid", False, False, "Current", "Healthy"),
        Row("Resource", "type missing", _resource(Problem("no type 'x'", _MISSING)), "False",
            "MissingDependency", True, False, "InProgress", "Progressing"),
        Row("Resource", "URI scheme its type refuses", _resource(Problem("bad", _CONFLICT)),
            "False", "InvalidResource", False, True, "Failed", "Degraded"),
        Row("Resource", _PENDING_ROW, _resource(rollout=_PENDING), "True", "Valid",
            True, False, "InProgress", "Progressing"),
        Row("Resource", _REFUSED_ROW, _resource(rollout=_REFUSED), "True", "Valid",
            False, False, "Current", "Healthy"),
        Row("Resource", _DELIVERED_ROW, _resource(rollout=_DELIVERED), "True", "Valid",
            False, False, "Current", "Healthy"),
        Row("Resource", "a conflict while a change is pending", _resource(
            Problem("bad", _CONFLICT), rollout=_PENDING), "False", "InvalidResource",
            False, True, "Failed", "Degraded"),
        *_common("Resource", _resource(), "Valid"),
        # ResourceType
        Row("ResourceType", "valid", _type(TypeClosure(name="x")), "True", "Valid",
            False, False, "Current", "Healthy"),
        Row("ResourceType", "parent type missing", _type(unresolved), "False",
            "UnknownParentType", True, False, "InProgress", "Progressing"),
        Row("ResourceType", "parentTypes cycle", _type(TypeClosure(name="x", cycle=["x", "x"])),
            "False", "ParentCycle", False, True, "Failed", "Degraded"),
        Row("ResourceType", _PENDING_ROW, _type(TypeClosure(name="x"), _PENDING), "True", "Valid",
            True, False, "InProgress", "Progressing"),
        *_common("ResourceType", _type(TypeClosure(name="x")), "Valid"),
        # ResourceGrant
        Row("ResourceGrant", "observed", _grant(), "True", "Observed",
            False, False, "Current", "Healthy"),
        Row("ResourceGrant", _PENDING_ROW, _grant(_PENDING), "True", "Observed",
            True, False, "InProgress", "Progressing"),
        *_common("ResourceGrant", _grant(), "Observed"),
    ]  # fmt: skip
