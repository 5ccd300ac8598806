"""Figures 1b and 1c, CPU per new agent: the throughput run against the same writes, the
controller's CPU per new agent, and the kopf floor beneath it.

The same-writes baseline makes exactly the writes Bindery needs per new agent, so the time
ratio to it and the CPU per agent beside its own say what the controller spends beyond those
writes. The kopf floor (bench/e2e_kopf_floor.py, started before the throughput run on the
controller's namespace) is the least any kopf-based controller pays to list these objects.
"""

from __future__ import annotations

import time

from bench import e2e_objects as objs
from bench.e2e_env import Bench
from bench.e2e_procs import KopfFloorProc
from bench.e2e_throughput import Starts
from bench.report import log

THROUGHPUT_SAME_TARGET = 1.3
CPU_PER_AGENT_TARGET_MS = 5.0


def kopf_floor(b: Bench, namespace: str | None = None) -> dict[str, float]:
    """bench/e2e_kopf_floor.py on ``namespace`` (the controller's by default) while no
    controller runs: the objects a controller started there lists, listed by kopf alone (no-op
    handlers, the controller's settings)."""
    env, ns = b.env, namespace or b.ctl_ns
    expect = len(env.kube.list_all(objs.path("resourcetypes"))) + sum(
        len(env.kube.list_all(objs.path(plural, ns)))
        for plural in ("resources", "tools", "agentspecs")
    )
    log_file = env.work / "logs" / f"kopf-floor-{ns}.log"
    proc = KopfFloorProc(env.kubeconfig, ns, expect, log_file)
    env.procs.append(proc)
    cpu0 = env.cpu_snapshot()
    figures = proc.start().result(b.args.timeout)
    figures["apiserver_cpu_s"] = env.cpu_since(cpu0, {}).get("kube-apiserver", float("nan"))
    log(f"kopf floor: {figures}")
    time.sleep(1.0)
    return figures


def run(b: Bench, starts: Starts, floor: dict[str, float]) -> None:
    """The rows of 1b and 1c from the throughput run's starts and the kopf floor."""
    _same_writes_rows(b, starts)
    _floor_rows(b, starts, floor)


def _same_writes_rows(b: Bench, starts: Starts) -> None:
    """Issue 18: the controller against the same writes, and its CPU per new agent."""
    r, n, times = b.report, starts.agents, starts.times
    c, s = times["controller"]["total_s"], times["same-writes"]["total_s"]
    sw = sum(starts.writes["same-writes"].values())
    cs, ss = starts.sizes["controller"], starts.sizes["same-writes"]
    r.times(
        "1 throughput",
        f"{n} agents to Ready: controller / same-writes baseline",
        f"{c:.2f} s / {s:.2f} s",
        ratio=c / s,
        limit=THROUGHPUT_SAME_TARGET,
        more=f"; baseline writes {sw / n:.2f} per agent; bytes per status "
        f"{cs['status']:.0f} vs {ss['status']:.0f}, per bindings.json "
        f"{cs['bindings_json']:.0f} vs {ss['bindings_json']:.0f}",
    )
    starts.drain_row(
        r,
        "same-writes",
        " (same-writes)",
        f"spawn -> first Ready {times['controller']['first_ready_s']:.2f} s / "
        f"{times['same-writes']['first_ready_s']:.2f} s",
    )
    cpu = {who: times[who]["cpu"] for who in times}
    per = {who: cpu[who]["client"] / n * 1000 for who in cpu}
    api = {who: cpu[who].get("kube-apiserver", float("nan")) for who in cpu}
    r.data["throughput"]["cpu_ms_per_agent"] = per
    r.against(
        "1 throughput",
        "controller CPU per new agent (spawn -> last Ready)",
        f"{per['controller']:.1f} ms",
        f"<= {CPU_PER_AGENT_TARGET_MS:g} ms",
        measured=per["controller"],
        limit=CPU_PER_AGENT_TARGET_MS,
        note=f"baselines: one-write {per['baseline']:.1f} ms, same-writes "
        f"{per['same-writes']:.1f} ms; kube-apiserver CPU-s {api['controller']:.1f} "
        f"(controller) / {api['same-writes']:.1f} (same-writes) / "
        f"{api['baseline']:.1f} (one-write)",
    )


def _floor_rows(b: Bench, starts: Starts, floor: dict[str, float]) -> None:
    """The least any kopf-based controller pays for these objects, beside the controller."""
    r, n, times = b.report, starts.agents, starts.times
    r.data["throughput"]["kopf_floor"] = floor
    ms = floor["cpu_s"] / n * 1000
    ctl_ms = times["controller"]["cpu"]["client"] / n * 1000
    same_ms = times["same-writes"]["cpu"]["client"] / n * 1000
    r.info(
        "1 throughput",
        "  kopf floor: kopf alone lists the same objects (no-op handlers)",
        f"{floor['listed_s']:.2f} s; {ms:.1f} ms CPU per agent",
        f"{floor['listed']:.0f} objects; CPU {floor['cpu_s']:.2f} s, imports "
        f"{floor['imports_cpu_s']:.2f} s of it; controller's first Ready at "
        f"{times['controller']['first_ready_s']:.2f} s",
    )
    r.info(
        "1 throughput",
        "  controller CPU per new agent above the kopf floor",
        f"{ctl_ms - ms:.1f} ms",
        f"same-writes baseline (no kopf) {same_ms:.1f} ms; kopf floor + same-writes "
        f"{ms + same_ms:.1f} ms against the {CPU_PER_AGENT_TARGET_MS:g} ms target",
    )
