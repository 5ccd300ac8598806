"""Why an agent is (not) Ready: the controller's own decisions, recomputed from observed objects.

``bindery why`` lists the live objects (controller/cli/why.py) and hands them here as plain API
bodies. This module feeds them through the same engine the controller runs: the registry and its
slot resolution, the work plan's inputs gathered by :func:`controller.domain.work_inputs.
work_inputs` and decided by :func:`controller.domain.work.plan_work`, the launch plan, the
acknowledgement of the current bindings document, and the status builder. What comes out is the
explanation as data (a JSON-ready document): what is true of the agent, and the status the
controller writes for that world. Rendering it as text is the command line's
(controller/cli/why_text.py). No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain import status as status_builder
from controller.domain.delivery import bindings_document, current_stands, render, stamp
from controller.domain.grants import parse_grant
from controller.domain.launch import launch_record, launched_from_annotations, plan_session
from controller.domain.models import AgentObject, meta_from_body, parse_object
from controller.domain.registry import Registry
from controller.domain.results import AgentResolution
from controller.domain.session_health import session_health, suspended_health
from controller.domain.status import failure
from controller.domain.work import Claim, Hold, WorkPlan, WorkScope, WorkState
from controller.domain.work_inputs import (
    WorkInputs,
    WorkWorld,
    blocked,
    desired_uri,
    holds_in_question,
    work_inputs,
)

LAST_EVENTS = 5


@dataclass(frozen=True)
class Observed:
    """What ``bindery why`` read from the API server, as plain bodies."""

    agent: dict[str, Any]
    types: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)
    """The other AgentSpecs of the agent's line: its namespace's (every namespace's that could
    be read under the cluster work scope): the rivals for its work URI, and the holders."""
    holds: list[Hold] = field(default_factory=list)
    """The work holds in the agent's namespace, and those of the cluster-wide work scope."""
    session: dict[str, Any] | None = None
    """The agent's session StatefulSet, if any."""
    pod: dict[str, Any] | None = None
    """The session's pod (the one its StatefulSet made), if any."""
    acknowledging: bool = False
    """The pod has the delivery sidecar: it can acknowledge documents."""
    ack_lease: dict[str, Any] | None = None
    """The agent's acknowledgement Lease, if any."""
    bindings: str | None = None
    """The document the agent's bindings ConfigMap carries ("" without one; None when it could
    not be read: the document the agent's status records is taken to be in place)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events about the agent (events.k8s.io or core shape)."""
    grants: list[dict[str, Any]] = field(default_factory=list)
    """The ResourceGrants that may admit the agent's namespace (of every namespace it can read)."""
    namespace_labels: dict[str, str] | None = None
    """The labels of the agent's Namespace (a grant's namespaceSelector reads them); None when
    they could not be read."""
    scope: WorkScope = WorkScope.NAMESPACE
    """The controller's work scope (its ``--work-scope``)."""
    hold_namespace: str = ""
    """Where holds live in the cluster work scope (the controller's ``--work-hold-namespace``)."""
    now: datetime | None = None
    """When the objects were read (None: acknowledgements are never overdue)."""
    acknowledge_timeout: float = 60.0
    """Seconds after which an unacknowledged document is overdue (the controller's
    ``--acknowledge-timeout-seconds``)."""
    unacknowledged_release: float = 120.0
    """Seconds after which a hold withdrawn from a session that cannot acknowledge is released
    (the controller's ``--unacknowledged-release-seconds``)."""


def _key(body: dict[str, Any]) -> str:
    return meta_from_body(body).key


def _refusal(exc: Exception) -> str:
    """Why the controller's models refuse a body, in one line: the words the controller's
    status uses (:func:`failure.refusal`)."""
    return failure.refusal(exc)


PARSE_ERRORS = (Exception,)
"""What parsing a body can raise for a spec the schema let through: anything (pydantic's
validation errors, or what a parser raises for a value such as a quantity it cannot take). As
in the controller's intake, any of them refuses that spec, and nothing else."""


