"""Figure 4, start-up at scale: the controller restarted over a settled namespace of 1,000
agents and over larger ones (``--scale-agents``: 10,000 by default; 50,000 for the fleet
target); start-up time (spawn -> every object listed, reconciled, queue empty, CPU quiet), RSS,
memory per agent, and the writes each restart made (0: the state it found was its own).

Each larger namespace gets the same Tools, one Resource per two agents (at least the run's
count), and its agents, their statuses and ConfigMaps written by the controller's own reconcile
code (bench/e2e_prefill.py), during the idle window when that runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

from bench import e2e_cpu
from bench import e2e_objects as objs
from bench.e2e_env import CONTROLLER_UA, Bench
from bench.e2e_procs import LivenessProber, wait_settled
from bench.report import log
from harness.kube import audit_mark, audit_writes, by_agent, summarize

TARGETS: tuple[tuple[int, float, float], ...] = ((10_000, 60.0, 1024.0), (50_000, 90.0, 1536.0))
"""(up to this many agents, start-up seconds, RSS MiB): issue 10's 10,000 agents in 60 s and
1 GiB, issue 38's 50,000 agents in 90 s and 1.5 GiB."""


def targets(agents: int) -> tuple[float, float] | None:
    """The start-up and RSS targets for a restart over ``agents`` agents (None: beyond them)."""
    return next(((s, m) for n, s, m in TARGETS if agents <= n), None)


