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

    .venv/bin/python -m bench.bench_e2e [--scale 1.0] [--idle-seconds 300] [--samples 200]

See bench/README.md for what each figure means and bench/RESULTS.md for recorded runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import psutil

from bench import e2e_objects as objs
from bench.e2e_procs import BaselineProc, ControllerProc, KopfFloorProc, wait_settled
from bench.e2e_profile import Profiler
from bench.e2e_profile import available as profiler_available
from bench.e2e_profile import summarize as summarize_profile
from harness.cluster import LocalCluster, kubectl
from harness.kube import Kube, Watch, audit_mark, audit_writes, by_agent, summarize

CONTROLLER_UA = "bindery-controller"
BASELINE_UA = "bindery-baseline"
SAME_WRITES_UA = "bindery-samewrites"
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"

THROUGHPUT_TARGET = 1.5
LATENCY_TARGET = 3.0
STARTUP_TARGET_S = 60.0
RSS_TARGET_MIB = 1024.0
THROUGHPUT_SAME_TARGET = 1.3
CPU_PER_AGENT_TARGET_MS = 5.0
ANCHOR_TARGET = 1.0
FANOUT_SAME_TARGET = 1.2
PHASES = ["throughput", "anchor", "latency", "fanout", "writes", "idle", "scale"]
CM_SELECTOR = "app.kubernetes.io/managed-by=bindery"


