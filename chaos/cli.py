"""``python -m chaos`` (``make chaos``): chaos runs against the real controller and API server.

    .venv/bin/python -m chaos [--runs 20] [--agents 50] [--per-uri 5] [--seconds 30]
                              [--seed N] [--no-kill-controller] [--restart-apiserver]
                              [--no-sessions] [--acknowledging-share 0.5]
                              [--work-scope namespace|cluster]
                              [--settle 30] [--out DIR] [--json]

One local control plane serves every run; each run gets a fresh namespace and its own controller
process. Prints a line per run and the totals; exits 1 if any invariant was violated.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path

import structlog

from chaos.churn import RESOURCE_TYPE
from chaos.plane import ApiServer
from chaos.replay import Version, replay
from chaos.run import Options, RunResult, judge_replay, run_once
from harness.cluster import LocalCluster, kubectl
from harness.errors import HarnessError
from harness.kube import Kube

REPO_ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = REPO_ROOT / "crds"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=20, help="number of runs (default 20)")
    p.add_argument("--agents", type=int, default=50, help="agents per run (default 50)")
    p.add_argument("--per-uri", type=int, default=5, help="agents competing per work URI")
    p.add_argument("--seconds", type=float, default=30.0, help="seconds of churn per run")
    p.add_argument("--interval", type=float, default=0.1, help="mean seconds between changes")
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed of the first run; run i has seed + i, so the seed a run printed replays its "
        "churn with --seed SEED --runs 1 (default: time)",
    )
    p.add_argument(
        "--kill-controller",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="SIGKILL and restart the controller at random moments (default on)",
    )
    p.add_argument(
        "--restart-apiserver",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="kill, stop or freeze the kube-apiserver once per run (default off)",
    )
    p.add_argument(
        "--sessions",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="simulated delivery sidecars acknowledge for the session pods, and the controller "
        "waits for them before it releases a hold (default on); off: no sidecar, holds are "
        "released as soon as the document without them is written",
    )
    p.add_argument(
        "--acknowledging-share",
        type=float,
        default=0.5,
        help="share of the simulated sessions whose runtime applies documents (default 0.5); "
        "the others only have them delivered",
    )
    p.add_argument(
        "--work-scope",
        choices=("namespace", "cluster"),
        default="namespace",
        help="the controller's --work-scope (default namespace); cluster: holds in the run's "
        "namespace, agents spread over it and two more namespaces wanting the same URIs, and "
        "exclusivity judged across all three",
    )
    p.add_argument("--settle", type=float, default=30.0, help="max seconds to wait after churn")
    p.add_argument("--out", default="", help="directory for per-run logs (default: a temp dir)")
    p.add_argument("--controller-log-level", default="INFO")
    p.add_argument("--json", action="store_true", help="print one JSON document instead")
    p.add_argument(
        "--replay",
        nargs="+",
        metavar="RUN_DIR",
        default=None,
        help="judge recorded runs again (directories with versions.jsonl and result.json)",
    )
    return p.parse_args(argv)


def line(r: RunResult) -> str:
    conv = f"{r.converged_after:.1f}s" if r.converged_after is not None else "NO"
    return (
        f"run {r.index:2d} seed {r.seed}: {r.changes} changes ({r.refused} refused), "
        f"{r.versions} versions ({r.versions_by_kind.get('ConfigMap', 0)} cm, "
        f"{r.versions_by_kind.get('Lease', 0)} lease), gaps {r.gaps} | exclusivity "
        f"{r.exclusivity}, without-hold {r.without_hold} ({r.in_namespace_deletion} in ns "
        f"deletion), acknowledged exclusivity {r.acknowledged_exclusivity} ("
        f"{r.acknowledgements} acks, {r.unknown_digests} unknown), stuck {r.stuck}, lost "
        f"{r.lost_updates}"
        f", unintended relaunches {r.unintended_relaunches} (intended {r.intended_relaunches}"
        f" for {r.relaunch_raises} raises, {r.pods_recreated_in_place} in place) | converged "
        f"{conv}, kills {r.controller_kills}, exits {r.controller_exits}, "
        f"api {len(r.apiserver_disruptions)}, sts recreated {r.workload_recreations}, "
        f"controller errors {r.controller_errors}, ns gone "
        f"{r.namespace_gone_after if r.namespace_gone_after is not None else 'NO'}"
    )


def totals(results: list[RunResult]) -> dict[str, object]:
    conv = [r.converged_after for r in results if r.converged_after is not None]
    keys = (
        "changes",
        "versions",
        "exclusivity",
        "without_hold",
        "acknowledged_exclusivity",
        "acknowledgements",
        "unknown_digests",
        "stuck",
        "lost_updates",
        "unintended_relaunches",
        "intended_relaunches",
        "relaunch_raises",
        "workload_recreations",
        "controller_kills",
        "controller_exits",
        "controller_errors",
        "gaps",
        "in_namespace_deletion",
        "pods_recreated_in_place",
    )
    out: dict[str, object] = {k: sum(int(getattr(r, k)) for r in results) for k in keys}
    out["runs"] = len(results)
    out["converged_runs"] = len(conv)
    out["converged_within_10s"] = sum(1 for c in conv if c <= 10.0)
    out["convergence_max_s"] = max(conv) if conv else None
    out["convergence_median_s"] = sorted(conv)[len(conv) // 2] if conv else None
    out["violations"] = sum(r.violations for r in results)
    out["load_average"] = os.getloadavg()
    return out


def warm_up_gc(kube: Kube, timeout: float = 120.0) -> float:
    """Wait until the garbage collector honours AgentSpec owners (it discovers new CRDs on a
    30 s resync): a Foreground deletion of an agent that owns a ConfigMap must complete.
    Otherwise the first run measures the control plane's discovery delay, not the controller."""
    started = time.monotonic()
    ns = "chaos-warm-up"
    kube.create_many(lambda b: "/api/v1/namespaces", [{"metadata": {"name": ns}}])
    agents = f"/apis/bindery.dev/v1alpha1/namespaces/{ns}/agentspecs"
    agent = kube.create(
        agents,
        {"apiVersion": "bindery.dev/v1alpha1", "kind": "AgentSpec", "metadata": {"name": "gc"}},
    )
    owner = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "name": "gc",
        "uid": agent["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    kube.create(
        f"/api/v1/namespaces/{ns}/configmaps",
        {"metadata": {"name": "gc", "ownerReferences": [owner]}, "data": {}},
    )
    kube.request("DELETE", f"{agents}/gc", {"propagationPolicy": "Foreground"})
    while kube.get(f"{agents}/gc") is not None:
        if time.monotonic() - started > timeout:
            raise HarnessError(
                f"the garbage collector did not complete a Foreground deletion of an AgentSpec "
                f"in {timeout:.0f} s; see kube-controller-manager's log under the cluster dir"
            )
        time.sleep(0.5)
    kube.delete(f"/api/v1/namespaces/{ns}")
    return time.monotonic() - started