def shape_for(b: Bench, agents: int) -> objs.Shape:
    """A larger namespace's shape: ``agents``, one Resource per two of them (at least the run's
    count)."""
    return objs.Shape(agents=agents, resources=max(b.shape.resources, agents // 2))


def namespace_for(agents: int) -> str:
    return f"bench-scale-{agents}"


def prepare_big(b: Bench) -> None:
    """The larger namespaces: Tools, Resources, agents, statuses and ConfigMaps current
    (computed by the controller's own reconcile code, see bench/e2e_prefill.py)."""
    env = b.env
    for agents in b.scale_agents:
        ns, shape = namespace_for(agents), shape_for(b, agents)
        t = time.monotonic()
        env.create([objs.namespace(ns)])
        env.create(objs.tools(ns) + objs.resources(ns, shape))
        env.create(objs.agents(ns, shape))
        created = time.monotonic() - t
        written = env.prefill(ns)
        b.big_prep[ns] = {"created_s": created, "total_s": time.monotonic() - t, **written}
        log(f"{ns}: {agents} agents, {shape.resources} Resources prepared {b.big_prep[ns]}")


def prepare_big_safely(b: Bench) -> None:
    """:func:`prepare_big` in a thread: a failure is logged, and reported by :func:`run`."""
    try:
        prepare_big(b)
    except Exception as exc:
        log(f"preparing the larger namespaces failed: {exc!r}")


def run(b: Bench) -> None:
    """Restart over the 1x namespace, then over each larger one; start-up, RSS and memory per
    agent rows each."""
    r = b.report
    if b.big_thread is not None:
        b.big_thread.join()
    elif not b.big_prep:
        prepare_big(b)
    missing = [namespace_for(n) for n in b.scale_agents if namespace_for(n) not in b.big_prep]
    if missing:
        raise RuntimeError(f"preparing {', '.join(missing)} failed (see the log above)")
    rows = [_restart(b, b.ctl_ns, b.shape, "restart-small")]
    for agents in b.scale_agents:
        rows.append(_restart(b, namespace_for(agents), shape_for(b, agents), f"restart-{agents}"))
    r.data["scale"] = {"rows": rows, "prep": b.big_prep}
    for i, row in enumerate(rows):
        _rows(b, row, rows[i - 1] if i else None)


def _rows(b: Bench, row: dict[str, Any], before: dict[str, Any] | None) -> None:
    r = b.report
    n = row["agents"]
    label = f"{n:,} agents ({row['resources']:,} Resources)"
    note = (
        f"LIST done {row['indexed_s']:.1f} s, queue drained {row['reconciled_s']:.1f} s, "
        f"CPU {row['cpu_s']:.1f} s, {row['writes']} writes; load {row['load']:.1f}"
    )
    floor = row.get("floor") or {}
    if floor:
        note += (
            f"; kopf alone listing the same {floor['listed']:,} objects just before: "
            f"{floor['listed_s']:.1f} s, CPU {floor['cpu_s']:.1f} s (start-up "
            f"{row['startup_s'] / floor['listed_s']:.2f}x, "
            f"CPU {row['cpu_s'] / floor['cpu_s']:.2f}x)"
        )
    value = f"{row['startup_s']:.1f} s"
    goal = targets(n)
    figure = f"start-up, {label} (spawn -> indexed, reconciled, quiet)"
    if before is not None and goal is not None:
        note += f"; growth x{row['startup_s'] / before['startup_s']:.2f}"
        r.against(
            "4 scale",
            figure,
            value,
            f"<= {goal[0]:g} s",
            measured=row["startup_s"],
            limit=goal[0],
            note=note,
        )
    else:
        r.info("4 scale", figure, value, note)
    live = row.get("liveness")
    if live and live["answers"] + live["failures"]:
        slowest = live["slowest_s"] or 0.0
        r.against(
            "4 scale",
            f"liveness during the start-up, {label} (slowest answer, every 2 s)",
            f"{slowest:.2f} s; {live['failures']} late or failed of "
            f"{live['answers'] + live['failures']}",
            f"<= {LIVENESS_TIMEOUT_S:g} s, none late",
            measured=slowest if not live["failures"] else float("inf"),
            limit=LIVENESS_TIMEOUT_S,
            note=f"first answer {live['first_answer_s']} s after spawn; the chart probes every "
            "20 s with a 5 s timeout and restarts after 3 failures in a row",
        )
    rss = f"{row['rss_mib']:.0f} MiB; {row['hwm_mib']:.0f} MiB"
    per = f"{row['hwm_mib'] * 1024 / n:.1f} KiB per agent (peak / agents)"
    if before is not None:
        added = (row["hwm_mib"] - before["hwm_mib"]) * 1024 / (n - before["agents"])
        per += f"; {added:.1f} KiB per added agent since {before['agents']:,}"
    figure = f"RSS, {label} (after start-up; peak)"
    if goal is not None:
        r.against(
            "4 scale",
            figure,
            rss,
            f"<= {goal[1]:g} MiB",
            measured=row["hwm_mib"],
            limit=goal[1],
            note=per,
        )
    else:
        r.info("4 scale", figure, rss, per)


LIVENESS_TIMEOUT_S = 5.0
"""The chart's liveness probe timeout (``health.livenessProbe.timeoutSeconds``): a start-up
whose liveness endpoint answers later than this is one the kubelet counts as failing."""
QUIET_SHARE = 0.10
"""The API server is quiet when it used at most this share of one core over a window of
:data:`QUIET_WINDOW_S` seconds: a restart right after a large prefill would otherwise share
the machine with the API server still compacting and serving its own work."""
QUIET_WINDOW_S = 5.0
QUIET_TIMEOUT_S = 180.0


def wait_quiet(b: Bench) -> dict[str, float]:
    """Wait (at most :data:`QUIET_TIMEOUT_S`) until the API server is quiet; how long that took
    and its share of a core over the last window."""
    env = b.env
    t0 = time.monotonic()
    share = float("nan")
    while time.monotonic() - t0 < QUIET_TIMEOUT_S:
        before = env.cpu_snapshot()
        time.sleep(QUIET_WINDOW_S)
        used = env.cpu_since(before, {})
        share = used.get("kube-apiserver", 0.0) / max(used["wall"], 1e-3)
        if share <= QUIET_SHARE:
            break
    waited = {"quiet_wait_s": round(time.monotonic() - t0, 1), "apiserver_share": round(share, 3)}
    log(f"API server quiet: {waited}")
    return waited


def _restart(b: Bench, namespace: str, shape: objs.Shape, tag: str) -> dict[str, Any]:
    """Stop the running controller, wait until the API server is quiet, measure the kopf floor
    over ``namespace`` when a target applies (kopf alone listing the same objects, just before),
    start a controller over it, and wait until it settles."""
    env = b.env
    if b.ctl is not None:
        b.ctl.stop()
        time.sleep(1.0)
    quiet = wait_quiet(b)
    large = shape.agents > b.shape.agents and targets(shape.agents) is not None
    floor = e2e_cpu.kopf_floor(b, namespace) if large else {}
    if floor:
        quiet = wait_quiet(b)
    load = os.getloadavg()[0]
    mark = audit_mark(env.audit_log)
    ctl = b.ctl = env.controller(namespace, tag, liveness=True).start()
    prober = LivenessProber(ctl.liveness_url, timeout=LIVENESS_TIMEOUT_S).start()
    prof = b.profile(ctl, tag)
    objects = shape.agents + shape.resources + 10 + 7
    settled = wait_settled(ctl, objects, timeout=b.args.timeout)
    b.unprofile(prof)
    liveness = prober.stop()
    if prober.failures:
        log(f"liveness answers that failed or came late: {prober.failures[:10]}")
    writes = by_agent(audit_writes(env.audit_log, mark), CONTROLLER_UA)
    out = {
        "agents": shape.agents,
        "resources": shape.resources,
        "objects": objects,
        "load": load,
        "load_after": os.getloadavg()[0],
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
        "floor": floor,
        "liveness": liveness,
        **quiet,
    }
    log(f"restart in {namespace} with {shape.agents} agents: {out}")
    return out
