"""Run every benchmark in bench/ and print one table (``make bench``).

* bench/bench_resolve.py: binding resolution in memory (run as its own process, so its peak-RSS
  figure is its own; its output lines are parsed into rows);
* bench/bench_budget.py: the controller's RSS over 1,000 Resources of the largest size the CRD
  admits, against the chart's memory limit (its own process and control plane);
* bench/bench_e2e.py: the controller against a real local API server, as ratios to a baseline
  client (issue 10);
* bench/bench_watch.py: how soon the session library's watcher notices a replaced bindings
  document, through its directory watch and polling alone (its own process, like resolve);
* bench/bench_mcp.py: the MCP adapter's notification latency in both protocol generations and
  its memory per session (its own process; needs the ``mcp`` extra, which ``make venv`` installs);
* bench/bench_fleet.py: a change every session of a fleet applies (1,000 agents with sessions on
  kwok nodes bound to one Resource), until ``Delivered``, against a same-writes baseline (issue
  38). Not in the default set (it takes 15 minutes or more at 1,000 agents): ``--only fleet``.

    .venv/bin/python -m bench [--scale 1.0] [--idle-seconds 300]
                              [--only resolve|budget|watch|mcp|fleet|e2e|PHASE]
                              [--fleet-agents 1000] [--fleet-changes 3]
                              [--json FILE] [e2e options, see python -m bench.bench_e2e -h]

``--only`` is repeatable; a phase of bench_e2e (throughput, anchor, latency, fanout, writes,
idle, scale) runs bench_e2e with only that phase (throughput always runs: it starts the
controller), e.g. ``--only anchor --only fanout``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

from bench import bench_e2e
from bench.report import Row, print_table

REPO_ROOT = Path(__file__).resolve().parent.parent
_RATIO_LINE = re.compile(
    r"^(?P<label>[^:]+): (?P<value>[-\d.]+) (?P<unit>\S+)(?P<detail>.*?) "
    r"\(target <= (?P<target>[-\d.]+) (?P<tunit>\S+), ratio (?P<ratio>[-\d.]+)\)$"
)


def resolve_rows(scale: float) -> tuple[list[Row], list[str]]:
    """Run bench_resolve in a child process; its ratio lines become rows, the rest notes."""
    return child_rows("resolve", "bench.bench_resolve", "--scale", str(scale))


def budget_rows(scale: float) -> tuple[list[Row], list[str]]:
    """Run bench_budget (1,000 maximum-size Resources at scale 1) in a child process."""
    resources = max(1, round(1000 * scale))
    return child_rows("budget", "bench.bench_budget", "--resources", str(resources))


def child_rows(bench: str, module: str, *args: str) -> tuple[list[Row], list[str]]:
    """Run ``module`` in a child process; its ratio lines become rows, the rest notes."""
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["failed"]
        return [Row(bench, module.rpartition(".")[2], "failed", note=message[0])], []
    rows, notes = [], []
    for line in proc.stdout.splitlines():
        m = _RATIO_LINE.match(line.strip())
        if not m:
            notes.append(line)
            continue
        ratio = float(m.group("ratio"))
        rows.append(
            Row(
                bench,
                m.group("label"),
                f"{m.group('value')} {m.group('unit')}",
                f"<= {m.group('target')} {m.group('tunit')}",
                ratio,
                ratio <= 1.0,
                m.group("detail").strip(" ,"),
            )
        )
    return rows, notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="run every benchmark and print one table")
    parser.add_argument("--scale", type=float, default=1.0, help="size factor for every benchmark")
    parser.add_argument(
        "--only",
        action="append",
        choices=["resolve", "budget", "watch", "mcp", "fleet", "e2e", *bench_e2e.PHASES],
        help="run one benchmark, or only these phases of bench_e2e (repeatable); fleet runs "
        "only when named",
    )
    parser.add_argument(
        "--fleet-agents",
        type=int,
        default=None,
        help="agents with sessions per side of the fleet benchmark (default 1000 x --scale)",
    )
    parser.add_argument(
        "--fleet-changes", type=int, default=3, help="changes per side of the fleet benchmark"
    )
    parser.add_argument("--json", type=Path, help="write the rows (and e2e raw data) here")
    args, rest = parser.parse_known_args(argv)
    only = set(args.only or ["resolve", "budget", "watch", "mcp", "e2e"])
    phases = sorted(only & set(bench_e2e.PHASES), key=bench_e2e.PHASES.index)
    if phases:
        only.add("e2e")
        rest += [arg for phase in phases for arg in ("--only", phase)]

    rows: list[Row] = []
    notes: list[str] = []
    data: dict[str, object] = {}
    if "resolve" in only:
        print("running bench_resolve ...", file=sys.stderr, flush=True)
        got, notes = resolve_rows(args.scale)
        rows += got
    if "budget" in only:
        print("running bench_budget ...", file=sys.stderr, flush=True)
        got, more = budget_rows(args.scale)
        rows += got
        notes += more
    if "watch" in only:
        print("running bench_watch ...", file=sys.stderr, flush=True)
        got, more = child_rows("watch", "bench.bench_watch")
        rows += got
        notes += more
    if "mcp" in only:
        print("running bench_mcp ...", file=sys.stderr, flush=True)
        got, more = child_rows("mcp", "bench.bench_mcp")
        rows += got
        notes += more
    if "fleet" in only:
        print("running bench_fleet ...", file=sys.stderr, flush=True)
        agents = args.fleet_agents or max(1, round(1000 * args.scale))
        got, more = child_rows(
            "fleet",
            "bench.bench_fleet",
            *("--agents", str(agents), "--changes", str(args.fleet_changes)),
        )
        rows += got
        notes += more
    if "e2e" in only:
        print("running bench_e2e ...", file=sys.stderr, flush=True)
        report, info = bench_e2e.run(["--scale", str(args.scale), *rest])
        rows += report.rows
        data = report.data
        notes.insert(
            0,
            f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory_gib']} GiB; python "
            f"{info['python']}, kopf {info['kopf']}, kube-apiserver {info['kube_apiserver']}; "
            f"load average at start {tuple(round(x, 1) for x in info['loadavg_at_start'])}",
        )
    for note in notes:
        print(note)
    print()
    print_table(rows)
    if args.json:
        from dataclasses import asdict  # noqa: PLC0415 - only for --json

        args.json.write_text(
            json.dumps({"rows": [asdict(r) for r in rows], **data}, indent=1, default=str)
        )
    return 0  # a benchmark reports; missed targets are in the table, not the exit code


if __name__ == "__main__":
    sys.exit(main())