GAP_LINE = re.compile(r"^recording gap \((\w+)\): relisted after 410 Gone, rv (\d+)\.\.(\d+)$")


def rejudge(run_dir: Path) -> RunResult:
    """A recorded run judged again by this checker (its final-state figures are kept)."""
    raw = json.loads((run_dir / "result.json").read_text())
    known = {f.name for f in fields(RunResult)}
    result = RunResult(**{k: v for k, v in raw.items() if k in known})
    if "gap_ranges" not in raw:
        for line in result.evidence:
            if m := GAP_LINE.match(line):
                result.gap_ranges.append((m[1], int(m[2]), int(m[3])))
    versions = []
    with (run_dir / "versions.jsonl").open() as lines:
        for line in lines:
            rec = json.loads(line)
            versions.append(Version(rec["kind"], rec["event"], rec["rv"], rec["body"], rec["t"]))
    judge_replay(result, replay(versions))
    return result


def report(results: list[RunResult], *, as_json: bool) -> int:
    summary = totals(results)
    if as_json:
        print(json.dumps({"totals": summary, "runs": [asdict(r) for r in results]}, indent=2))
    else:
        print("totals: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 1 if summary["violations"] else 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.replay:
        judged = [rejudge(Path(d)) for d in args.replay]
        for r in judged:
            print(line(r), file=sys.stderr if args.json else sys.stdout)
        return report(judged, as_json=args.json)
    opts = Options(
        agents=args.agents,
        per_uri=args.per_uri,
        seconds=args.seconds,
        interval=args.interval,
        kill_controller=args.kill_controller,
        restart_apiserver=args.restart_apiserver,
        settle=args.settle,
        controller_log_level=args.controller_log_level,
        sessions=args.sessions,
        acknowledging_share=args.acknowledging_share,
        work_scope=args.work_scope,
    )
    # The simulated sidecars run the real sidecar's code, which logs every delivery.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    seed = args.seed if args.seed is not None else int(time.time())
    out_dir = Path(args.out or tempfile.mkdtemp(prefix="bindery-chaos-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if args.json else print
    say(f"chaos: logs and recordings under {out_dir}")
    cluster = LocalCluster(out_dir / "cluster", audit=True, nodes=True)
    state = cluster.up()
    results: list[RunResult] = []
    try:
        bin_dir, kubeconfig = Path(state.bin_dir), Path(state.kubeconfig)
        for path in sorted(CRD_DIR.glob("*.yaml")):
            kubectl(bin_dir, kubeconfig, "apply", "--server-side", "-f", str(path))
        kubectl(
            bin_dir, kubeconfig, "wait", "--for=condition=Established", "crd", "--all",
            "--timeout=60s",
        )  # fmt: skip
        kubectl(
            bin_dir, kubeconfig, "apply", "--server-side", "-f", "-",
            input=json.dumps(RESOURCE_TYPE),
        )  # fmt: skip
        kube = Kube(kubeconfig, user_agent="bindery-chaos/1")
        # Fail fast while the API server is down: a refused change is part of the chaos.
        kube.client.rest_client.pool_manager.connection_pool_kw["retries"] = False
        say(f"chaos: garbage collector ready for AgentSpecs after {warm_up_gc(kube):.1f} s")
        apiserver = ApiServer(cluster) if opts.restart_apiserver else None
        for i in range(args.runs):
            result = run_once(
                i,
                seed + i,
                opts,
                kube=kube,
                kubeconfig=str(kubeconfig),
                apiserver=apiserver,
                out_dir=out_dir,
                audit_log=state.audit_log,
            )
            results.append(result)
            say(line(result))
            for ev in result.evidence:
                if not ev.startswith("t="):
                    say(f"    {ev}")
    finally:
        cluster.down()
    return report(results, as_json=args.json)
