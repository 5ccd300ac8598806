"""End-to-end performance against the real API server, as ratios to the limit (issue 10).

One run starts a local control plane (etcd + kube-apiserver + kube-controller-manager, audit log
on), and measures, side by side, the controller (``python -m controller run``, a subprocess) and
a baseline client (bench/e2e_baseline.py: a watch plus one status patch per agent, same language,
transport and worker count) on the same objects:

1. throughput: 1,000 pre-created AgentSpecs (3 direct bindings, 2 tools, over 5,000 Resources);
   the clock starts when the process is spawned and stops when the benchmark's own watch has
   seen every agent Ready with ``observedGeneration`` current. Printed: controller / baseline.
2. latency: 200 single-binding changes (until the agent's status and its bindings ConfigMap
   show it) and 200 Resource changes with 50 dependents (until all 50 statuses and ConfigMaps
   show it); p50/p99 beside the baseline's watch-to-patch round trip.
3. write amplification: API writes per logical change, from the audit log, and writes during an
   idle window with 1,000 agents.
4. scale: RSS and start-up time (spawn -> every object indexed and reconciled, queue empty, CPU
   quiet, no writes) at 1,000 and 10,000 agents.

Issue 18 adds, in the same run:

* throughput against a second baseline making exactly the writes Bindery needs per new agent
  (bindings ConfigMap + status: ``e2e_baseline --writes same``), and the controller's CPU per
  new agent (psutil, spawn to last Ready, / agents);
* the latency anchor (``--only anchor``): an AgentSpec binding change against a Deployment
  template change handled by kube-controller-manager, interleaved (A, D, A, D ...), from the
  spec PATCH to the first watch event whose ``status.observedGeneration`` reaches the new
  generation;
* fan-out (``--only fanout``): a Resource with 50 dependents, the controller interleaved with
  the same-writes baseline's own 50-agent fan-out.

This module runs them in that order over one environment (bench/e2e_env.py); each scenario is
its own module: e2e_throughput (1), e2e_cpu (1b, 1c), e2e_anchor (2a), e2e_latency (2),
e2e_fanout (2b), e2e_writes and e2e_idle (3), e2e_scale (4).

    .venv/bin/python -m bench.bench_e2e [--scale 1.0] [--idle-seconds 300] [--samples 200]

See bench/README.md for what each figure means and bench/RESULTS.md for recorded runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psutil

from bench import (
    e2e_anchor,
    e2e_cpu,
    e2e_fanout,
    e2e_idle,
    e2e_latency,
    e2e_scale,
    e2e_throughput,
    e2e_writes,
)
from bench.e2e_env import PHASES, Bench, Env
from bench.e2e_profile import available as profiler_available
from bench.report import Report, log, print_table

__all__ = ["PHASES", "main", "parser", "run"]


def run_phases(b: Bench) -> Report:
    """Every scenario asked for, in the recorded order, over one environment."""
    phases = b.phases
    b.setup()
    floor = e2e_cpu.kopf_floor(b)
    starts = e2e_throughput.run(b)
    e2e_cpu.run(b, starts, floor)
    if "anchor" in phases:
        e2e_anchor.run(b)
    if "latency" in phases:
        e2e_latency.run(b)
    if "fanout" in phases:
        e2e_fanout.run(b)
    for base in (b.base, b.same):
        if base is not None:
            base.stop()
    if "writes" in phases:
        e2e_writes.run(b)
    if "idle" in phases and b.args.idle_seconds > 0:
        e2e_idle.run(b)
    if "scale" in phases:
        e2e_scale.run(b)
    return b.report


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu,
        "python": platform.python_version(),
        "kopf": version("kopf"),
        "kubernetes_client": version("kubernetes"),
        "pydantic": version("pydantic"),
        "loadavg_at_start": os.getloadavg(),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument(
        "--scale", type=float, default=1.0, help="1.0 = 1,000 agents over 5,000 Resources"
    )
    p.add_argument("--idle-seconds", type=float, default=300.0, help="idle window (0: skip)")
    p.add_argument("--samples", type=int, default=200, help="latency samples per kind")
    p.add_argument(
        "--fanout-samples",
        type=int,
        default=50,
        help="Resource-change samples per side, in the latency and fanout phases (each is "
        "100 writes)",
    )
    p.add_argument(
        "--anchor-samples",
        type=int,
        default=200,
        help="latency anchor samples per kind (AgentSpec, Deployment), interleaved",
    )
    p.add_argument(
        "--anchor-objects", type=int, default=50, help="AgentSpecs and Deployments changed in turn"
    )
    p.add_argument(
        "--anchor-replicas",
        type=int,
        default=1,
        help="replicas of each anchor Deployment (no nodes: its pods stay Pending)",
    )
    p.add_argument(
        "--anchor-gap",
        type=float,
        default=0.25,
        help="seconds between anchor samples, for each change's trailing work to finish",
    )
    p.add_argument(
        "--scale-agents",
        default="10x",
        help="agent counts of the start-up phase's larger namespaces, comma-separated, each a "
        "number or a multiple of the run's agents (default 10x; the fleet target: 10000,50000)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0, help="for any one wait")
    p.add_argument(
        "--only",
        action="append",
        choices=PHASES,
        help="run throughput plus only these phases (repeatable; 'throughput' alone: only it)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        help="attach py-spy to the controller in the throughput and start-up phases, raw "
        "profiles into this directory (perturbs the figures: not for recorded runs)",
    )
    p.add_argument(
        "--controller-src",
        type=Path,
        help="run the controller package from this source tree instead (to measure a patch)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, audit log)")
    p.add_argument("--json", type=Path, help="also write every figure and raw sample here")
    return p


def run(argv: Sequence[str] | None = None) -> tuple[Report, dict[str, Any]]:
    args = parser().parse_args(argv)
    if args.profile and not profiler_available():
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    info = machine()
    work = Path(tempfile.mkdtemp(prefix="bindery-bench-e2e-"))
    log(f"work directory {work}; scale {args.scale}; machine {info}")
    started = time.monotonic()
    env = Env(work)
    if args.controller_src:
        env.controller_src = args.controller_src.resolve()
    try:
        info["kubernetes"] = env.kubectl("version", "-o", "json")
        report = run_phases(Bench(env, args))
    finally:
        env.down()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    try:
        server = json.loads(info.pop("kubernetes")).get("serverVersion", {}).get("gitVersion", "?")
    except (ValueError, AttributeError):
        server = "?"
    info["kube_apiserver"] = server
    info["elapsed_s"] = round(time.monotonic() - started, 1)
    info["args"] = vars(args) | {"json": str(args.json) if args.json else None}
    report.data["machine"] = info
    if args.json:
        args.json.write_text(
            json.dumps(
                report.data | {"rows": [asdict(r) for r in report.rows]}, indent=1, default=str
            )
        )
    return report, info


def main(argv: Sequence[str] | None = None) -> int:
    report, info = run(argv)
    print(
        f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB; python "
        f"{info['python']}, kopf {info['kopf']}, kube-apiserver {info['kube_apiserver']}; "
        f"run took {info['elapsed_s']} s"
    )
    print_table(report.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
