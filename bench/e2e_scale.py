"""Figure 4, start-up at scale: the controller restarted over a settled namespace of 1,000 and
of 10,000 agents; start-up time (spawn -> every object listed, reconciled, queue empty, CPU
quiet) and RSS, and the writes the restart made (0: the state it found was its own).

The 10x namespace gets the same registry and 10x the agents, their statuses and ConfigMaps
written by the controller's own reconcile code (bench/e2e_prefill.py), during the idle window
when that runs.
"""

from __future__ import annotations

import time
from typing import Any

from bench import e2e_objects as objs
from bench.e2e_env import CONTROLLER_UA, Bench
from bench.e2e_procs import wait_settled
from bench.report import log
from harness.kube import audit_mark, audit_writes, by_agent, summarize

STARTUP_TARGET_S = 60.0
RSS_TARGET_MIB = 1024.0


def prepare_big(b: Bench) -> None:
    """The 10x namespace: the same registry, 10x the agents, statuses and ConfigMaps current
    (computed by the controller's own reconcile code, see bench/e2e_prefill.py)."""
    env, big = b.env, b.big
    t = time.monotonic()
    env.create([objs.namespace(b.big_ns)])
    env.create(objs.tools(b.big_ns) + objs.resources(b.big_ns, big))
    env.create(objs.agents(b.big_ns, big))
    created = time.monotonic() - t
    written = env.prefill(b.big_ns)
    b.big_prep = {"created_s": created, "total_s": time.monotonic() - t, **written}
    log(f"{b.big_ns}: {big.agents} agents prepared {b.big_prep}")


def prepare_big_safely(b: Bench) -> None:
    """:func:`prepare_big` in a thread: a failure is logged, and reported by :func:`run`."""
    try:
        prepare_big(b)
    except Exception as exc:
        log(f"preparing {b.big_ns} failed: {exc!r}")


def run(b: Bench) -> None:
    """Restart over the 1x namespace, then over the 10x one; a start-up and an RSS row each."""
    r = b.report
    if b.big_thread is not None:
        b.big_thread.join()
    elif not b.big_prep:
        prepare_big(b)
    if not b.big_prep:
        raise RuntimeError("preparing the 10x namespace failed (see the log above)")
    small = _restart(b, b.ctl_ns, b.shape.agents, "restart-small")
    big = _restart(b, b.big_ns, b.big.agents, "restart-big")
    r.data["scale"] = {"small": small, "big": big, "big_prep": b.big_prep}

    def grow(key: str) -> str:
        return f"x{big[key] / small[key]:.2f}" if small[key] else ""

    startup = "start-up, {} agents (spawn -> indexed, reconciled, quiet)"
    for row in (small, big):
        label = f"{row['agents']}"
        note = (
            f"LIST done {row['indexed_s']:.1f} s, queue drained {row['reconciled_s']:.1f} s, "
            f"CPU {row['cpu_s']:.1f} s, {row['writes']} writes"
        )
        value = f"{row['startup_s']:.1f} s"
        if row is big:
            note += f"; growth {grow('startup_s')}"
            r.against(
                "4 scale",
                startup.format(label),
                value,
                f"<= {STARTUP_TARGET_S:g} s",
                measured=row["startup_s"],
                limit=STARTUP_TARGET_S,
                note=note,
            )
        else:
            r.info("4 scale", startup.format(label), value, note)
        r.against(
            "4 scale",
            f"RSS, {label} agents (after start-up; peak)",
            f"{row['rss_mib']:.0f} MiB; {row['hwm_mib']:.0f} MiB",
            f"<= {RSS_TARGET_MIB:g} MiB",
            measured=row["hwm_mib"],
            limit=RSS_TARGET_MIB,
            note=f"growth {grow('rss_mib')} (peak {grow('hwm_mib')})" if row is big else "",
        )


def _restart(b: Bench, namespace: str, agents: int, tag: str) -> dict[str, Any]:
    """Stop the running controller, start one over ``namespace``, and wait until it settles."""
    env = b.env
    if b.ctl is not None:
        b.ctl.stop()
        time.sleep(1.0)
    mark = audit_mark(env.audit_log)
    ctl = b.ctl = env.controller(namespace, tag).start()
    prof = b.profile(ctl, tag)
    objects = agents + b.shape.resources + 10 + 7
    settled = wait_settled(ctl, objects, timeout=b.args.timeout)
    b.unprofile(prof)
    writes = by_agent(audit_writes(env.audit_log, mark), CONTROLLER_UA)
    out = {
        "agents": agents,
        "objects": objects,
        "indexed_s": ctl.started_at() or float("nan"),
        "indexed_agents": ctl.started_agents() or -1,
        "reconciled_s": settled.reconciled_s,
        "quiet_s": settled.quiet_s,
        "startup_s": settled.settled_s,
        "cpu_s": settled.cpu_s,
        "rss_mib": ctl.rss_mib(),
        "hwm_mib": ctl.hwm_mib(),
        "writes": len(writes),
        "write_kinds": summarize(writes),
    }
    log(f"restart in {namespace} with {agents} agents: {out}")
    return out
