"""Figure 3, idle writes: what the controller writes (target 0) and its CPU while nothing
changes, for ``--idle-seconds`` with every agent current.

When the scale scenario is to run, its 10x namespace is prepared meanwhile by the benchmark's
own client (another namespace, which this controller does not watch): the API server is busy,
the controller must still have nothing to write.
"""

from __future__ import annotations

import threading
import time

from bench import e2e_scale
from bench.e2e_env import CONTROLLER_UA, Bench
from bench.e2e_procs import wait_settled
from bench.report import log
from harness.kube import audit_mark, audit_writes, by_agent, summarize


def run(b: Bench) -> None:
    """Wait for quiet, then count every write during the window, by user agent."""
    env, r, ctl = b.env, b.report, b.controller
    wait_settled(ctl, 0, quiet_window=2.0)
    seconds = b.args.idle_seconds
    log(f"idle window: {seconds} s with {b.shape.agents} agents")
    mark = audit_mark(env.audit_log)
    if "scale" in b.phases and not b.big_prep:
        b.big_thread = threading.Thread(target=e2e_scale.prepare_big_safely, args=(b,), daemon=True)
        b.big_thread.start()
    cpu0, t0 = ctl.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    cpu = ctl.cpu_seconds() - cpu0
    elapsed = time.monotonic() - t0
    writes = audit_writes(env.audit_log, mark)
    ours = by_agent(writes, CONTROLLER_UA)
    others = {
        w.user_agent.split(" ")[0]: 0 for w in writes if not w.user_agent.startswith(CONTROLLER_UA)
    }
    for w in writes:
        if not w.user_agent.startswith(CONTROLLER_UA):
            others[w.user_agent.split(" ")[0]] += 1
    in_ns = [w for w in writes if w.namespace == b.ctl_ns]
    r.data["idle"] = {
        "seconds": elapsed,
        "controller_writes": summarize(ours),
        "writes_in_namespace_by_anyone": summarize(in_ns),
        "other_user_agents": others,
        "controller_cpu_s": cpu,
    }
    r.add(
        "3 writes",
        f"controller writes while idle ({elapsed:.0f} s, {b.shape.agents} agents)",
        str(len(ours)),
        "0",
        None,
        len(ours) == 0,
        f"{len(in_ns)} writes in the namespace by anyone; "
        f"controller CPU {cpu / elapsed * 100:.2f}%",
    )
