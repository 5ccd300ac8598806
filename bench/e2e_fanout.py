"""Figure 2b, fan-out against the same writes: a Resource with 50 dependents changed, until all
50 statuses and ConfigMaps show it, the controller interleaved with the same-writes baseline's
own fan-out (50 ConfigMap patches + 50 status patches), issue 18.
"""

from __future__ import annotations

import time

from bench import e2e_objects as objs
from bench.e2e_env import CM_SELECTOR, CONTROLLER_UA, SAME_WRITES_UA, Bench
from bench.e2e_procs import wait_settled
from bench.report import log, p50_p99, pct
from harness.kube import audit_mark

FANOUT_SAME_TARGET = 1.2


def run(b: Bench) -> None:
    """``--fanout-samples`` on each side in turn, then the controller's p99 against the
    same-writes baseline's."""
    env, shape, r, ch = b.env, b.shape, b.report, b.changes
    if b.same is None:
        raise RuntimeError(
            "the same-writes baseline is not running: the throughput scenario starts it"
        )
    sides = {
        who: (
            ns,
            env.watch("agentspecs", ns),
            env.watch("configmaps", ns, CM_SELECTOR),
        )
        for who, ns in (("controller", b.ctl_ns), ("same-writes", b.same_ns))
    }
    wait_settled(b.controller, 0)
    samples = b.args.fanout_samples
    res: dict[str, list[float]] = {"controller": [], "same-writes": []}
    mark = audit_mark(env.audit_log)
    for _ in range(samples):
        for who, (ns, agents, cms) in sides.items():
            team = b.rng.randrange(shape.teams)
            res[who].append(ch.alias_sample(ns, team, shape, agents, cms))
            time.sleep(b.rng.uniform(0, 0.02))
    time.sleep(1.0)
    audit = {
        "controller": b.audit_since(mark, CONTROLLER_UA, samples),
        "same-writes": b.audit_since(mark, SAME_WRITES_UA, samples),
    }
    for _, agents, cms in sides.values():
        env.unwatch(agents)
        env.unwatch(cms)
    r.data["fanout_same"] = {
        "samples": {k: sorted(v) for k, v in res.items()},
        "writes": audit,
    }
    c, s = res["controller"], res["same-writes"]
    c99, s99 = pct(c, 0.99), pct(s, 0.99)
    cw, sw = (audit[k]["total"] / max(1, samples) for k in ("controller", "same-writes"))
    log(f"fan-out: controller p99 {c99 * 1000:.0f} ms, same-writes p99 {s99 * 1000:.0f} ms")
    r.times(
        "2 fan-out",
        f"Resource with {objs.TEAM_SIZE} dependents, interleaved: controller ({len(c)})",
        p50_p99(c),
        ratio=c99 / s99,
        limit=FANOUT_SAME_TARGET,
        of=" same-writes",
        stat="p99 ",
        more=f", p50 ratio {pct(c, 0.5) / pct(s, 0.5):.2f}x; {cw:.2f} writes per change",
    )
    r.info(
        "2 fan-out",
        f"  same-writes baseline: {objs.TEAM_SIZE} ConfigMaps + statuses ({len(s)})",
        p50_p99(s),
        f"{sw:.2f} writes per change",
    )
