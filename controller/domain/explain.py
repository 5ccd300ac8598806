"""Why an agent is (not) Ready: the controller's own decision, recomputed from observed objects.

``bindery why`` lists the live objects (controller/cli/why.py) and hands them here as plain API
bodies. This module feeds them through the same engine the controller runs (the registry and its
slot resolution, the work-hold plan, the launch plan, the status builder), so the explanation can
not disagree with the status the controller writes, and renders it as one screen of text or as
JSON. No I/O: a golden test pins both renderings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from controller.domain import status as status_builder
from controller.domain.grants import parse_grant
from controller.domain.launch import launch_record, launched_from_annotations, plan_session
from controller.domain.models import AgentObject, meta_from_body, parse_object
from controller.domain.registry import Registry
from controller.domain.results import BindingState
from controller.domain.session_health import session_health
from controller.domain.work import Claim, Hold, WorkState, plan_work

LAST_EVENTS = 5


@dataclass(frozen=True)
class Observed:
    """What ``bindery why`` read from the API server, as plain bodies."""

    agent: dict[str, Any]
    types: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    agents: list[dict[str, Any]] = field(default_factory=list)
    """The other AgentSpecs in the agent's namespace: the rivals for its work URI."""
    holds: list[Hold] = field(default_factory=list)
    """The work holds in the agent's namespace, and those of the cluster-wide work scope."""
    session: dict[str, Any] | None = None
    """The agent's session StatefulSet, if any."""
    pod: dict[str, Any] | None = None
    """The session's pod, if any."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events about the agent (events.k8s.io or core shape)."""
    grants: list[dict[str, Any]] = field(default_factory=list)
    """The ResourceGrants that may admit the agent's namespace (of every namespace it can read)."""
    namespace_labels: dict[str, str] | None = None
    """The labels of the agent's Namespace (a grant's namespaceSelector reads them); None when
    they could not be read."""


def _key(body: dict[str, Any]) -> str:
    return meta_from_body(body).key


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"spec.{where}: {err.get('msg', '')}" if where else str(err.get("msg", ""))


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
            except ValidationError as exc:
                rejected[f"{kind} {_key(body)}"] = _first_error(exc)
                continue
            registry.upsert(obj)
    for body in observed.grants:
        try:
            grant = parse_grant(body)
        except ValidationError as exc:
            rejected[f"ResourceGrant {_key(body)}"] = _first_error(exc)
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


def _work(
    agent: AgentObject, key: str, observed: Observed, registry: Registry, desired: str | None
) -> tuple[Any, dict[str, Any] | None]:
    """The work-hold plan the controller would make now, and its explanation."""
    holds = {h.uri: h for h in observed.holds}
    hold = holds.get(desired) if desired else None
    bodies = {_key(b): b for b in [observed.agent, *observed.agents]}

    def since(agent_key: str) -> str:
        st = (bodies.get(agent_key) or {}).get("status") or {}
        return str((st.get("work") or {}).get("since") or "")

    holder_exists = False
    if hold is not None:
        holder = registry.agent(hold.holder)
        holder_exists = holder is not None and holder.meta.uid == hold.holder_uid
    wanting = sorted(
        k
        for k, b in bodies.items()
        if k != key
        and (hold is None or k != hold.holder)
        and any(
            r.get("name") == "work" and r.get("uri") == desired
            for r in (b.get("spec") or {}).get("resources") or []
        )
    )
    plan = plan_work(
        agent=key,
        agent_uid=agent.meta.uid,
        desired_uri=desired,
        holds={desired: hold} if desired and hold else {},
        own_holds=[h for h in observed.holds if h.holder_uid == agent.meta.uid],
        holder_exists=holder_exists,
        me=Claim(key, since(key)),
        rivals=[Claim(k, since(k)) for k in wanting],
    )
    if not plan.uri:
        return plan, None
    queue = [Claim(k, since(k)) for k in wanting]
    if plan.state is not WorkState.WORKING:
        queue.append(Claim(key, since(key)))
    explained: dict[str, Any] = {
        "uri": plan.uri,
        "hold": hold.name if hold else "",
        "holder": hold.holder if hold else "",
        "holderExists": holder_exists,
        "state": plan.state.value,
        "waitingFor": plan.waiting_for,
        "acquireNext": plan.acquire,
        "queue": [
            {"agent": c.agent, "since": c.waiting_since} for c in sorted(queue, key=Claim.order)
        ],
    }
    return plan, explained


