"""A change every session of a fleet has to apply: 1,000 agents with sessions on kwok nodes, all
bound to one Resource, against a same-writes baseline in the same run (issue 38).

    .venv/bin/python -m bench.bench_fleet [--agents 1000] [--changes 3] [--session-delay 0.2]
                                          [--json FILE] [--keep]

It starts a local control plane with kwok's nodes (``harness.cluster.LocalCluster``, audit log
on) and two namespaces of ``--agents`` agents, each binding the Resource ``shared`` and with a
runtime:

* **controller**: the controller (``bindery run --namespace fleet-ctl``, session pods with the
  delivery sidecar) makes each agent's bindings ConfigMap, acknowledgement Lease and session
  StatefulSet; kwok runs the pods, and each pod's delivery sidecar and runtime are played by the
  chaos harness's simulated sessions (:mod:`bench.fleet_sessions`: the real sidecar's code,
  which writes the session's acknowledgement on its Lease);
* **baseline**: :mod:`bench.fleet_baseline` (a child process) makes the same writes per change
  in the other namespace (ConfigMap, the agent's status pending, then applied once the Lease
  says so, the Resource's status at the start and at 100 %), for sessions played by the same
  code (without pods: nothing there makes them).

Each change sets the Resource's ``revision`` attribute (a new generation, a new document for
every agent); the two sides take turns (controller, baseline, controller ...), ``--changes``
each. The clocks start just before the PATCH; every time is this process's monotonic clock:
each session's change -> applied (its runtime applied the new document), and the time until
the Resource's ``Delivered`` condition turns True for the new generation (time to 100 %), seen
on this process's watch. Target: the controller's time to 100 % at most 1.5x the baseline's
(medians over the changes). It prints ratio lines (``python -m bench --only fleet``), each
side's figures, its writes per change (audit log) and the machine's load.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil
import structlog

from bench import fleet_objects as objs
from bench.fleet_report import Change, Side, report_lines
from bench.fleet_sessions import FleetSessions
from bench.report import log
from harness.cluster import LocalCluster, kubectl
from harness.kube import Kube, Watch, Write, audit_mark, audit_writes
from harness.process import ChildProcess, ControllerProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTROLLER_NS = "fleet-ctl"
BASELINE_NS = "fleet-base"
BENCH_UA = "bindery-fleet-bench/1"
SESSIONS_PREFIX = "bindery-fleet-sessions"
SESSIONS_UA = f"{SESSIONS_PREFIX}/1"
CONTROLLER_UA = "bindery-controller"
BASELINE_UA = "bindery-fleet-baseline"
DELIVERY_IMAGE = "localhost/bindery:fleet"
"""The delivery sidecar's image in the session pods: never pulled (kwok runs no container)."""


@dataclass
class Options:
    agents: int = 1000
    changes: int = 3
    session_delay: float = 0.2
    workers: int = 8
    seed: int = 38
    keep: bool = False
    json: Path | None = None

    @property
    def timeout(self) -> float:
        """Seconds one change (or the start) may take before the run gives up."""
        return max(120.0, self.agents * 0.6)


class BaselineProcess(ChildProcess):
    name = "fleet-baseline"


@dataclass
class FleetSide:
    """One side: its namespace, the process writing there, its sessions and watch."""

    side: Side
    namespace: str
    user_agent: str
    process: ChildProcess
    sessions: FleetSessions
    resources: Watch

    def cpu(self) -> float:
        t = psutil.Process(self.process.pid).cpu_times()
        return float(t.user + t.system)


