"""Figure 3, writes per logical change: the controller's API writes, from the audit log, per
new agent, binding change, Resource change with 50 dependents, spec change that leaves the
bindings alone (``relaunchGeneration``) and label-only change.

The first three come from the throughput and latency scenarios' audit counts (a scenario not
run is left out); the last two are made here.

Each row's target counts the writes a change needs for its own sake; the status writes of the
objects agents depend on that report a rollout (how many dependents applied the change) are
counted apart, in a row of their own per change: they are coalesced, so they follow how fast the
dependents take a change in, not how many there are.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from bench import e2e_objects as objs
from bench.e2e_env import CONTROLLER_UA, Bench
from bench.e2e_procs import wait_settled
from harness.kube import audit_mark

FANOUT_TARGET = 2 * objs.TEAM_SIZE + 1
ROLLOUT_STATUS = (
    "resources/status",
    "tools/status",
    "resourcetypes/status",
    "resourcegrants/status",
)
"""Where rollout writes go: the status of the kinds agents depend on."""
TARGET_TEXT = {
    0: "0",
    1: "1 (status)",
    2: "2 (status + ConfigMap)",
    FANOUT_TARGET: f"{FANOUT_TARGET} (1 + {objs.TEAM_SIZE} x 2)",
}


def run(b: Bench) -> None:
    """The two changes made here, then one row per kind of change."""
    spec_only, labels_only, n = _changes(b)
    r = b.report
    lw = r.data.get("latency_writes", {})
    tp = r.data.get("throughput", {})
    # (name, writes, changes, target per change)
    cases: list[tuple[str, dict[str, int], int, int]] = [
        (
            "new agent (creation)",
            tp.get("writes", {}).get("controller", {}),
            tp.get("agents", 1),
            2,
        ),
        (
            "one binding changed",
            lw.get("controller binding", {}).get("writes", {}),
            lw.get("controller binding", {}).get("changes", 1),
            2,
        ),
        (
            f"Resource change with {objs.TEAM_SIZE} dependents",
            lw.get("controller fanout", {}).get("writes", {}),
            lw.get("controller fanout", {}).get("changes", 1),
            FANOUT_TARGET,
        ),
        ("spec change, same bindings", spec_only["writes"], n, 1),
        ("label-only change", labels_only["writes"], n, 0),
    ]
    ran = {"one binding changed": "controller binding" in lw}
    ran[f"Resource change with {objs.TEAM_SIZE} dependents"] = "controller fanout" in lw
    cases = [c for c in cases if ran.get(c[0], True)]  # skip phases not run (--only)
    r.data["write_amplification"] = {
        name: {"writes": w, "changes": c, "target_per_change": t} for name, w, c, t in cases
    }
    for name, writes, changes, target in cases:
        own = 1 if target == FANOUT_TARGET else 0  # the changed Resource's own status
        rollout = max(0, sum(v for k, v in writes.items() if k.startswith(ROLLOUT_STATUS)) - own)
        total = sum(writes.values()) - rollout
        per = total / max(1, changes)
        detail = ", ".join(f"{k}: {v / max(1, changes):.2f}" for k, v in writes.items()) or "none"
        r.add(
            "3 writes",
            f"writes per change: {name}",
            f"{per:.2f}",
            TARGET_TEXT[target],
            None if target == 0 else per / target,
            per <= target + 1e-9,
            detail,
        )
        r.add(
            "3 writes",
            f"rollout status writes per change: {name}",
            f"{rollout / max(1, changes):.2f}",
            "coalesced",
            None,
            None,
            f"{rollout} write(s) of the dependencies' status.rollout for {changes} change(s)",
        )


def _changes(b: Bench) -> tuple[dict[str, Any], dict[str, Any], int]:
    """A relaunchGeneration bump (no runtime: the bindings stay) and a label-only change, each
    on the same agents; the controller's writes for each."""
    env, shape, ctl = b.env, b.shape, b.controller
    agents = env.watch("agentspecs", b.ctl_ns)
    n = min(20, shape.agents)
    picks = b.rng.sample(range(shape.agents), n)

    # a spec change that changes no delivered binding: relaunchGeneration (no runtime)
    mark = audit_mark(env.audit_log)
    for i in picks:
        name = objs.agent_name(i)
        body = agents.get(name) or {}
        gen = int(body["metadata"]["generation"]) + 1
        tr = agents.track(functools.partial(objs.current_at, gen=gen), 1, [name])
        rg = int((body.get("spec") or {}).get("relaunchGeneration", 0)) + 1
        env.kube.merge_patch(
            objs.path("agentspecs", b.ctl_ns, name), {"spec": {"relaunchGeneration": rg}}
        )
        tr.wait(b.args.timeout)
        agents.untrack(tr)
    wait_settled(ctl, 0, quiet_window=1.0)
    spec_only = b.audit_since(mark, CONTROLLER_UA, n)

    # a label-only change: no generation bump, nothing to do
    mark = audit_mark(env.audit_log)
    for k, i in enumerate(picks):
        env.kube.merge_patch(
            objs.path("agentspecs", b.ctl_ns, objs.agent_name(i)),
            {"metadata": {"labels": {"bench-touch": str(k)}}},
        )
        time.sleep(0.05)
    wait_settled(ctl, 0, quiet_window=1.5)
    labels_only = b.audit_since(mark, CONTROLLER_UA, n)
    env.unwatch(agents)
    return spec_only, labels_only, n