def build_registry(observed: Observed) -> tuple[Registry, dict[str, str]]:
    """A registry of every observed object, as the controller builds it; unparsable ones are
    left out (as the controller does) and returned by ``kind key`` with the reason."""
    registry = Registry()
    rejected: dict[str, str] = {}
    by_kind = (
        ("ResourceType", observed.types),
        ("Resource", observed.resources),
        ("Tool", observed.tools),
        ("AgentSpec", [observed.agent, *observed.agents]),
    )
    for kind, bodies in by_kind:
        for body in bodies:
            try:
                obj = parse_object(kind, body)
            except PARSE_ERRORS as exc:
                rejected[f"{kind} {_key(body)}"] = _refusal(exc)
                continue
            registry.upsert(obj)
    for body in observed.grants:
        try:
            grant = parse_grant(body)
        except PARSE_ERRORS as exc:
            rejected[f"ResourceGrant {_key(body)}"] = _refusal(exc)
            continue
        registry.upsert_grant(grant)
    if observed.namespace_labels is not None:
        namespace = meta_from_body(observed.agent).namespace
        registry.upsert_namespace(namespace, observed.namespace_labels)
    return registry, rejected


def _event_time(event: dict[str, Any]) -> str:
    return str(
        event.get("eventTime")
        or event.get("lastTimestamp")
        or event.get("deprecatedLastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _events(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    latest = sorted(events, key=_event_time)[-LAST_EVENTS:]
    return [
        {
            "time": _event_time(e),
            "type": str(e.get("type", "")),
            "reason": str(e.get("reason", "")),
            "message": str(e.get("note") or e.get("message") or ""),
        }
        for e in latest
    ]


def gather_work(
    agent: AgentObject,
    resolution: AgentResolution,
    observed: Observed,
    registry: Registry,
) -> tuple[WorkInputs, WorkWorld]:
    """The inputs of the agent's work plan from the listed objects, through the function the
    controller gathers them with from its store and indexes; and the world they came from."""
    bodies = {_key(b): b for b in [observed.agent, *observed.agents]}

    def status_of(key: str) -> Mapping[str, Any]:
        return (bodies.get(key) or {}).get("status") or {}

    own = sorted(
        (h for h in observed.holds if h.holder_uid == agent.meta.uid),
        key=lambda h: (h.namespace, h.uri),
    )
    uri = desired_uri(resolution, own)
    line: list[str] = []
    stuck: list[str] = []
    for key in sorted(bodies) if uri else []:
        other = registry.agent(key)
        if other is None or (wants := other.spec.work()) is None or wants.uri != uri:
            continue
        if observed.scope is WorkScope.NAMESPACE and other.meta.namespace != agent.meta.namespace:
            continue
        line.append(key)
        if key != agent.meta.key and blocked(registry.resolve(key)):
            stuck.append(key)
    world = WorkWorld(
        scope=observed.scope,
        hold_namespace=observed.hold_namespace,
        holds=[h for h in observed.holds if h.uri == uri] if uri else [],
        line=line,
        blocked=stuck,
        status_of=status_of,
    )
    uids = {k: str((b.get("metadata") or {}).get("uid", "")) for k, b in bodies.items()}
    asked = holds_in_question(
        world, namespace=agent.meta.namespace, agent_uid=agent.meta.uid, uri=uri
    )
    inputs = work_inputs(
        agent=agent.meta.key,
        agent_uid=agent.meta.uid,
        resolution=resolution,
        own_holds=own,
        old=status_of(agent.meta.key),
        world=world,
        live=[h for h in asked if uids.get(h.holder) == h.holder_uid],
    )
    return inputs, world


def _work(inputs: WorkInputs, plan: WorkPlan, world: WorkWorld) -> dict[str, Any] | None:
    """What the work plan was decided from, and what it says."""
    if not plan.uri:
        return None
    hold = inputs.hold
    holder = hold.holder if hold else next((h.holder for h in inputs.elsewhere), "")
    queue = list(inputs.rivals)
    if plan.state is not WorkState.WORKING:
        queue.append(inputs.me)
    return {
        "uri": plan.uri,
        "hold": "/".join(p for p in (hold.namespace, hold.name) if p) if hold else "",
        "holder": holder,
        "holderExists": inputs.holder_exists or bool(inputs.elsewhere),
        "elsewhere": [f"{h.namespace}/{h.name} ({h.holder})" for h in inputs.elsewhere],
        "state": plan.state.value,
        "waitingFor": plan.waiting_for,
        "acquireNext": plan.acquire,
        "queue": [
            {"agent": c.agent, "since": c.waiting_since} for c in sorted(queue, key=Claim.order)
        ],
        "blocked": sorted(world.blocked),
    }


def _session(
    agent: AgentObject, observed: Observed, plan: WorkPlan
) -> tuple[status_builder.SessionView | None, dict[str, Any] | None]:
    """The session as the controller sees it: its launch record (in the agent's status), the
    workload's annotations and replicas (zero: suspended by its idle policy), and the pod's
    health."""
    runtime = agent.spec.runtime
    if runtime is None:
        return None, None
    workload = observed.session or {}
    template = (workload.get("spec") or {}).get("template") or {}
    annotated = launched_from_annotations((template.get("metadata") or {}).get("annotations") or {})
    record = launch_record(observed.agent.get("status") or {})
    launch = plan_session(
        runtime,
        agent.spec.relaunch_generation,
        record=record,
        annotated=annotated,
        exists=observed.session is not None,
    )
    policy = runtime.idle.suspend_after_seconds if runtime.idle else None
    replicas = (workload.get("spec") or {}).get("replicas", 1)
    # A suspended session stays suspended until the agent holds its work (suspend.decide).
    suspended = observed.session is not None and replicas == 0 and not plan.deliver
    if suspended and policy is not None:
        health = suspended_health(observed.pod, policy)
    elif observed.session is not None:
        health = session_health(observed.pod)
    else:
        health = None
    pod_md = (observed.pod or {}).get("metadata") or {}
    from_pod = launched_from_annotations(pod_md.get("annotations") or {})
    running = from_pod.generation if from_pod and health and health.running else None
    view = status_builder.SessionView(
        launch,
        running,
        launch.launched_hash,
        launch.launched_at,
        health,
        suspend_after=policy,
    )
    explained = {
        "statefulSet": (workload.get("metadata") or {}).get("name", ""),
        "exists": observed.session is not None,
        "replicas": replicas if observed.session is not None else None,
        "action": launch.action.value,
        "desiredGeneration": launch.desired_generation,
        "launchedGeneration": launch.observed_generation,
        "podGeneration": from_pod.generation if from_pod else None,
        "desiredTrajectoryHash": launch.desired_hash,
        "launchedTrajectoryHash": launch.launched_hash,
        "drift": launch.drift,
        "notice": launch.notice.value,
        "launchedAt": launch.launched_at,
        "pod": pod_md.get("name", ""),
        "health": health.as_status() if health else None,
    }
    return view, explained


UNWRITTEN = "unwritten"
"""The nonce ``bindery why`` decides a document the controller has yet to write by (the
controller draws hexadecimal ones): its digest matches no acknowledgement, and is not shown."""


def delivery_view(
    *,
    document_digest: str,
    written_at: str,
    since_write: float,
    timeout: float,
    has_runtime: bool,
    pod: ack.SessionPod | None,
    lease_annotations: Mapping[str, str] | None,
    releasing: tuple[str, ...],
) -> ack.DeliveryView:
    """Where the session stands with the document ``document_digest``, from its pod and its
    acknowledgement Lease's annotations (the decision the controller's acknowledgements make)."""
    if not has_runtime:
        return ack.DeliveryView(
            document_digest, written_at, ack.Confirmation.CONFIRMED, releasing=releasing
        )
    record = (
        ack.Acknowledgement.from_annotations(dict(lease_annotations))
        if lease_annotations is not None
        else None
    )
    if record is not None and (pod is None or record.pod_uid != pod.uid):
        record = None
    confirmation = ack.confirmation(pod, record, document_digest)
    return ack.DeliveryView(
        document_digest,
        written_at,
        confirmation,
        record=record,
        pod_uid=pod.uid if pod else "",
        overdue=confirmation is ack.Confirmation.PENDING and since_write >= timeout,
        releasing=releasing,
    )


def _delivery(
    agent: AgentObject,
    resolution: AgentResolution,
    inputs: WorkInputs,
    plan: WorkPlan,
    observed: Observed,
) -> tuple[ack.DeliveryView, bool]:
    """The acknowledgement of the document the controller delivers for this plan, and whether
    that document is in place (else the controller's next pass writes it)."""
    fence = next(
        (h for h in inputs.own_holds if h.uri == plan.uri and h.namespace == inputs.location),
        next((h for h in inputs.own_holds if h.uri == plan.uri), None),
    )
    document = bindings_document(
        agent, resolution, deliver_work=plan.deliver, fence=fence if plan.deliver else None
    )
    before = (observed.agent.get("status") or {}).get("delivery") or {}
    recorded = str(before.get("digest") or "")
    # The document in place, when it is this one as the controller wrote it (taken to be, when
    # the ConfigMap could not be read); else the controller writes it anew under a nonce not
    # drawn yet, which nothing can have acknowledged.
    in_place = observed.bindings
    stands = bool(recorded) if in_place is None else current_stands(in_place, document, recorded)
    digest = recorded if stands else ack.digest(render(stamp(document, UNWRITTEN)))
    written_at = str(before.get("writtenAt") or "") if before.get("digest") == digest else ""
    since = ack.seconds_since(written_at, observed.now) if observed.now and written_at else 0.0
    pod = None
    if observed.pod is not None:
        phase = (observed.pod.get("status") or {}).get("phase")
        pod = ack.SessionPod(
            uid=str((observed.pod.get("metadata") or {}).get("uid", "")),
            running=phase not in ("Succeeded", "Failed"),
            acknowledging=observed.acknowledging,
        )
    lease = observed.ack_lease
    view = delivery_view(
        document_digest=digest,
        written_at=written_at,
        since_write=since,
        timeout=observed.acknowledge_timeout,
        has_runtime=agent.spec.runtime is not None,
        pod=pod,
        lease_annotations=((lease.get("metadata") or {}).get("annotations") or {})
        if lease is not None
        else None,
        releasing=tuple(h.uri for h in plan.release),
    )
    # The controller releases the withdrawn holds in the same pass once the session let go.
    if view.confirmation is ack.Confirmation.CONFIRMED or (
        view.confirmation is ack.Confirmation.UNVERIFIABLE
        and since >= observed.unacknowledged_release
    ):
        return replace(view, releasing=()), stands
    return view, stands


def explain(observed: Observed) -> dict[str, Any]:
    """The explanation of one agent as a JSON-ready document (``bindery why -o json``)."""
    body = observed.agent
    md = body.get("metadata") or {}
    key = _key(body)
    written = body.get("status") or {}
    generation = int(md.get("generation") or 0)
    doc: dict[str, Any] = {
        "agent": key,
        "generation": generation,
        "controller": {
            "observedGeneration": written.get("observedGeneration"),
            "state": written.get("state"),
            "conditions": [
                {k: c.get(k, "") for k in ("type", "status", "reason", "message")}
                for c in written.get("conditions") or []
            ],
        },
    }
    registry, rejected = build_registry(observed)
    doc["ignored"] = dict(sorted(rejected.items()))
    agent = registry.agent(key)
    if agent is None:
        doc["specError"] = rejected.get(f"AgentSpec {key}", "not parsed")
        doc["state"] = "Error"
        doc["events"] = _events(observed.events)
        return doc
    resolution = registry.resolve(key)
    inputs, world = gather_work(agent, resolution, observed, registry)
    plan = inputs.plan()
    session, session_doc = _session(agent, observed, plan)
    delivery, in_place = _delivery(agent, resolution, inputs, plan, observed)
    expected = status_builder.agent_status(
        generation=generation,
        resolution=resolution,
        work=plan,
        waiting_since=str((written.get("work") or {}).get("since") or ""),
        config_map=names.bindings_config_map_name(agent.meta.name),
        session=session,
        old=written,
        now="",
        delivery=delivery,
    )
    doc["state"] = expected["state"]
    doc["conditions"] = [
        {k: c.get(k, "") for k in ("type", "status", "reason", "message")}
        for c in expected["conditions"]
    ]
    doc["errors"] = resolution.errors
    doc["bindings"] = expected["bindings"]
    doc["missingTools"] = list(resolution.missing_tools)
    doc["work"] = _work(inputs, plan, world)
    doc["session"] = session_doc
    doc["delivery"] = (
        {**expected["delivery"], "confirmation": delivery.confirmation.value}
        if "delivery" in expected
        else None
    )
    if doc["delivery"] is not None and not in_place:  # its digest is not drawn yet
        doc["delivery"].pop("digest", None)
        doc["delivery"]["toBeWritten"] = True
    doc["events"] = _events(observed.events)
    return doc