def _session(agent: AgentObject, observed: Observed) -> tuple[Any, dict[str, Any] | None]:
    """The session as the controller sees it: its launch record (in the agent's status), the
    workload's annotations, and the pod's health."""
    runtime = agent.spec.runtime
    if runtime is None:
        return None, None
    template = ((observed.session or {}).get("spec") or {}).get("template") or {}
    annotated = launched_from_annotations((template.get("metadata") or {}).get("annotations") or {})
    record = launch_record(observed.agent.get("status") or {})
    plan = plan_session(
        runtime,
        agent.spec.relaunch_generation,
        record=record,
        annotated=annotated,
        exists=observed.session is not None,
    )
    health = session_health(observed.pod) if observed.session is not None else None
    pod_md = (observed.pod or {}).get("metadata") or {}
    from_pod = launched_from_annotations(pod_md.get("annotations") or {})
    running = from_pod.generation if from_pod and health and health.running else None
    launched_at = plan.launched_at
    view = status_builder.SessionView(plan, running, plan.launched_hash, launched_at, health)
    explained = {
        "statefulSet": (observed.session or {}).get("metadata", {}).get("name", ""),
        "exists": observed.session is not None,
        "action": plan.action.value,
        "desiredGeneration": plan.desired_generation,
        "launchedGeneration": plan.observed_generation,
        "podGeneration": from_pod.generation if from_pod else None,
        "desiredTrajectoryHash": plan.desired_hash,
        "launchedTrajectoryHash": plan.launched_hash,
        "drift": plan.drift,
        "notice": plan.notice.value,
        "launchedAt": launched_at,
        "pod": pod_md.get("name", ""),
        "health": health.as_status() if health else None,
    }
    return view, explained


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
    work_result = next((d for d in resolution.direct if d.name == "work"), None)
    desired = (
        work_result.uri
        if work_result is not None and work_result.state is not BindingState.ERROR
        else None
    )
    plan, work = _work(agent, key, observed, registry, desired)
    session, session_doc = _session(agent, observed)
    expected = status_builder.agent_status(
        generation=generation,
        resolution=resolution,
        work=plan,
        waiting_since=str((written.get("work") or {}).get("since") or ""),
        config_map=f"{agent.meta.name}-bindings",
        session=session,
        old=written,
        now="",
    )
    doc["state"] = expected["state"]
    doc["conditions"] = [
        {k: c.get(k, "") for k in ("type", "status", "reason", "message")}
        for c in expected["conditions"]
    ]
    doc["errors"] = resolution.errors
    doc["bindings"] = expected["bindings"]
    doc["missingTools"] = list(resolution.missing_tools)
    doc["work"] = work
    doc["session"] = session_doc
    doc["events"] = _events(observed.events)
    return doc


def to_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------------------- text


def _condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next((c for c in conditions if c.get("type") == type_), {})


def _resource_text(row: dict[str, Any]) -> str:
    res = row.get("resource") or {}
    if not res:
        return ""
    where = f"Resource {res['namespace']}/{res['name']}" if res.get("name") else "direct only"
    alias = f" alias {res['alias']}" if res.get("alias") else ""
    grant = f", shared by ResourceGrant {res['grant']}" if res.get("grant") else ""
    return f"{res.get('uri', '')} ({res.get('type', '')}{alias}; {where}{grant})"