@dataclass
class Row:
    """One figure of the final table."""

    bench: str
    figure: str
    value: str
    target: str = ""
    ratio: float | None = None
    ok: bool | None = None
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        self.rows.append(row)
        return row


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation, as numpy's default."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# ============================================================================ the environment


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
        self.controller_src = Path(__file__).resolve().parent.parent

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
        bench_root = Path(__file__).resolve().parent.parent
        argv = [sys.executable, "-m", "bench.e2e_prefill", "--kubeconfig", self.kubeconfig]
        argv += ["--namespace", namespace] + (["--cluster-scoped"] if cluster_scoped else [])
        paths = dict.fromkeys([str(self.controller_src), str(bench_root)])
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
        w = Watch(self.kube, objs.path(plural, namespace), label_selector).start()
        self.watches.append(w)
        return w

    def unwatch(self, w: Watch) -> None:
        w.stop()
        if w in self.watches:
            self.watches.remove(w)

    def controller(self, namespace: str, tag: str) -> ControllerProc:
        ctl = ControllerProc(
            self.kubeconfig,
            namespace,
            self.work / "logs" / f"controller-{tag}.log",
            src=self.controller_src,
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


# ============================================================================ the benchmark


class E2E:
    def __init__(self, env: Env, args: argparse.Namespace) -> None:
        self.env = env
        self.args = args
        self.shape = objs.Shape.at(args.scale)
        self.big = objs.Shape(agents=self.shape.agents * 10, resources=self.shape.resources)
        self.ctl_ns = "bench-ctl"
        self.base_ns = "bench-base"
        self.same_ns = "bench-same"
        self.anchor_ns = "bench-anchor"
        self.report = Report()
        self.rng = random.Random(args.seed)
        self.ctl: ControllerProc | None = None
        self.base: BaselineProc | None = None
        self.same: BaselineProc | None = None
        self.versions: dict[str, int] = {}
        self.alias_version = 0
        self.anchor_rev = 0
        self.written: dict[str, Any] = {}
        self.big_ns = "bench-big"
        self.big_prep: dict[str, Any] = {}
        self.big_thread: threading.Thread | None = None
        self.phases: list[str] = ["throughput", *(args.only or PHASES)]

    # ------------------------------------------------------------------------ set-up

    def setup(self) -> None:
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
                lambda body: deployments_path(self.anchor_ns),
                [anchor_deployment(self.anchor_ns, k, replicas) for k in range(n)],
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

    # ------------------------------------------------------------------------ 1. throughput

    def throughput(self) -> None:
        env, n = self.env, self.shape.agents
        r = self.report
        times: dict[str, dict[str, float]] = {}
        writes: dict[str, dict[str, int]] = {}
        sizes: dict[str, dict[str, float]] = {}
        runs = (
            ("baseline", self.base_ns),
            ("same-writes", self.same_ns),
            ("controller", self.ctl_ns),
        )
        floor = self._kopf_floor()
        for who, ns in runs:
            agents = env.watch("agentspecs", ns)
            first = agents.track(objs.ready_current, 1)
            done = agents.track(objs.ready_current, n)
            mark = audit_mark(env.audit_log)
            cpu0 = env.cpu_snapshot()
            proc: Any
            if who == "baseline":
                proc = self.base = env.baseline(ns).start()
            elif who == "same-writes":
                proc = self.same = env.baseline(ns, writes="same").start()
            else:
                proc = self.ctl = env.controller(ns, "main").start()
            prof = self._profile(proc, f"throughput-{who}")
            end = done.wait(self.args.timeout)
            cpu = env.cpu_since(cpu0, {"client": proc.cpu_seconds()})
            self._unprofile(prof)
            proc.check()
            spawn = proc.spawned_at
            times[who] = {
                "total_s": end - spawn,
                "first_ready_s": (first.done_at or end) - spawn,
                "drain_s": end - (first.done_at or end),
            }
            if who == "controller":
                assert isinstance(proc, ControllerProc)
                times[who]["started_log_s"] = proc.started_at() or float("nan")
                settled = wait_settled(proc, n)
                times[who]["settled_s"] = settled.settled_s
            time.sleep(1.0)
            ua = {"controller": CONTROLLER_UA, "baseline": BASELINE_UA}.get(who, SAME_WRITES_UA)
            writes[who] = summarize(by_agent(audit_writes(env.audit_log, mark), ua))
            sizes[who] = self._sizes(agents, ns)
            env.unwatch(agents)
            times[who]["cpu"] = cpu  # type: ignore[assignment]
            log(f"throughput {who}: {times[who]} writes {writes[who]}")
        c, b = times["controller"]["total_s"], times["baseline"]["total_s"]
        ratio = c / b
        r.data["throughput"] = {"times": times, "writes": writes, "agents": n, "bytes": sizes}
        r.add(
            "1 throughput",
            f"{n} agents to Ready: controller / baseline",
            f"{c:.2f} s / {b:.2f} s",
            f"<= {THROUGHPUT_TARGET}x",
            ratio / THROUGHPUT_TARGET,
            ratio <= THROUGHPUT_TARGET,
            f"ratio {ratio:.2f}x",
        )
        cd = times["controller"]["drain_s"]
        bd = times["baseline"]["drain_s"]
        r.add(
            "1 throughput",
            "  of which first Ready -> last Ready",
            f"{cd:.2f} s / {bd:.2f} s",
            "",
            None,
            None,
            f"ratio {cd / bd:.2f}x; {n / cd:.0f} vs {n / bd:.0f} agents/s",
        )
        r.add(
            "1 throughput",
            "  of which spawn -> first Ready",
            f"{times['controller']['first_ready_s']:.2f} s / "
            f"{times['baseline']['first_ready_s']:.2f} s",
            "",
            None,
            None,
            f"controller LIST done at {times['controller']['started_log_s']:.2f} s",
        )
        cw = sum(writes["controller"].values())
        bw = sum(writes["baseline"].values())
        r.add(
            "1 throughput",
            "  API writes",
            f"{cw} / {bw}",
            "",
            None,
            None,
            f"{cw / n:.2f} vs {bw / n:.2f} per agent",
        )
        self._throughput_same(times, writes, sizes, n)
        self._floor_rows(floor, times, n)

    def _kopf_floor(self) -> dict[str, float]:
        """bench/e2e_kopf_floor.py on the controller's namespace, before the controller starts:
        the same objects, listed by kopf alone (no-op handlers, the controller's settings)."""
        env, ns = self.env, self.ctl_ns
        expect = len(env.kube.list_all(objs.path("resourcetypes"))) + sum(
            len(env.kube.list_all(objs.path(plural, ns)))
            for plural in ("resources", "tools", "agentspecs")
        )
        proc = KopfFloorProc(env.kubeconfig, ns, expect, env.work / "logs" / "kopf-floor.log")
        env.procs.append(proc)
        cpu0 = env.cpu_snapshot()
        figures = proc.start().result(self.args.timeout)
        figures["apiserver_cpu_s"] = env.cpu_since(cpu0, {}).get("kube-apiserver", float("nan"))
        log(f"kopf floor: {figures}")
        time.sleep(1.0)
        return figures

    def _floor_rows(
        self, floor: dict[str, float], times: dict[str, dict[str, Any]], n: int
    ) -> None:
        """The least any kopf-based controller pays for these objects, beside the controller."""
        self.report.data["throughput"]["kopf_floor"] = floor
        ms = floor["cpu_s"] / n * 1000
        ctl_ms = times["controller"]["cpu"]["client"] / n * 1000
        same_ms = times["same-writes"]["cpu"]["client"] / n * 1000
        self.report.add(
            "1 throughput",
            "  kopf floor: kopf alone lists the same objects (no-op handlers)",
            f"{floor['listed_s']:.2f} s; {ms:.1f} ms CPU per agent",
            "",
            None,
            None,
            f"{floor['listed']:.0f} objects; CPU {floor['cpu_s']:.2f} s, imports "
            f"{floor['imports_cpu_s']:.2f} s of it; controller's first Ready at "
            f"{times['controller']['first_ready_s']:.2f} s",
        )
        self.report.add(
            "1 throughput",
            "  controller CPU per new agent above the kopf floor",
            f"{ctl_ms - ms:.1f} ms",
            "",
            None,
            None,
            f"same-writes baseline (no kopf) {same_ms:.1f} ms; kopf floor + same-writes "
            f"{ms + same_ms:.1f} ms against the {CPU_PER_AGENT_TARGET_MS:g} ms target",
        )

    def _sizes(self, agents: Watch, ns: str) -> dict[str, float]:
        """Mean bytes of an agent's status and of its bindings.json: both sides' writes alike?"""
        bodies = [agents.get(objs.agent_name(i)) or {} for i in range(self.shape.agents)]
        status = [len(json.dumps(b.get("status") or {})) for b in bodies]
        objects = [len(json.dumps(b)) for b in bodies]
        cms = self.env.kube.list_all(objs.path("configmaps", ns), CM_SELECTOR)
        docs = [len((c.get("data") or {}).get("bindings.json", "")) for c in cms]
        cm_objects = [len(json.dumps(c)) for c in cms]
        self.report.data.setdefault("examples", {})[ns] = {
            "agent": bodies[0],
            "bindings_json": next(
                (
                    (c.get("data") or {}).get("bindings.json")
                    for c in cms
                    if c["metadata"]["name"] == f"{objs.agent_name(0)}-bindings"
                ),
                None,
            ),
        }
        return {
            "status": sum(status) / max(1, len(status)),
            "bindings_json": sum(docs) / max(1, len(docs)),
            "config_maps": len(docs),
            # what a write's response carries back (managedFields included)
            "agent_object": sum(objects) / max(1, len(objects)),
            "config_map_object": sum(cm_objects) / max(1, len(cm_objects)),
        }

    def _throughput_same(
        self,
        times: dict[str, dict[str, Any]],
        writes: dict[str, dict[str, int]],
        sizes: dict[str, dict[str, float]],
        n: int,
    ) -> None:
        """Issue 18: the controller against the same writes, and its CPU per new agent."""
        r = self.report
        c, s = times["controller"]["total_s"], times["same-writes"]["total_s"]
        ratio = c / s
        sw = sum(writes["same-writes"].values())
        cs, ss = sizes["controller"], sizes["same-writes"]
        r.add(
            "1 throughput",
            f"{n} agents to Ready: controller / same-writes baseline",
            f"{c:.2f} s / {s:.2f} s",
            f"<= {THROUGHPUT_SAME_TARGET}x",
            ratio / THROUGHPUT_SAME_TARGET,
            ratio <= THROUGHPUT_SAME_TARGET,
            f"ratio {ratio:.2f}x; baseline writes {sw / n:.2f} per agent; bytes per status "
            f"{cs['status']:.0f} vs {ss['status']:.0f}, per bindings.json "
            f"{cs['bindings_json']:.0f} vs {ss['bindings_json']:.0f}",
        )
        sd = times["same-writes"]["drain_s"]
        cd = times["controller"]["drain_s"]
        r.add(
            "1 throughput",
            "  of which first Ready -> last Ready (same-writes)",
            f"{cd:.2f} s / {sd:.2f} s",
            "",
            None,
            None,
            f"ratio {cd / sd:.2f}x; spawn -> first Ready "
            f"{times['controller']['first_ready_s']:.2f} s / "
            f"{times['same-writes']['first_ready_s']:.2f} s",
        )
        cpu = {who: times[who]["cpu"] for who in times}
        per = {who: cpu[who]["client"] / n * 1000 for who in cpu}
        api = {who: cpu[who].get("kube-apiserver", float("nan")) for who in cpu}
        r.data["throughput"]["cpu_ms_per_agent"] = per
        r.add(
            "1 throughput",
            "controller CPU per new agent (spawn -> last Ready)",
            f"{per['controller']:.1f} ms",
            f"<= {CPU_PER_AGENT_TARGET_MS:g} ms",
            per["controller"] / CPU_PER_AGENT_TARGET_MS,
            per["controller"] <= CPU_PER_AGENT_TARGET_MS,
            f"baselines: one-write {per['baseline']:.1f} ms, same-writes "
            f"{per['same-writes']:.1f} ms; kube-apiserver CPU-s {api['controller']:.1f} "
            f"(controller) / {api['same-writes']:.1f} (same-writes) / "
            f"{api['baseline']:.1f} (one-write)",
        )

    def _profile(self, proc: Any, tag: str) -> Any:
        if not self.args.profile:
            return None
        return Profiler(proc.pid, self.args.profile / f"{tag}.txt")

    def _unprofile(self, prof: Any) -> None:
        if prof is not None:
            prof.stop()
            log(summarize_profile(prof.out, 30))

    # ------------------------------------------------------------------------ 2. latency

    def _change_binding(self, ns: str, i: int) -> str:
        key = f"{ns}/{i}"
        v = self.versions[key] = self.versions.get(key, 0) + 1
        uri = objs.notes_uri(i, v)
        self.written = self.env.kube.json_patch(
            objs.path("agentspecs", ns, objs.agent_name(i)),
            [
                {"op": "test", "path": "/spec/resources/2/name", "value": "notes"},
                {"op": "replace", "path": "/spec/resources/2/uri", "value": uri},
            ],
        )
        return uri

    def _change_template(self, name: str) -> None:
        self.anchor_rev += 1
        self.written = self.env.kube.merge_patch(
            f"{deployments_path(self.anchor_ns)}/{name}",
            {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {ANCHOR_ANNOTATION: str(self.anchor_rev)}}
                    }
                }
            },
        )

    def _generation_sample(self, w: Watch, name: str, change: Callable[[], Any]) -> float:
        """Seconds from the spec PATCH to the first event of ``name`` whose
        status.observedGeneration reaches the generation the PATCH made."""
        body = w.get(name)
        if body is None:
            raise RuntimeError(f"{name} is not in the benchmark's watch of {w.path}")
        gen = int(body["metadata"]["generation"]) + 1
        tr = w.track(functools.partial(_observed_at_least, gen=gen), 1, [name])
        t0 = time.monotonic()
        try:
            change()
            got = int(self.written["metadata"]["generation"])
            if got != gen:
                raise RuntimeError(
                    f"{w.path}/{name}: the spec PATCH made generation {got}, expected {gen} "
                    "(the watch was behind, or something else changed the spec): rerun"
                )
            end = tr.wait(self.args.timeout)
        finally:
            w.untrack(tr)
        return float(end - t0)

    # ------------------------------------------------------------------------ 2. anchor

    def anchor(self) -> None:
        """AgentSpec binding change vs Deployment template change, interleaved (issue 18)."""
        env, r = self.env, self.report
        assert self.ctl is not None
        n_obj, samples = self.args.anchor_objects, self.args.anchor_samples
        # Each change leaves work behind after its status (the Deployment's: pods, events,
        # ReplicaSet status; the controller's: its watch echoes): the gap lets it finish, so that
        # neither side's sample pays for the other's tail.
        gap = self.args.anchor_gap
        deps = Watch(env.kube, deployments_path(self.anchor_ns)).start()
        env.watches.append(deps)
        agents = env.watch("agentspecs", self.ctl_ns)
        current = deps.track(objs.current, n_obj)
        current.wait(self.args.timeout)
        deps.untrack(current)
        wait_settled(self.ctl, 0)
        picks = self.rng.sample(range(self.shape.agents), min(n_obj, self.shape.agents))
        res: dict[str, list[float]] = {"agentspec": [], "deployment": []}
        started: dict[str, list[float]] = {"agentspec": [], "deployment": []}
        mark = audit_mark(env.audit_log)
        log(f"anchor: {samples} samples each, {n_obj} objects each, interleaved")
        t_start = time.monotonic()
        for k in range(samples):
            started["agentspec"].append(time.monotonic() - t_start)
            i = picks[k % len(picks)]
            res["agentspec"].append(
                self._generation_sample(
                    agents,
                    objs.agent_name(i),
                    functools.partial(self._change_binding, self.ctl_ns, i),
                )
            )
            time.sleep(gap + self.rng.uniform(0, 0.02))
            name = anchor_name(k % n_obj)
            started["deployment"].append(time.monotonic() - t_start)
            res["deployment"].append(
                self._generation_sample(deps, name, functools.partial(self._change_template, name))
            )
            time.sleep(gap + self.rng.uniform(0, 0.02))
        time.sleep(1.0)
        writes = audit_writes(env.audit_log, mark)
        per = {
            "controller": summarize(by_agent(writes, CONTROLLER_UA)),
            "kube-controller-manager": summarize(
                w
                for w in writes
                if w.namespace == self.anchor_ns and "controller-manager" in w.user_agent
            ),
        }
        env.unwatch(agents)
        env.unwatch(deps)
        a, d = res["agentspec"], res["deployment"]
        r.data["anchor"] = {
            "samples": {k: sorted(v) for k, v in res.items()},
            # in order: (seconds since the phase started, latency), to find what a slow one met
            "timeline": {k: list(zip(started[k], v, strict=True)) for k, v in res.items()},
            "objects": n_obj,
            "replicas": self.args.anchor_replicas,
            "gap_s": gap,
            "writes": per,
        }
        a50, a99, d50, d99 = pct(a, 0.5), pct(a, 0.99), pct(d, 0.5), pct(d, 0.99)
        r50, r99 = a50 / d50, a99 / d99
        log(
            f"anchor: AgentSpec p50 {a50 * 1000:.0f} p99 {a99 * 1000:.0f} ms; Deployment "
            f"p50 {d50 * 1000:.0f} p99 {d99 * 1000:.0f} ms; writes {per}"
        )
        dw = sum(per["kube-controller-manager"].values()) / max(1, len(d))
        r.add(
            "2 anchor",
            f"Deployment template change -> observedGeneration ({len(d)})",
            f"p50 {d50 * 1000:.0f} ms, p99 {d99 * 1000:.0f} ms",
            "",
            None,
            None,
            f"kube-controller-manager, {n_obj} Deployments of {self.args.anchor_replicas} "
            f"replica(s), no nodes; {dw:.2f} writes in the namespace per change; "
            f"{gap:g} s between samples",
        )
        r.add(
            "2 anchor",
            f"AgentSpec binding change -> observedGeneration ({len(a)})",
            f"p50 {a50 * 1000:.0f} ms, p99 {a99 * 1000:.0f} ms",
            "p50 and p99 <= Deployment's",
            max(r50, r99) / ANCHOR_TARGET,
            max(r50, r99) <= ANCHOR_TARGET,
            f"p50 ratio {r50:.2f}x, p99 ratio {r99:.2f}x; interleaved with the Deployments",
        )

    def _change_alias(self, ns: str, team: int) -> str:
        self.alias_version += 1
        alias = f"issue-v{self.alias_version}"
        self.env.kube.merge_patch(
            objs.path("resources", ns, objs.team_issue_name(team)), {"spec": {"alias": alias}}
        )
        return alias

    def _sample(
        self,
        trackers: Callable[[], list[Any]],
        change: Callable[[], Any],
    ) -> float:
        """Arm the trackers, make the change, wait for every tracker: seconds from the change."""
        armed = trackers()
        t0 = time.monotonic()
        change()
        try:
            end = max(tr.wait(self.args.timeout) for _, tr in armed)
        finally:
            for w, tr in armed:
                w.untrack(tr)
        return float(end - t0)

    def latency(self) -> None:
        env, shape, r = self.env, self.shape, self.report
        samples = self.args.samples
        fan_samples = self.args.fanout_samples
        cm_sel = "app.kubernetes.io/managed-by=bindery"
        results: dict[str, dict[str, list[float]]] = {}
        audit: dict[str, Any] = {}
        for who, ns in (("controller", self.ctl_ns), ("baseline", self.base_ns)):
            agents = env.watch("agentspecs", ns)
            cms = env.watch("configmaps", ns, cm_sel) if who == "controller" else None
            if who == "controller":
                assert self.ctl is not None
                wait_settled(self.ctl, 0)
            res: dict[str, list[float]] = {"binding": [], "fanout": []}
            ua = CONTROLLER_UA if who == "controller" else BASELINE_UA

            # ---- one binding of one agent
            mark = audit_mark(env.audit_log)
            for _ in range(samples):
                i = self.rng.randrange(shape.agents)
                name = objs.agent_name(i)
                nxt = objs.notes_uri(i, self.versions.get(f"{ns}/{i}", 0) + 1)

                def arm_binding(
                    name: str = name, nxt: str = nxt, agents: Watch = agents, cms: Any = cms
                ) -> list[Any]:
                    out = [(agents, agents.track(lambda b: objs.status_has_uri(b, nxt), 1, [name]))]
                    if cms is not None:
                        cm = f"{name}-bindings"
                        pred = _cm_contains(json.dumps(nxt))
                        out.append((cms, cms.track(pred, 1, [cm])))
                    return out

                res["binding"].append(
                    self._sample(arm_binding, functools.partial(self._change_binding, ns, i))
                )
                time.sleep(self.rng.uniform(0, 0.02))
            time.sleep(1.0)
            audit[f"{who} binding"] = self._audit_since(mark, ua, samples)

            # ---- one Resource with 50 dependents
            mark = audit_mark(env.audit_log)
            for _ in range(fan_samples):
                team = self.rng.randrange(shape.teams)
                deps = [
                    objs.agent_name(i)
                    for i in range(shape.agents)
                    if objs.team_of(i, shape) == team
                ]
                alias = f"issue-v{self.alias_version + 1}"
                uri = objs.team_issue_uri(team)

                arm_fanout = functools.partial(_arm_fanout, deps, alias, uri, agents, cms)
                res["fanout"].append(
                    self._sample(arm_fanout, functools.partial(self._change_alias, ns, team))
                )
                time.sleep(self.rng.uniform(0, 0.02))
            time.sleep(1.0)
            audit[f"{who} fanout"] = self._audit_since(mark, ua, fan_samples)
            env.unwatch(agents)
            if cms is not None:
                env.unwatch(cms)
            results[who] = res
            log(
                f"latency {who}: binding p50 {pct(res['binding'], 0.5) * 1000:.0f} ms "
                f"p99 {pct(res['binding'], 0.99) * 1000:.0f} ms; fan-out p50 "
                f"{pct(res['fanout'], 0.5) * 1000:.0f} ms "
                f"p99 {pct(res['fanout'], 0.99) * 1000:.0f} ms"
            )
        r.data["latency"] = {
            k: {kk: sorted(vv) for kk, vv in v.items()} for k, v in results.items()
        }
        r.data["latency_writes"] = audit
        base_rt = results["baseline"]["binding"]
        base_p50, base_p99 = pct(base_rt, 0.5), pct(base_rt, 0.99)
        r.add(
            "2 latency",
            f"baseline watch-to-patch round trip ({len(base_rt)})",
            f"p50 {base_p50 * 1000:.0f} ms, p99 {base_p99 * 1000:.0f} ms",
        )
        for kind, label in (
            ("binding", "one binding changed: status + ConfigMap"),
            ("fanout", f"Resource with {objs.TEAM_SIZE} dependents: all statuses + ConfigMaps"),
        ):
            xs = results["controller"][kind]
            p50, p99 = pct(xs, 0.5), pct(xs, 0.99)
            ratio = p99 / base_p99
            r.add(
                "2 latency",
                f"{label} ({len(xs)})",
                f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms",
                f"p99 <= {LATENCY_TARGET}x baseline",
                ratio / LATENCY_TARGET,
                ratio <= LATENCY_TARGET,
                f"p99 ratio {ratio:.2f}x",
            )
        bf = results["baseline"]["fanout"]
        cf = results["controller"]["fanout"]
        r.add(
            "2 latency",
            f"  baseline fan-out: {objs.TEAM_SIZE} status patches ({len(bf)})",
            f"p50 {pct(bf, 0.5) * 1000:.0f} ms, p99 {pct(bf, 0.99) * 1000:.0f} ms",
            "",
            None,
            None,
            f"controller/baseline p99 {pct(cf, 0.99) / pct(bf, 0.99):.2f}x",
        )

    def _audit_since(self, mark: int, ua: str, changes: int) -> dict[str, Any]:
        writes = by_agent(audit_writes(self.env.audit_log, mark), ua)
        counts = summarize(writes)
        return {"changes": changes, "writes": counts, "total": sum(counts.values())}

    def fanout(self) -> None:
        """A Resource with 50 dependents: the controller interleaved with the same-writes
        baseline's own fan-out (50 ConfigMap patches + 50 status patches), issue 18."""
        env, shape, r = self.env, self.shape, self.report
        assert self.ctl is not None
        assert self.same is not None
        sides = {
            who: (
                ns,
                env.watch("agentspecs", ns),
                env.watch("configmaps", ns, CM_SELECTOR),
            )
            for who, ns in (("controller", self.ctl_ns), ("same-writes", self.same_ns))
        }
        wait_settled(self.ctl, 0)
        samples = self.args.fanout_samples
        res: dict[str, list[float]] = {"controller": [], "same-writes": []}
        mark = audit_mark(env.audit_log)
        for _ in range(samples):
            for who, (ns, agents, cms) in sides.items():
                team = self.rng.randrange(shape.teams)
                deps = [
                    objs.agent_name(i)
                    for i in range(shape.agents)
                    if objs.team_of(i, shape) == team
                ]
                alias = f"issue-v{self.alias_version + 1}"
                arm = functools.partial(
                    _arm_fanout, deps, alias, objs.team_issue_uri(team), agents, cms
                )
                res[who].append(self._sample(arm, functools.partial(self._change_alias, ns, team)))
                time.sleep(self.rng.uniform(0, 0.02))
        time.sleep(1.0)
        audit = {
            "controller": self._audit_since(mark, CONTROLLER_UA, samples),
            "same-writes": self._audit_since(mark, SAME_WRITES_UA, samples),
        }
        for _, agents, cms in sides.values():
            env.unwatch(agents)
            env.unwatch(cms)
        r.data["fanout_same"] = {
            "samples": {k: sorted(v) for k, v in res.items()},
            "writes": audit,
        }
        c, b = res["controller"], res["same-writes"]
        c99, b99 = pct(c, 0.99), pct(b, 0.99)
        ratio = c99 / b99
        cw, bw = (audit[k]["total"] / max(1, samples) for k in ("controller", "same-writes"))
        log(f"fan-out: controller p99 {c99 * 1000:.0f} ms, same-writes p99 {b99 * 1000:.0f} ms")
        r.add(
            "2 fan-out",
            f"Resource with {objs.TEAM_SIZE} dependents, interleaved: controller ({len(c)})",
            f"p50 {pct(c, 0.5) * 1000:.0f} ms, p99 {c99 * 1000:.0f} ms",
            f"p99 <= {FANOUT_SAME_TARGET}x same-writes",
            ratio / FANOUT_SAME_TARGET,
            ratio <= FANOUT_SAME_TARGET,
            f"p99 ratio {ratio:.2f}x, p50 ratio {pct(c, 0.5) / pct(b, 0.5):.2f}x; "
            f"{cw:.2f} writes per change",
        )
        r.add(
            "2 fan-out",
            f"  same-writes baseline: {objs.TEAM_SIZE} ConfigMaps + statuses ({len(b)})",
            f"p50 {pct(b, 0.5) * 1000:.0f} ms, p99 {b99 * 1000:.0f} ms",
            "",
            None,
            None,
            f"{bw:.2f} writes per change",
        )

    # ------------------------------------------------------------------------ 3. writes

    def write_amplification(self) -> None:
        env, shape, r = self.env, self.shape, self.report
        assert self.ctl is not None
        agents = env.watch("agentspecs", self.ctl_ns)
        n = min(20, shape.agents)
        picks = self.rng.sample(range(shape.agents), n)

        # a spec change that changes no delivered binding: relaunchGeneration (no runtime)
        mark = audit_mark(env.audit_log)
        for i in picks:
            name = objs.agent_name(i)
            body = agents.get(name) or {}
            gen = int(body["metadata"]["generation"]) + 1
            tr = agents.track(functools.partial(_current_at, gen=gen), 1, [name])
            rg = int((body.get("spec") or {}).get("relaunchGeneration", 0)) + 1
            env.kube.merge_patch(
                objs.path("agentspecs", self.ctl_ns, name), {"spec": {"relaunchGeneration": rg}}
            )
            tr.wait(self.args.timeout)
            agents.untrack(tr)
        wait_settled(self.ctl, 0, quiet_window=1.0)
        spec_only = self._audit_since(mark, CONTROLLER_UA, n)

        # a label-only change: no generation bump, nothing to do
        mark = audit_mark(env.audit_log)
        for k, i in enumerate(picks):
            env.kube.merge_patch(
                objs.path("agentspecs", self.ctl_ns, objs.agent_name(i)),
                {"metadata": {"labels": {"bench-touch": str(k)}}},
            )
            time.sleep(0.05)
        wait_settled(self.ctl, 0, quiet_window=1.5)
        labels_only = self._audit_since(mark, CONTROLLER_UA, n)
        env.unwatch(agents)

        lw = r.data.get("latency_writes", {})
        tp = r.data.get("throughput", {})
        cases = [
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
                2 * objs.TEAM_SIZE + 1,
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
            total = sum(writes.values())
            per = total / max(1, changes)
            detail = (
                ", ".join(f"{k}: {v / max(1, changes):.2f}" for k, v in writes.items()) or "none"
            )
            r.add(
                "3 writes",
                f"writes per change: {name}",
                f"{per:.2f}",
                {
                    0: "0",
                    1: "1 (status)",
                    2: "2 (status + ConfigMap)",
                    2 * objs.TEAM_SIZE + 1: f"{2 * objs.TEAM_SIZE + 1} (1 + {objs.TEAM_SIZE} x 2)",
                }[target],
                None if target == 0 else per / target,
                per <= target + 1e-9,
                detail,
            )

    def idle(self) -> None:
        env, r = self.env, self.report
        assert self.ctl is not None
        wait_settled(self.ctl, 0, quiet_window=2.0)
        seconds = self.args.idle_seconds
        log(f"idle window: {seconds} s with {self.shape.agents} agents")
        mark = audit_mark(env.audit_log)
        if "scale" in self.phases and not self.big_prep:
            # The 10x namespace is prepared meanwhile by the benchmark's own client (another
            # namespace, which this controller does not watch): the API server is busy, the
            # controller must still have nothing to write.
            self.big_thread = threading.Thread(target=self._prepare_big_safely, daemon=True)
            self.big_thread.start()
        cpu0, t0 = self.ctl.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        cpu = self.ctl.cpu_seconds() - cpu0
        elapsed = time.monotonic() - t0
        writes = audit_writes(env.audit_log, mark)
        ours = by_agent(writes, CONTROLLER_UA)
        others = {
            w.user_agent.split(" ")[0]: 0
            for w in writes
            if not w.user_agent.startswith(CONTROLLER_UA)
        }
        for w in writes:
            if not w.user_agent.startswith(CONTROLLER_UA):
                others[w.user_agent.split(" ")[0]] += 1
        in_ns = [w for w in writes if w.namespace == self.ctl_ns]
        r.data["idle"] = {
            "seconds": elapsed,
            "controller_writes": summarize(ours),
            "writes_in_namespace_by_anyone": summarize(in_ns),
            "other_user_agents": others,
            "controller_cpu_s": cpu,
        }
        r.add(
            "3 writes",
            f"controller writes while idle ({elapsed:.0f} s, {self.shape.agents} agents)",
            str(len(ours)),
            "0",
            None,
            len(ours) == 0,
            f"{len(in_ns)} writes in the namespace by anyone; "
            f"controller CPU {cpu / elapsed * 100:.2f}%",
        )

    # ------------------------------------------------------------------------ 4. scale

    def prepare_big(self) -> None:
        """The 10x namespace: the same registry, 10x the agents, statuses and ConfigMaps current
        (computed by the controller's own reconcile code, see bench/e2e_prefill.py)."""
        env, big = self.env, self.big
        t = time.monotonic()
        env.create([objs.namespace(self.big_ns)])
        env.create(objs.tools(self.big_ns) + objs.resources(self.big_ns, big))
        env.create(objs.agents(self.big_ns, big))
        created = time.monotonic() - t
        written = env.prefill(self.big_ns)
        self.big_prep = {"created_s": created, "total_s": time.monotonic() - t, **written}
        log(f"{self.big_ns}: {big.agents} agents prepared {self.big_prep}")

    def _prepare_big_safely(self) -> None:
        try:
            self.prepare_big()
        except Exception as exc:  # reported by scale()
            log(f"preparing {self.big_ns} failed: {exc!r}")

    def _restart(self, namespace: str, agents: int, tag: str) -> dict[str, Any]:
        env = self.env
        if self.ctl is not None:
            self.ctl.stop()
            time.sleep(1.0)
        mark = audit_mark(env.audit_log)
        ctl = self.ctl = env.controller(namespace, tag).start()
        prof = self._profile(ctl, tag)
        objects = agents + self.shape.resources + 10 + 7
        settled = wait_settled(ctl, objects, timeout=self.args.timeout)
        self._unprofile(prof)
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

    def scale(self) -> None:
        r = self.report
        if self.big_thread is not None:
            self.big_thread.join()
        elif not self.big_prep:
            self.prepare_big()
        if not self.big_prep:
            raise RuntimeError("preparing the 10x namespace failed (see the log above)")
        small = self._restart(self.ctl_ns, self.shape.agents, "restart-small")
        big = self._restart(self.big_ns, self.big.agents, "restart-big")
        r.data["scale"] = {"small": small, "big": big, "big_prep": self.big_prep}

        def grow(key: str) -> str:
            return f"x{big[key] / small[key]:.2f}" if small[key] else ""

        for label, row in ((f"{small['agents']}", small), (f"{big['agents']}", big)):
            is_big = row is big
            r.add(
                "4 scale",
                f"start-up, {label} agents (spawn -> indexed, reconciled, quiet)",
                f"{row['startup_s']:.1f} s",
                f"<= {STARTUP_TARGET_S:g} s" if is_big else "",
                row["startup_s"] / STARTUP_TARGET_S if is_big else None,
                row["startup_s"] <= STARTUP_TARGET_S if is_big else None,
                f"LIST done {row['indexed_s']:.1f} s, queue drained {row['reconciled_s']:.1f} s, "
                f"CPU {row['cpu_s']:.1f} s, {row['writes']} writes"
                + (f"; growth {grow('startup_s')}" if is_big else ""),
            )
            r.add(
                "4 scale",
                f"RSS, {label} agents (after start-up; peak)",
                f"{row['rss_mib']:.0f} MiB; {row['hwm_mib']:.0f} MiB",
                f"<= {RSS_TARGET_MIB:g} MiB",
                row["hwm_mib"] / RSS_TARGET_MIB,
                row["hwm_mib"] <= RSS_TARGET_MIB,
                f"growth {grow('rss_mib')} (peak {grow('hwm_mib')})" if is_big else "",
            )

    # ------------------------------------------------------------------------ all

    def run(self) -> Report:
        phases = self.phases
        self.setup()
        self.throughput()
        if "anchor" in phases:
            self.anchor()
        if "latency" in phases:
            self.latency()
        if "fanout" in phases:
            self.fanout()
        for base in (self.base, self.same):
            if base is not None:
                base.stop()
        if "writes" in phases:
            self.write_amplification()
        if "idle" in phases and self.args.idle_seconds > 0:
            self.idle()
        if "scale" in phases:
            self.scale()
        return self.report


def _current_at(body: dict[str, Any], *, gen: int) -> bool:
    return objs.current(body) and body["metadata"]["generation"] == gen


def _observed_at_least(body: dict[str, Any], *, gen: int) -> bool:
    observed = (body.get("status") or {}).get("observedGeneration")
    return isinstance(observed, int) and observed >= gen


def _arm_fanout(
    deps: list[str], alias: str, uri: str, agents: Watch, cms: Watch | None
) -> list[Any]:
    """Trackers for a fan-out sample: every dependent's status, and its ConfigMap if watched,
    shows the Resource's new alias."""
    out = [
        (
            agents,
            agents.track(lambda b: objs.status_has_alias(b, uri, alias), len(deps), deps),
        )
    ]
    if cms is not None:
        names = [f"{d}-bindings" for d in deps]
        pred = _cm_contains(f'"alias": {json.dumps(alias)}')
        out.append((cms, cms.track(pred, len(deps), names)))
    return out


# ============================================================================ the anchor

ANCHOR_ANNOTATION = "bench.bindery.dev/revision"


def deployments_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


def anchor_name(k: int) -> str:
    return f"anchor-{k}"


def anchor_deployment(namespace: str, k: int, replicas: int) -> dict[str, Any]:
    """A Deployment for the latency anchor; its template changes by an annotation."""
    labels = {"app": anchor_name(k)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": anchor_name(k), "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {ANCHOR_ANNOTATION: "0"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def _cm_contains(needle: str) -> Callable[[dict[str, Any]], bool]:
    def pred(cm: dict[str, Any]) -> bool:
        return needle in ((cm.get("data") or {}).get("bindings.json") or "")

    return pred


# ============================================================================ output


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


def print_table(rows: Sequence[Row], file: Any = sys.stdout) -> None:
    head = ("benchmark", "figure", "value", "target", "ratio", "met", "notes")
    cells = [
        (
            r.bench,
            r.figure,
            r.value,
            r.target,
            "" if r.ratio is None else f"{r.ratio:.2f}",
            "" if r.ok is None else ("yes" if r.ok else "NO"),
            r.note,
        )
        for r in rows
    ]
    print("| " + " | ".join(head) + " |", file=file)
    print("|" + "|".join("---" for _ in head) + "|", file=file)
    for c in cells:
        print("| " + " | ".join(c) + " |", file=file)


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
        report = E2E(env, args).run()
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