class Fleet:
    def __init__(self, opts: Options, work: Path) -> None:
        self.opts = opts
        self.work = work
        self.cluster = LocalCluster(work / "cluster", audit=True, nodes=True)
        self.state = self.cluster.up()
        self.kubeconfig = self.state.kubeconfig
        self.kube = Kube(self.kubeconfig, BENCH_UA)
        self.rng = random.Random(opts.seed)
        self.names = [objs.agent_name(i) for i in range(opts.agents)]
        self.sides: list[FleetSide] = []
        self.watches: list[Watch] = []
        self.load: dict[str, tuple[float, ...]] = {"start": os.getloadavg()}
        self.cpu: dict[str, list[dict[str, float]]] = {}

    # ------------------------------------------------------------------------------ setup

    def kubectl(self, *args: str, stdin: str | None = None) -> None:
        kubectl(Path(self.state.bin_dir), Path(self.kubeconfig), *args, input=stdin)

    def prepare(self) -> None:
        crds = str(REPO_ROOT / "crds")
        self.kubectl("apply", "--server-side", "-f", crds)
        self.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        for _ in range(100):  # discovery can lag behind Established
            try:
                self.kube.request("GET", objs.path("resourcetypes"))
                break
            except Exception:
                time.sleep(0.1)
        self.kube.create(objs.path("resourcetypes"), objs.resource_type())
        extra = max(1, math.ceil(self.opts.agents / objs.NODE_PODS))
        for i in range(extra):
            self.kube.create("/api/v1/nodes", objs.kwok_node(f"kwok-fleet-{i}"))
        for ns in (CONTROLLER_NS, BASELINE_NS):
            self.kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
            self.kube.create(objs.path("resources", ns), objs.resource())

    def create_agents(self, namespace: str) -> list[dict[str, Any]]:
        started = time.monotonic()
        self.kube.create_many(
            lambda _: objs.path("agentspecs", namespace), (objs.agent(n) for n in self.names)
        )
        agents = self.kube.list_all(objs.path("agentspecs", namespace))
        log(f"{len(agents)} agents in {namespace} in {time.monotonic() - started:.1f} s")
        return agents

    def watch(self, namespace: str) -> Watch:
        w = Watch(self.kube, objs.path("resources", namespace)).start()
        self.watches.append(w)
        return w

    def sessions(self, namespace: str, roster: list[str] | None = None) -> FleetSessions:
        top = self.opts.session_delay
        played = FleetSessions(
            Kube(self.kubeconfig, SESSIONS_UA),
            namespace,
            random.Random(self.rng.randrange(1 << 31)),
            delay=lambda rng: rng.uniform(0.1 * top, top),
            roster=roster,
        )
        played.start()
        return played

    def start_controller(self) -> FleetSide:
        proc = ControllerProcess(
            self.kubeconfig,
            CONTROLLER_NS,
            self.work / "logs",
            args=("--standalone", "--session-delivery-image", DELIVERY_IMAGE),
            log_level="INFO",
        ).start(timeout=120)
        sessions = self.sessions(CONTROLLER_NS)
        self.create_agents(CONTROLLER_NS)
        side = FleetSide(
            Side("controller"),
            CONTROLLER_NS,
            CONTROLLER_UA,
            proc,
            sessions,
            self.watch(CONTROLLER_NS),
        )
        self.sides.append(side)
        return side

    def start_baseline(self) -> FleetSide:
        agents = self.create_agents(BASELINE_NS)
        leases = f"/apis/coordination.k8s.io/v1/namespaces/{BASELINE_NS}/leases"
        self.kube.create_many(lambda _: leases, (objs.ack_lease(a) for a in agents))
        proc = BaselineProcess(
            [
                *("-m", "bench.fleet_baseline", "--kubeconfig", self.kubeconfig),
                *("--namespace", BASELINE_NS, "--workers", str(self.opts.workers)),
            ],
            self.kubeconfig,
            self.work / "logs",
        ).spawn()
        proc.wait_for_lines(["fleet baseline started"], timeout=120)
        sessions = self.sessions(BASELINE_NS, roster=self.names)
        side = FleetSide(
            Side("same-writes baseline"),
            BASELINE_NS,
            BASELINE_UA,
            proc,
            sessions,
            self.watch(BASELINE_NS),
        )
        self.sides.append(side)
        return side

    def wait_delivered(self, side: FleetSide, revision: str, timeout: float) -> None:
        """Until every session applied ``revision`` and the Resource says Delivered for its
        current generation."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            side.process.check()
            res = side.resources.get(objs.RESOURCE) or {}
            gen = int((res.get("metadata") or {}).get("generation") or 0)
            applied = len(side.sessions.applied(revision))
            if applied >= self.opts.agents and objs.delivered(gen)(res):
                return
            time.sleep(0.5)
        raise TimeoutError(
            f"{side.side.name}: {len(side.sessions.applied(revision))}/{self.opts.agents} "
            f"sessions applied revision {revision!r} in {timeout:.0f} s, Resource status "
            f"{json.dumps((side.resources.get(objs.RESOURCE) or {}).get('status'))[:600]}; "
            f"sessions: {dict(side.sessions.stats)}; logs under {self.work / 'logs'}"
        )

    def wait_quiet(self, quiet: float = 3.0, timeout: float = 600.0) -> None:
        """Until neither side (nor its sessions) has written for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            mark = audit_mark(self.state.audit_log)
            time.sleep(quiet)
            writes = audit_writes(self.state.audit_log, mark)
            if not any(self._ours(w, s) for w in writes for s in self.sides):
                return
        log(f"still writing after {timeout:.0f} s; going on")

    @staticmethod
    def _ours(w: Write, side: FleetSide) -> bool:
        return w.namespace == side.namespace and w.verb in ("create", "update", "patch", "delete")

    # ------------------------------------------------------------------------------ one change

    def change(self, side: FleetSide, revision: str) -> None:
        """Set the Resource's revision on one side; time it until Delivered and every session."""
        mark = audit_mark(self.state.audit_log)
        cpu_before = self._cpu(side)
        wanted: dict[str, int] = {}

        def done(body: dict[str, Any]) -> bool:
            return "generation" in wanted and objs.delivered(wanted["generation"])(body)

        tracker = side.resources.track(done, 1, names=[objs.RESOURCE])
        wall = time.time()
        t0 = time.monotonic()
        patched = self.kube.merge_patch(
            objs.path("resources", side.namespace, objs.RESOURCE),
            {"spec": {"attributes": {objs.REVISION: revision}}},
        )
        wanted["generation"] = int(patched["metadata"]["generation"])
        try:
            delivered_at = tracker.wait(self.opts.timeout)
        except TimeoutError as exc:
            raise TimeoutError(
                f"{side.side.name}, revision {revision}: {exc}; Resource status "
                f"{json.dumps((side.resources.get(objs.RESOURCE) or {}).get('status'))[:600]}"
            ) from exc
        finally:
            side.resources.untrack(tracker)
        self.wait_delivered(side, revision, 60.0)
        applied = side.sessions.applied(revision)
        # What the change still makes after Delivered (Events the controller posts later) is
        # counted with it, and is over before the other side's change starts.
        self.wait_quiet()
        cpu = {k: round(v - cpu_before.get(k, 0.0), 2) for k, v in self._cpu(side).items()}
        writes, timeline = self._writes(side, mark, wall)
        change = Change(tuple(sorted(at - t0 for at in applied.values())), delivered_at - t0)
        side.side.changes.append(change)
        side.side.writes.append(writes)
        side.side.timelines.append(timeline)
        self.cpu.setdefault(side.side.name, []).append(cpu)
        log(
            f"{side.side.name} revision {revision}: Delivered after {change.delivered:.2f} s, "
            f"last session {change.last_applied:.2f} s; {sum(writes.values())} writes; cpu {cpu}"
        )

    def _cpu(self, side: FleetSide) -> dict[str, float]:
        out = {"side": side.cpu(), "bench": sum(psutil.Process().cpu_times()[:2])}
        for name in ("kube-apiserver", "etcd"):
            pid = self.state.pids.get(name)
            if pid:
                t = psutil.Process(pid).cpu_times()
                out[name] = float(t.user + t.system)
        return out

    def _writes(
        self, side: FleetSide, mark: int, wall: float
    ) -> tuple[dict[str, int], dict[str, tuple[float, float]]]:
        """This side's writes since ``mark`` by kind (the sessions' Lease writes apart), and
        when the first and the last of each kind completed, in seconds from ``wall`` (the
        audit log's clock: this machine's)."""
        counts: dict[str, int] = {}
        spans: dict[str, tuple[float, float]] = {}
        for w in audit_writes(self.state.audit_log, mark):
            if not self._ours(w, side):
                continue
            kind = f"{w.resource}{'/' + w.subresource if w.subresource else ''} {w.verb}"
            if w.user_agent.startswith(SESSIONS_PREFIX):
                kind = f"sessions' {kind}"
            elif not w.user_agent.startswith(side.user_agent):
                continue
            counts[kind] = counts.get(kind, 0) + 1
            at = w.at - wall
            first, last = spans.get(kind, (at, at))
            spans[kind] = (min(first, at), max(last, at))
        return dict(sorted(counts.items())), spans

    # ------------------------------------------------------------------------------ the run

    def run(self) -> list[str]:
        opts = self.opts
        self.prepare()
        started = time.monotonic()
        ctl = self.start_controller()
        base = self.start_baseline()
        for side in (ctl, base):
            self.wait_delivered(side, "0", opts.timeout)
            log(f"{side.side.name}: {opts.agents} sessions applied the first document")
        log(f"both sides ready after {time.monotonic() - started:.1f} s; waiting for quiet")
        self.wait_quiet()
        self.load["measuring"] = os.getloadavg()
        for n in range(1, opts.changes + 1):
            for side in (ctl, base):
                self.change(side, str(n))
        self.load["end"] = os.getloadavg()
        lines = report_lines(ctl.side, base.side, opts.agents)
        lines.append(self._machine())
        for side in (ctl, base):
            cpu = self.cpu.get(side.side.name, [])
            mean = {k: round(sum(c[k] for c in cpu) / len(cpu), 1) for k in cpu[0]} if cpu else {}
            lines.append(f"fleet {side.side.name} CPU seconds per change: {mean}")
        if opts.json:
            opts.json.write_text(
                json.dumps(
                    {
                        "options": {k: str(v) for k, v in asdict(opts).items()},
                        "sides": {s.side.name: asdict(s.side) for s in (ctl, base)},
                        "cpu": self.cpu,
                        "load": self.load,
                        "sessions": {s.side.name: dict(s.sessions.stats) for s in (ctl, base)},
                    },
                    indent=1,
                )
            )
        return lines

    def _machine(self) -> str:
        load = ", ".join(
            f"{when} {tuple(round(x, 2) for x in values)}" for when, values in self.load.items()
        )
        return f"fleet machine: {os.cpu_count()} CPUs; load average {load}"

    def close(self) -> None:
        for side in self.sides:
            side.sessions.stop()
            side.process.stop()
        for w in self.watches:
            w.stop()
        self.cluster.down()


