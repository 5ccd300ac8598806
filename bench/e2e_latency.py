"""Figure 2, latency: one binding changed, and one Resource with 50 dependents changed, each
until every status and bindings ConfigMap shows it, against the baseline's round trip.

The controller's side is measured first, then the one-write baseline's (the same changes on its
agents, until its status shows them); samples are taken one at a time. The writes each change
cost are kept for figure 3 (bench/e2e_writes.py).
"""

from __future__ import annotations

import time
from typing import Any

from bench import e2e_objects as objs
from bench.e2e_env import BASELINE_UA, CM_SELECTOR, CONTROLLER_UA, Bench
from bench.e2e_procs import wait_settled
from bench.report import log, p50_p99, pct
from harness.kube import Watch, audit_mark

LATENCY_TARGET = 3.0


def run(b: Bench) -> None:
    """Both sides' samples, then the controller's p99 against the baseline round trip's."""
    r = b.report
    results: dict[str, dict[str, list[float]]] = {}
    audit: dict[str, Any] = {}
    for who, ns in (("controller", b.ctl_ns), ("baseline", b.base_ns)):
        results[who] = _side(b, who, ns, audit)
        res = results[who]
        log(
            f"latency {who}: binding p50 {pct(res['binding'], 0.5) * 1000:.0f} ms "
            f"p99 {pct(res['binding'], 0.99) * 1000:.0f} ms; fan-out p50 "
            f"{pct(res['fanout'], 0.5) * 1000:.0f} ms "
            f"p99 {pct(res['fanout'], 0.99) * 1000:.0f} ms"
        )
    r.data["latency"] = {k: {kk: sorted(vv) for kk, vv in v.items()} for k, v in results.items()}
    r.data["latency_writes"] = audit
    base_rt = results["baseline"]["binding"]
    base_p99 = pct(base_rt, 0.99)
    r.add("2 latency", f"baseline watch-to-patch round trip ({len(base_rt)})", p50_p99(base_rt))
    for kind, label in (
        ("binding", "one binding changed: status + ConfigMap"),
        ("fanout", f"Resource with {objs.TEAM_SIZE} dependents: all statuses + ConfigMaps"),
    ):
        xs = results["controller"][kind]
        r.times(
            "2 latency",
            f"{label} ({len(xs)})",
            p50_p99(xs),
            ratio=pct(xs, 0.99) / base_p99,
            limit=LATENCY_TARGET,
            of=" baseline",
            stat="p99 ",
        )
    bf = results["baseline"]["fanout"]
    cf = results["controller"]["fanout"]
    r.info(
        "2 latency",
        f"  baseline fan-out: {objs.TEAM_SIZE} status patches ({len(bf)})",
        p50_p99(bf),
        f"controller/baseline p99 {pct(cf, 0.99) / pct(bf, 0.99):.2f}x",
    )


def _side(b: Bench, who: str, ns: str, audit: dict[str, Any]) -> dict[str, list[float]]:
    """One side's binding samples, then its fan-out samples; their writes into ``audit``."""
    env, shape, ch = b.env, b.shape, b.changes
    agents = env.watch("agentspecs", ns)
    cms: Watch | None = None
    if who == "controller":
        cms = env.watch("configmaps", ns, CM_SELECTOR)
        wait_settled(b.controller, 0)
    res: dict[str, list[float]] = {"binding": [], "fanout": []}
    ua = CONTROLLER_UA if who == "controller" else BASELINE_UA

    # ---- one binding of one agent
    mark = audit_mark(env.audit_log)
    for _ in range(b.args.samples):
        i = b.rng.randrange(shape.agents)
        res["binding"].append(ch.binding_sample(ns, i, agents, cms))
        time.sleep(b.rng.uniform(0, 0.02))
    time.sleep(1.0)
    audit[f"{who} binding"] = b.audit_since(mark, ua, b.args.samples)

    # ---- one Resource with 50 dependents
    mark = audit_mark(env.audit_log)
    for _ in range(b.args.fanout_samples):
        team = b.rng.randrange(shape.teams)
        res["fanout"].append(ch.alias_sample(ns, team, shape, agents, cms))
        time.sleep(b.rng.uniform(0, 0.02))
    time.sleep(1.0)
    audit[f"{who} fanout"] = b.audit_since(mark, ua, b.args.fanout_samples)
    env.unwatch(agents)
    if cms is not None:
        env.unwatch(cms)
    return res
