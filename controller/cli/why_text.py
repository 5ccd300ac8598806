"""``bindery why``'s text and JSON: the explanation (:mod:`controller.domain.explain`) rendered
as one screen per agent, or as the JSON document itself. No decisions are made here."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def columns(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """``rows`` as lines whose columns line up (each padded to its widest cell; the last one
    is not padded)."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        indent + " ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


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
    for other in work.get("elsewhere") or []:
        out.append(f"  also held in the work scope by Lease {other}")
    if work.get("acquireNext"):
        out.append("  free: the controller acquires it for this agent on its next pass")
    if work.get("waitingFor") and work["state"] == "Waiting":
        out.append(
            f"  waiting for {work['waitingFor']}; the work binding is withheld from the "
            "session's document until then"
        )
    for i, claim in enumerate(work.get("queue") or [], 1):
        since = f" since {claim['since']}" if claim.get("since") else ""
        me = " (this agent)" if claim["agent"] == doc["agent"] else ""
        out.append(f"  queue {i}. {claim['agent']}{me}{since}")
    for other in work.get("blocked") or []:
        out.append(f"  not in line: {other} (its work binding is in error, so it cannot hold)")
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
    if health.get("phase") == "Suspended":
        out.append(f"  suspended: {health.get('message', '')}")
        return out
    said = f"{health.get('phase', '')} {health.get('reason', '')}".strip()
    detail = f": {health['message']}" if health.get("message") else ""
    out.append(f"  pod {pod}" + (f" ({said}{detail})" if said else ""))
    return out


DELIVERY_SAID = {
    "Confirmed": "taken in by the session",
    "Pending": "not yet acknowledged by the session",
    "Unverifiable": "delivered to a session that cannot acknowledge (no delivery sidecar)",
    "Refused": "refused by the session",
}


TO_BE_WRITTEN = "the controller writes it at its next pass"


def _delivery_text(doc: dict[str, Any]) -> list[str]:
    delivery = doc.get("delivery")
    if not delivery:
        return []
    if delivery.get("toBeWritten"):
        return ["", f"Bindings document: not written yet ({TO_BE_WRITTEN})"]
    short = str(delivery.get("digest", ""))[:19]
    said = DELIVERY_SAID.get(str(delivery.get("confirmation")), "")
    if not delivery.get("podUID") and delivery.get("confirmation") == "Confirmed":
        said = "no session process runs to take it"
    if delivery.get("message"):
        said += f": {delivery['message']}"
    written = f", written at {delivery['writtenAt']}" if delivery.get("writtenAt") else ""
    out = ["", f"Bindings document {short}{written}: {said}"]
    if delivery.get("podUID"):
        out.append(
            f"  pod uid {delivery['podUID']}: delivered "
            f"{str(delivery.get('deliveredDigest') or '-')[:19]}, applied "
            f"{str(delivery.get('appliedDigest') or '-')[:19]}"
        )
    return out


def _tail(doc: dict[str, Any]) -> list[str]:
    out: list[str] = []
    if doc.get("ignored"):
        out += ["", "Ignored (their spec does not parse; the controller ignores them too)"]
        out += [f"  {what}: {why}" for what, why in doc["ignored"].items()]
    events = doc.get("events") or []
    out += ["", f"Last events{'' if events else ': none'}"]
    out += columns([(e["time"], e["type"], e["reason"], e["message"]) for e in events])
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
        *_delivery_text(doc),
        *_tail(doc),
    ]
    return "\n".join(lines) + "\n"