def parse(argv: list[str] | None) -> Options:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--agents", type=int, default=1000, help="agents (sessions) per side")
    p.add_argument("--changes", type=int, default=3, help="changes per side (default 3)")
    p.add_argument(
        "--session-delay",
        type=float,
        default=0.2,
        help="a session takes up to this many seconds to deliver a document, and as long again "
        "to apply it (uniform from a tenth of it; default 0.2)",
    )
    p.add_argument("--workers", type=int, default=8, help="the baseline's workers (default 8)")
    p.add_argument("--seed", type=int, default=38)
    p.add_argument("--json", type=Path, help="write every sample here")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    a = p.parse_args(argv)
    return Options(
        agents=a.agents,
        changes=a.changes,
        session_delay=a.session_delay,
        workers=a.workers,
        seed=a.seed,
        keep=a.keep,
        json=a.json,
    )


def main(argv: list[str] | None = None) -> int:
    opts = parse(argv)
    # The simulated sidecars run the real sidecar's code, which logs every delivery.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    work = Path(tempfile.mkdtemp(prefix="bindery-bench-fleet-"))
    log(f"fleet: {opts.agents} agents per side, {opts.changes} changes each; work in {work}")
    fleet = Fleet(opts, work)
    try:
        lines = fleet.run()
    finally:
        fleet.close()
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
