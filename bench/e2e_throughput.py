"""Figure 1, throughput: the controller's time to bring every new agent Ready, against the
one-write baseline's on the same objects.

Each side starts (the one-write baseline, the same-writes baseline, then the controller) over
agents created while nothing ran; the clock runs from the spawn until the benchmark's own
watch has seen every agent Ready with ``observedGeneration`` current. The controller keeps
running for the scenarios after this one.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from bench import e2e_objects as objs
from bench.e2e_env import BASELINE_UA, CM_SELECTOR, CONTROLLER_UA, SAME_WRITES_UA, Bench
from bench.e2e_procs import ControllerProc, wait_settled
from bench.report import Report, log
from harness.kube import Watch, audit_mark, audit_writes, by_agent, summarize

THROUGHPUT_TARGET = 1.5


@dataclass
class Starts:
    """The clocked starts of the three sides, by side: controller, baseline, same-writes."""

    agents: int
    times: dict[str, dict[str, Any]] = field(default_factory=dict)
    writes: dict[str, dict[str, int]] = field(default_factory=dict)
    sizes: dict[str, dict[str, float]] = field(default_factory=dict)

    def drain_row(self, r: Report, other: str, suffix: str, more: str) -> None:
        """First Ready -> last Ready, the controller's against ``other``'s."""
        cd = self.times["controller"]["drain_s"]
        od = self.times[other]["drain_s"]
        r.info(
            "1 throughput",
            f"  of which first Ready -> last Ready{suffix}",
            f"{cd:.2f} s / {od:.2f} s",
            f"ratio {cd / od:.2f}x; {more}",
        )


def run(b: Bench) -> Starts:
    """Start each side over its agents in turn, then the rows against the one-write baseline."""
    n = b.shape.agents
    starts = Starts(n)
    runs = (
        ("baseline", b.base_ns),
        ("same-writes", b.same_ns),
        ("controller", b.ctl_ns),
    )
    for who, ns in runs:
        _clocked_start(b, starts, who, ns)
    times, writes = starts.times, starts.writes
    c, base = times["controller"]["total_s"], times["baseline"]["total_s"]
    r = b.report
    r.data["throughput"] = {"times": times, "writes": writes, "agents": n, "bytes": starts.sizes}
    r.times(
        "1 throughput",
        f"{n} agents to Ready: controller / baseline",
        f"{c:.2f} s / {base:.2f} s",
        ratio=c / base,
        limit=THROUGHPUT_TARGET,
    )
    cd = times["controller"]["drain_s"]
    bd = times["baseline"]["drain_s"]
    starts.drain_row(r, "baseline", "", f"{n / cd:.0f} vs {n / bd:.0f} agents/s")
    r.info(
        "1 throughput",
        "  of which spawn -> first Ready",
        f"{times['controller']['first_ready_s']:.2f} s / "
        f"{times['baseline']['first_ready_s']:.2f} s",
        f"controller LIST done at {times['controller']['started_log_s']:.2f} s",
    )
    cw = sum(writes["controller"].values())
    bw = sum(writes["baseline"].values())
    r.info(
        "1 throughput", "  API writes", f"{cw} / {bw}", f"{cw / n:.2f} vs {bw / n:.2f} per agent"
    )
    return starts


def _clocked_start(b: Bench, starts: Starts, who: str, ns: str) -> None:
    """Spawn one side over its namespace; clock it until every agent is Ready and current."""
    env, n = b.env, starts.agents
    agents = env.watch("agentspecs", ns)
    first = agents.track(objs.ready_current, 1)
    done = agents.track(objs.ready_current, n)
    mark = audit_mark(env.audit_log)
    cpu0 = env.cpu_snapshot()
    proc: Any
    if who == "baseline":
        proc = b.base = env.baseline(ns).start()
    elif who == "same-writes":
        proc = b.same = env.baseline(ns, writes="same").start()
    else:
        proc = b.ctl = env.controller(ns, "main").start()
    prof = b.profile(proc, f"throughput-{who}")
    end = done.wait(b.args.timeout)
    cpu = env.cpu_since(cpu0, {"client": proc.cpu_seconds()})
    b.unprofile(prof)
    proc.check()
    spawn = proc.spawned_at
    times: dict[str, Any] = {
        "total_s": end - spawn,
        "first_ready_s": (first.done_at or end) - spawn,
        "drain_s": end - (first.done_at or end),
    }
    if who == "controller":
        assert isinstance(proc, ControllerProc)
        times["started_log_s"] = proc.started_at() or float("nan")
        settled = wait_settled(proc, n)
        times["settled_s"] = settled.settled_s
    time.sleep(1.0)
    ua = {"controller": CONTROLLER_UA, "baseline": BASELINE_UA}.get(who, SAME_WRITES_UA)
    starts.writes[who] = summarize(by_agent(audit_writes(env.audit_log, mark), ua))
    starts.sizes[who] = _sizes(b, agents, ns)
    env.unwatch(agents)
    times["cpu"] = cpu
    starts.times[who] = times
    log(f"throughput {who}: {times} writes {starts.writes[who]}")


def _sizes(b: Bench, agents: Watch, ns: str) -> dict[str, float]:
    """Mean bytes of an agent's status and of its bindings.json: both sides' writes alike?"""
    bodies = [agents.get(objs.agent_name(i)) or {} for i in range(b.shape.agents)]
    status = [len(json.dumps(body.get("status") or {})) for body in bodies]
    objects = [len(json.dumps(body)) for body in bodies]
    cms = b.env.kube.list_all(objs.path("configmaps", ns), CM_SELECTOR)
    docs = [len((c.get("data") or {}).get("bindings.json", "")) for c in cms]
    cm_objects = [len(json.dumps(c)) for c in cms]
    b.report.data.setdefault("examples", {})[ns] = {
        "agent": bodies[0],
        "bindings_json": next(
            (
                (c.get("data") or {}).get("bindings.json")
                for c in cms
                if c["metadata"]["name"] == f"{objs.agent_name(0)}-bindings"
            ),
            None,
        ),
    }
    return {
        "status": sum(status) / max(1, len(status)),
        "bindings_json": sum(docs) / max(1, len(docs)),
        "config_maps": len(docs),
        # what a write's response carries back (managedFields included)
        "agent_object": sum(objects) / max(1, len(objects)),
        "config_map_object": sum(cm_objects) / max(1, len(cm_objects)),
    }