def _header(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    ready = _condition(doc.get("conditions") or [], "Ready")
    ctl = doc.get("controller") or {}
    ctl_ready = _condition(ctl.get("conditions") or [], "Ready")
    out.append(f"AgentSpec {doc['agent']} (generation {doc['generation']})")
    out.append(
        f"  state {doc.get('state')}"
        + (f", Ready={ready.get('status')} {ready.get('reason')}" if ready else "")
    )
    seen = ctl.get("observedGeneration")
    if not isinstance(seen, int) or seen < 0:  # the CRD's default status says -1 until then
        out.append("  controller: has not written a status yet")
    else:
        lag = "" if seen == doc["generation"] else f" (behind: generation {doc['generation']})"
        out.append(
            f"  controller: state {ctl.get('state')}, Ready={ctl_ready.get('status', '?')} "
            f"{ctl_ready.get('reason', '')} at generation {seen}{lag}"
        )
    if "specError" in doc:
        out.append(f"  spec rejected: {doc['specError']}")
    errors = doc.get("errors") or []
    if errors:
        out.append(f"  {len(errors)} error(s), each shown below with its binding or tool")
    elif ready.get("message"):
        out.append(f"  {ready['message']}")
    return out


def _direct(doc: dict[str, Any]) -> list[str]:
    direct = [b for b in doc.get("bindings") or [] if b.get("mode") == "direct"]
    out = ["", "Direct bindings" + ("" if direct else ": none")]
    for row in direct:
        out.append(f"  {row['name']:<12} {row['tag']:<20} {row['state']:<8} {row['uri']}")
        if row.get("resource", {}).get("name"):
            res = row["resource"]
            out.append(f"      = Resource {res['namespace']}/{res['name']}")
        if row.get("message"):
            out.append(f"      {row['message']}")
    return out


def _slots(doc: dict[str, Any]) -> list[str]:
    slots = [b for b in doc.get("bindings") or [] if b.get("mode") != "direct"]
    out = ["", "Tool slots" + ("" if slots or doc.get("missingTools") else ": none")]
    for row in slots:
        required = "" if row.get("required", True) else ", optional"
        out.append(
            f"  {row['name']:<24} {row['mode']:<10} {row['access']:<10} "
            f"{row['resourceType']}{required}: {row['state']}"
        )
        bound = _resource_text(row)
        if bound:
            out.append(f"      -> {bound}")
        if row.get("message") and row["state"] != "Bound":
            out.append(f"      {row['message']}")
        for cand in row.get("candidates") or []:
            alias = f" alias {cand['alias']}" if cand.get("alias") else ""
            out.append(f"      candidate {cand['uri']} ({cand['type']}{alias}): {cand['reason']}")
    for tool in doc.get("missingTools") or []:
        out.append(f"  {tool:<24} missing: no Tool of that name in the agent's namespace")
    return out


def _work_text(doc: dict[str, Any]) -> list[str]:
    work = doc.get("work")
    if not work:
        return ["", "Work: none" + ("" if "specError" in doc else " (Idle)")]
    holder = work.get("holder") or "nobody"
    hold = f" (Lease {work['hold']})" if work.get("hold") else ""
    out = ["", f"Work {work['uri']}: {work['state']}", f"  held by {holder}{hold}"]
    if work.get("holder") and not work.get("holderExists"):
        out.append("  the holder is gone: the hold is reclaimed on the next pass")
    if work.get("acquireNext"):
        out.append("  free: the controller acquires it for this agent on its next pass")
    if work.get("waitingFor") and work["state"] == "Waiting":
        out.append(f"  waiting for {work['waitingFor']}")
    for i, claim in enumerate(work.get("queue") or [], 1):
        since = f" since {claim['since']}" if claim.get("since") else ""
        me = " (this agent)" if claim["agent"] == doc["agent"] else ""
        out.append(f"  queue {i}. {claim['agent']}{me}{since}")
    return out


def _session_text(doc: dict[str, Any]) -> list[str]:
    session = doc.get("session")
    if session is None:
        if "specError" in doc:
            return []
        return ["", "Session: none (no spec.runtime; bindings are in the ConfigMap only)"]
    name = session["statefulSet"] or "(not created yet)"
    launched = session["launchedGeneration"]
    out = [
        "",
        f"Session StatefulSet {name}: {session['action']}",
        f"  launch generation {'-' if launched is None else launched}/"
        f"{session['desiredGeneration']} (launched/desired)"
        + (f", launched at {session['launchedAt']}" if session.get("launchedAt") else ""),
    ]
    if session["drift"]:
        out.append(
            f"  drift: spec.runtime is {session['desiredTrajectoryHash'][:19]}, the session "
            f"runs {str(session['launchedTrajectoryHash'])[:19]}; change "
            "spec.relaunchGeneration to relaunch"
        )
    if session.get("notice"):
        out.append(
            f"  launch record: {session['notice']} (the workload's launch annotations are not "
            "what Bindery recorded launching; they are reported, never obeyed)"
        )
    pod = session.get("pod") or "none"
    health = session.get("health") or {}
    said = f"{health.get('phase', '')} {health.get('reason', '')}".strip()
    detail = f": {health['message']}" if health.get("message") else ""
    out.append(f"  pod {pod}" + (f" ({said}{detail})" if said else ""))
    return out


def _tail(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if doc.get("ignored"):
        out += ["", "Ignored (their spec does not parse; the controller ignores them too)"]
        out += [f"  {what}: {why}" for what, why in doc["ignored"].items()]
    events = doc.get("events") or []
    out += ["", f"Last events{'' if events else ': none'}"]
    out += [f"  {e['time']:<27} {e['type']:<7} {e['reason']:<14} {e['message']}" for e in events]
    return out


def render_text(doc: dict[str, Any]) -> str:
    """One screen per agent: what resolved, what did not and why, who holds the work, the
    session's launch, and the last events."""
    lines = [
        *_header(doc),
        *_direct(doc),
        *_slots(doc),
        *_work_text(doc),
        *_session_text(doc),
        *_tail(doc),
    ]
    return "\n".join(lines) + "\n"
