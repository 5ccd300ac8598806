"""The shared environment of the end-to-end benchmark's scenarios.

:class:`Env` is the local control plane (``harness.cluster.LocalCluster``, audit log on, no
nodes), the benchmark's own client and watches, and the processes it starts (the controller,
the baselines, the prefill). :class:`Bench` is what every scenario module is handed: the
environment, the options, the objects' shape and namespaces, the report, the one random
sequence, the running processes, and the changes the scenarios make.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from bench import e2e_objects as objs
from bench.e2e_changes import Changes
from bench.e2e_procs import BaselineProc, ControllerProc
from bench.e2e_profile import Profiler
from bench.e2e_profile import summarize as summarize_profile
from bench.report import Report, log
from harness.cluster import LocalCluster, kubectl
from harness.kube import Kube, Watch, audit_writes, by_agent, summarize

CONTROLLER_UA = "bindery-controller"
BASELINE_UA = "bindery-baseline"
SAME_WRITES_UA = "bindery-samewrites"
CM_SELECTOR = "app.kubernetes.io/managed-by=bindery"
REPO_ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = REPO_ROOT / "crds"
PHASES = ["throughput", "anchor", "latency", "fanout", "writes", "idle", "scale"]


def scale_agents(spec: str, agents: int) -> list[int]:
    """``--scale-agents``: comma-separated agent counts, each a number or ``Nx`` (N times the
    run's ``agents``), in increasing order."""
    out = []
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        try:
            n = round(float(item[:-1]) * agents) if item.endswith("x") else int(item)
        except ValueError:
            raise SystemExit(
                f"--scale-agents: {item!r} is neither a number of agents nor a multiple such "
                "as 10x. Fix: give e.g. --scale-agents 10000,50000"
            ) from None
        if n <= agents:
            raise SystemExit(
                f"--scale-agents: {n} agents is not more than the run's {agents}. Fix: give "
                "larger counts (the run's own namespace is always restarted first)"
            )
        out.append(n)
    return sorted(set(out))


class Env:
    """The local control plane, the benchmark's client, and where logs go."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.cluster = LocalCluster(work / "cluster", audit=True, nodes=False)
        self.state = self.cluster.up()
        self.kubeconfig = self.state.kubeconfig
        self.audit_log = self.state.audit_log
        self.kube = Kube(self.kubeconfig, "bindery-bench/1")
        self.procs: list[Any] = []
        self.watches: list[Watch] = []
        self.controller_src = REPO_ROOT

    def cpu_snapshot(self) -> dict[str, float]:
        """CPU seconds so far of the control plane's processes, this process, and the machine."""
        out = {}
        for name, pid in self.state.pids.items():
            try:
                t = psutil.Process(pid).cpu_times()
                out[name] = t.user + t.system
            except psutil.Error:
                pass
        me = psutil.Process().cpu_times()
        out["bench"] = me.user + me.system
        sys_t = psutil.cpu_times()
        out["machine busy"] = sum(sys_t) - sys_t.idle - getattr(sys_t, "iowait", 0.0)
        out["wall"] = time.monotonic()
        return out

    def cpu_since(self, before: dict[str, float], extra: dict[str, float]) -> dict[str, float]:
        now = self.cpu_snapshot()
        out = {k: round(now[k] - before.get(k, 0.0), 2) for k in now}
        out.update({k: round(v, 2) for k, v in extra.items()})
        return out

    def kubectl(self, *args: str) -> str:
        return kubectl(Path(self.state.bin_dir), Path(self.kubeconfig), *args).stdout

    def install_crds(self) -> None:
        self.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
        self.kubectl("wait", "--for=condition=Established", "-f", str(CRD_DIR), "--timeout=60s")
        # The discovery of new CRDs can lag behind Established by a moment.
        for _ in range(100):
            try:
                self.kube.request("GET", objs.path("agentspecs"))
                break
            except Exception:
                time.sleep(0.1)

    def prefill(self, namespace: str, *, cluster_scoped: bool = False) -> dict[str, int]:
        """bench/e2e_prefill.py in a child importing the measured controller's source."""
        argv = [sys.executable, "-m", "bench.e2e_prefill", "--kubeconfig", self.kubeconfig]
        argv += ["--namespace", namespace] + (["--cluster-scoped"] if cluster_scoped else [])
        paths = dict.fromkeys([str(self.controller_src), str(REPO_ROOT)])
        proc = subprocess.run(
            argv,
            cwd=self.controller_src,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"prefill of {namespace} failed:\n{proc.stderr[-3000:]}")
        written: dict[str, int] = json.loads(proc.stdout.strip().splitlines()[-1])
        return written

    def watch(self, plural: str, namespace: str, label_selector: str = "") -> Watch:
        return self.watch_path(objs.path(plural, namespace), label_selector)

    def watch_path(self, path: str, label_selector: str = "") -> Watch:
        w = Watch(self.kube, path, label_selector).start()
        self.watches.append(w)
        return w

    def unwatch(self, w: Watch) -> None:
        w.stop()
        if w in self.watches:
            self.watches.remove(w)

    def controller(self, namespace: str, tag: str, *, liveness: bool = False) -> ControllerProc:
        ctl = ControllerProc(
            self.kubeconfig,
            namespace,
            self.work / "logs" / f"controller-{tag}.log",
            src=self.controller_src,
            liveness=liveness,
        )
        self.procs.append(ctl)
        return ctl

    def baseline(self, namespace: str, writes: str = "status") -> BaselineProc:
        tag = "baseline" if writes == "status" else f"baseline-{writes}"
        base = BaselineProc(
            self.kubeconfig, namespace, self.work / "logs" / f"{tag}.log", writes=writes
        )
        self.procs.append(base)
        return base

    def create(self, bodies: list[dict[str, Any]]) -> None:
        def path_of(body: dict[str, Any]) -> str:
            plural = {
                "Resource": "resources",
                "Tool": "tools",
                "AgentSpec": "agentspecs",
                "ResourceType": "resourcetypes",
                "Namespace": "namespaces",
            }[body["kind"]]
            return objs.path(plural, body["metadata"].get("namespace", ""))

        self.kube.create_many(path_of, bodies)

    def down(self) -> None:
        for w in list(self.watches):
            w.stop()
        for p in self.procs:
            p.stop()
        self.kube.close()
        self.cluster.down()


class Bench:
    """What the scenarios share: the environment, the objects, the processes, the report."""

    def __init__(self, env: Env, args: argparse.Namespace) -> None:
        self.env = env
        self.args = args
        self.shape = objs.Shape.at(args.scale)
        self.scale_agents: list[int] = scale_agents(args.scale_agents, self.shape.agents)
        """The agents of the start-up phase's larger namespaces (see bench/e2e_scale.py)."""
        self.ctl_ns = "bench-ctl"
        self.base_ns = "bench-base"
        self.same_ns = "bench-same"
        self.anchor_ns = "bench-anchor"
        self.report = Report()
        self.rng = random.Random(args.seed)
        self.changes = Changes(env.kube, self.anchor_ns, args.timeout)
        self.ctl: ControllerProc | None = None
        self.base: BaselineProc | None = None
        self.same: BaselineProc | None = None
        self.big_prep: dict[str, Any] = {}
        self.big_thread: threading.Thread | None = None
        self.phases: list[str] = ["throughput", *(args.only or PHASES)]

    @property
    def controller(self) -> ControllerProc:
        """The running controller (the throughput scenario starts it)."""
        if self.ctl is None:
            raise RuntimeError("no controller runs: the throughput scenario starts it first")
        return self.ctl

    def setup(self) -> None:
        """The registry and the agents of every side, created before any process runs."""
        env, shape = self.env, self.shape
        t = time.monotonic()
        env.install_crds()
        namespaces = [self.ctl_ns, self.base_ns, self.same_ns]
        if "anchor" in self.phases:
            namespaces.append(self.anchor_ns)
        env.create([objs.namespace(ns) for ns in namespaces])
        env.create(objs.resource_types())
        env.create(objs.tools(self.ctl_ns) + objs.tools(self.base_ns) + objs.tools(self.same_ns))
        env.create(objs.resources(self.ctl_ns, shape))
        env.create([objs.team_issue(self.base_ns, k) for k in range(shape.teams)])
        # The same-writes baseline delivers the registered Resources of the direct bindings in
        # its ConfigMaps, as the controller does: it gets every Resource but the filler.
        env.create(
            [
                res
                for res in objs.resources(self.same_ns, shape)
                if not res["metadata"]["name"].startswith("filler-")
            ]
        )
        if "anchor" in self.phases:
            n, replicas = self.args.anchor_objects, self.args.anchor_replicas
            env.kube.create_many(
                lambda body: objs.deployments_path(self.anchor_ns),
                [objs.anchor_deployment(self.anchor_ns, k, replicas) for k in range(n)],
            )
        log(
            f"registry created: {shape.resources} Resources, 10 Tools, 7 ResourceTypes "
            f"({time.monotonic() - t:.1f} s)"
        )
        # The registry's statuses (Resources, Tools, types) are brought to what the controller
        # writes for them, so the measured starts find it as in a running cluster: only the
        # agents are new. (Computed by the controller's own reconcile code, bench/e2e_prefill.py;
        # the controller's later starts would write any status that differed: none do.)
        t = time.monotonic()
        written = env.prefill(self.ctl_ns, cluster_scoped=True)
        log(f"registry statuses written {written} ({time.monotonic() - t:.1f} s)")
        t = time.monotonic()
        env.create(
            objs.agents(self.ctl_ns, shape)
            + objs.agents(self.base_ns, shape)
            + objs.agents(self.same_ns, shape)
        )
        log(f"{3 * shape.agents} AgentSpecs created ({time.monotonic() - t:.1f} s)")

    def audit_since(self, mark: int, ua: str, changes: int) -> dict[str, Any]:
        """The writes of user agent ``ua`` in the audit log since ``mark``, for ``changes``."""
        writes = by_agent(audit_writes(self.env.audit_log, mark), ua)
        counts = summarize(writes)
        return {"changes": changes, "writes": counts, "total": sum(counts.values())}

    def profile(self, proc: Any, tag: str) -> Profiler | None:
        """py-spy on ``proc`` when ``--profile`` asks for it."""
        if not self.args.profile:
            return None
        return Profiler(proc.pid, self.args.profile / f"{tag}.txt")

    def unprofile(self, prof: Profiler | None) -> None:
        if prof is not None:
            prof.stop()
            log(summarize_profile(prof.out, 30))
