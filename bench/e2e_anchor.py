"""Figure 2a, the latency anchor: an AgentSpec binding change against a Deployment template
change handled by kube-controller-manager's Deployment controller (issue 18).

The two are interleaved (A, D, A, D ...) over ``--anchor-objects`` of each; a sample runs from
just before the spec PATCH to the receipt of the first watch event whose
``status.observedGeneration`` reaches the generation the PATCH made.
"""

from __future__ import annotations

import functools
import time

from bench import e2e_objects as objs
from bench.e2e_env import CONTROLLER_UA, Bench
from bench.e2e_procs import wait_settled
from bench.report import log, p50_p99, pct
from harness.kube import audit_mark, audit_writes, by_agent, summarize

ANCHOR_TARGET = 1.0


def run(b: Bench) -> None:
    """AgentSpec binding change vs Deployment template change, interleaved."""
    env, r, ch = b.env, b.report, b.changes
    n_obj, samples = b.args.anchor_objects, b.args.anchor_samples
    # Each change leaves work behind after its status (the Deployment's: pods, events,
    # ReplicaSet status; the controller's: its watch echoes): the gap lets it finish, so that
    # neither side's sample pays for the other's tail.
    gap = b.args.anchor_gap
    deps = env.watch_path(objs.deployments_path(b.anchor_ns))
    agents = env.watch("agentspecs", b.ctl_ns)
    current = deps.track(objs.current, n_obj)
    current.wait(b.args.timeout)
    deps.untrack(current)
    wait_settled(b.controller, 0)
    picks = b.rng.sample(range(b.shape.agents), min(n_obj, b.shape.agents))
    res: dict[str, list[float]] = {"agentspec": [], "deployment": []}
    started: dict[str, list[float]] = {"agentspec": [], "deployment": []}
    mark = audit_mark(env.audit_log)
    log(f"anchor: {samples} samples each, {n_obj} objects each, interleaved")
    t_start = time.monotonic()
    for k in range(samples):
        started["agentspec"].append(time.monotonic() - t_start)
        i = picks[k % len(picks)]
        res["agentspec"].append(
            ch.generation_sample(
                agents, objs.agent_name(i), functools.partial(ch.binding, b.ctl_ns, i)
            )
        )
        time.sleep(gap + b.rng.uniform(0, 0.02))
        name = objs.anchor_name(k % n_obj)
        started["deployment"].append(time.monotonic() - t_start)
        res["deployment"].append(
            ch.generation_sample(deps, name, functools.partial(ch.template, name))
        )
        time.sleep(gap + b.rng.uniform(0, 0.02))
    time.sleep(1.0)
    writes = audit_writes(env.audit_log, mark)
    per = {
        "controller": summarize(by_agent(writes, CONTROLLER_UA)),
        "kube-controller-manager": summarize(
            w for w in writes if w.namespace == b.anchor_ns and "controller-manager" in w.user_agent
        ),
    }
    env.unwatch(agents)
    env.unwatch(deps)
    a, d = res["agentspec"], res["deployment"]
    r.data["anchor"] = {
        "samples": {k: sorted(v) for k, v in res.items()},
        # in order: (seconds since the phase started, latency), to find what a slow one met
        "timeline": {k: list(zip(started[k], v, strict=True)) for k, v in res.items()},
        "objects": n_obj,
        "replicas": b.args.anchor_replicas,
        "gap_s": gap,
        "writes": per,
    }
    a50, a99, d50, d99 = pct(a, 0.5), pct(a, 0.99), pct(d, 0.5), pct(d, 0.99)
    r50, r99 = a50 / d50, a99 / d99
    log(
        f"anchor: AgentSpec p50 {a50 * 1000:.0f} p99 {a99 * 1000:.0f} ms; Deployment "
        f"p50 {d50 * 1000:.0f} p99 {d99 * 1000:.0f} ms; writes {per}"
    )
    dw = sum(per["kube-controller-manager"].values()) / max(1, len(d))
    r.info(
        "2 anchor",
        f"Deployment template change -> observedGeneration ({len(d)})",
        p50_p99(d),
        f"kube-controller-manager, {n_obj} Deployments of {b.args.anchor_replicas} "
        f"replica(s), no nodes; {dw:.2f} writes in the namespace per change; "
        f"{gap:g} s between samples",
    )
    r.against(
        "2 anchor",
        f"AgentSpec binding change -> observedGeneration ({len(a)})",
        p50_p99(a),
        "p50 and p99 <= Deployment's",
        measured=max(r50, r99),
        limit=ANCHOR_TARGET,
        note=f"p50 ratio {r50:.2f}x, p99 ratio {r99:.2f}x; interleaved with the Deployments",
    )
