"""One chaos run: a fresh namespace, the real controller, seeded churn, replay, final checks."""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import structlog

from chaos.churn import Churn, uri_pool
from chaos.plane import ApiServer, Controller
from chaos.recorder import Gap, Recorder
from chaos.replay import (
    ACKNOWLEDGED_EXCLUSIVITY,
    EXCLUSIVITY,
    WITHOUT_HOLD,
    FinalState,
    Replay,
    final_state,
    replay,
)
from harness.errors import HarnessError
from harness.kube import Kube
from harness.sessions import Sessions

log = structlog.get_logger("bindery.chaos")

NAMESPACE_WAIT = 45.0
"""Seconds a run waits for its namespace to go (the controller running) before moving on."""
STUCK_AFTER = 10.0
"""Seconds of quiet after which a URI with claimants and no claimant holder counts as stuck."""


@dataclass
class Options:
    agents: int = 50
    per_uri: int = 5
    seconds: float = 30.0
    interval: float = 0.1
    kill_controller: bool = True
    restart_apiserver: bool = False
    settle: float = 30.0
    controller_log_level: str = "INFO"
    sessions: bool = True
    """Simulated delivery sidecars acknowledge for the session pods (:mod:`harness.sessions`);
    the controller gives every session pod the sidecar and waits for acknowledgements. Off: no
    sidecar, and holds are released as soon as the document without them is written."""
    acknowledging_share: float = 0.5
    """Of the simulated sessions, the share whose runtime acknowledges (applies) documents."""
    work_scope: str = "namespace"
    """``cluster``: the controller runs with ``--work-scope=cluster``, its holds in the run's
    namespace, and the agents are spread over it and two more (``teams``), so the same URIs
    are wanted from three namespaces."""

    def controller_args(self, namespace: str = "", teams: tuple[str, ...] = ()) -> tuple[str, ...]:
        base = (
            ("--standalone", "--session-delivery-image", SIDECAR_IMAGE)
            if self.sessions
            else ("--standalone", "--unacknowledged-release-seconds", "0")
        )
        if self.work_scope != "cluster":
            return base
        watched = tuple(arg for team in teams for arg in ("--namespace", team))
        return (*base, "--work-scope=cluster", f"--work-hold-namespace={namespace}", *watched)

    def teams(self, namespace: str) -> tuple[str, ...]:
        """The namespaces besides ``namespace`` that a run spreads its agents over."""
        return (f"{namespace}-b", f"{namespace}-c") if self.work_scope == "cluster" else ()


SIDECAR_IMAGE = "localhost/bindery:chaos"
"""The delivery sidecar's image in the session pods: never pulled (kwok runs no container)."""


@dataclass
class RunResult:
    index: int
    seed: int
    namespace: str
    log_dir: str
    changes: int = 0
    refused: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    versions: int = 0
    versions_by_kind: dict[str, int] = field(default_factory=dict)
    gaps: int = 0
    gap_ranges: list[tuple[str, int, int]] = field(default_factory=list)
    """Recording gaps (kind, from rv, to rv): relists after 410 Gone."""
    exclusivity: int = 0
    without_hold: int = 0
    acknowledged_exclusivity: int = 0
    """Episodes of two sessions' acknowledged documents carrying the same work URI."""
    acknowledgements: int = 0
    """Versions of acknowledgement Leases carrying a session pod's record."""
    unknown_digests: int = 0
    """Acknowledged digests no recorded ConfigMap version had (not judged)."""
    sessions: dict[str, int] = field(default_factory=dict)
    """What the simulated sidecars did: pods, deliveries, applications, Lease writes."""
    stuck: int = 0
    lost_updates: int = 0
    unintended_relaunches: int = 0
    pods_recreated_in_place: int = 0
    """Pods recreated by their unchanged workload at the same revision and launch generation
    (someone deleted the pod; the audit log names who): not counted as unintended relaunches."""
    intended_relaunches: int = 0
    relaunch_raises: int = 0
    workload_recreations: int = 0
    controller_kills: int = 0
    controller_exits: int = 0
    """Controller processes that ended by themselves during the run (none should)."""
    apiserver_disruptions: list[str] = field(default_factory=list)
    in_namespace_deletion: int = 0
    """Of the exclusivity and delivered-without-hold episodes: those that began after the
    run's namespace was deleted (the namespace controller deletes in an order of its own), the
    acknowledged-exclusivity episodes included."""
    namespace_deleted_at: float | None = None
    converged_after: float | None = None
    namespace_gone_after: float | None = None
    controller_errors: int = 0
    deletes_by: dict[str, int] = field(default_factory=dict)
    """DELETE requests in the namespace by resource and client (from the audit log)."""
    evidence: list[str] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (
            self.exclusivity
            + self.without_hold
            + self.acknowledged_exclusivity
            + self.stuck
            + self.lost_updates
            + self.unintended_relaunches
        )


def snapshot(kube: Kube, namespaces: str | tuple[str, ...]) -> FinalState:
    """One snapshot of the run's namespaces (object names are unique across them)."""
    spread = (namespaces,) if isinstance(namespaces, str) else namespaces

    def items(path: str) -> list[dict[str, Any]]:
        return [item for ns in spread for item in kube.list_all(path.format(ns=ns))]

    return final_state(
        items("/apis/bindery.dev/v1alpha1/namespaces/{ns}/agentspecs"),
        items("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
        items("/api/v1/namespaces/{ns}/configmaps"),
    )


class Disruptor:
    """Kills the controller and disturbs the API server at seeded moments of the churn."""

    def __init__(
        self,
        rng: random.Random,
        opts: Options,
        *,
        controller: Controller,
        apiserver: ApiServer | None,
        result: RunResult,
        t0: float,
    ) -> None:
        self.t0 = t0
        self.plan: list[tuple[float, str]] = []
        if opts.kill_controller:
            self.plan.append((rng.uniform(0.15, 0.6) * opts.seconds, "kill-controller"))
            if rng.random() < 0.5:
                self.plan.append((rng.uniform(0.6, 0.85) * opts.seconds, "kill-controller"))
        if apiserver is not None:
            mode = rng.choice(["apiserver-kill", "apiserver-stop", "apiserver-freeze"])
            self.plan.append((rng.uniform(0.2, 0.8) * opts.seconds, mode))
        self.plan.sort()
        self.rng = rng
        self.controller = controller
        self.apiserver = apiserver
        self.result = result
        self.threads: list[threading.Thread] = []

    def due(self, elapsed: float) -> None:
        while self.plan and self.plan[0][0] <= elapsed:
            _, what = self.plan.pop(0)
            at = time.monotonic() - self.t0
            t = threading.Thread(target=self._do, args=(what, at), daemon=True)
            t.start()
            self.threads.append(t)

    def _do(self, what: str, at: float) -> None:
        if what == "kill-controller":
            self.controller.kill()
            time.sleep(self.rng.uniform(0.0, 2.0))
            self.controller.start(wait=False)
            self.result.evidence.append(f"t={at:.1f}s controller SIGKILLed and restarted")
            return
        if self.apiserver is None:
            return
        if what == "apiserver-freeze":
            seconds = self.rng.uniform(2.0, 6.0)
            self.apiserver.freeze(seconds)
            note = f"t={at:.1f}s kube-apiserver frozen (SIGSTOP) {seconds:.1f}s"
        else:
            downtime = self.rng.uniform(0.5, 4.0) if what == "apiserver-stop" else 0.0
            outage = self.apiserver.restart(graceful=what == "apiserver-stop", downtime=downtime)
            note = (
                f"t={at:.1f}s kube-apiserver {'SIGTERM' if what == 'apiserver-stop' else 'SIGKILL'}"
                f", restarted {downtime:.1f}s later, ready again {outage:.1f}s after the signal"
            )
        self.result.apiserver_disruptions.append(note)
        self.result.evidence.append(note)

    def join(self) -> None:
        for t in self.threads:
            t.join(timeout=120)


def run_once(
    index: int,
    seed: int,
    opts: Options,
    *,
    kube: Kube,
    kubeconfig: str,
    apiserver: ApiServer | None,
    out_dir: Path,
    audit_log: str = "",
) -> RunResult:
    rng = random.Random(seed)
    namespace = f"chaos-{index}-{uuid.uuid4().hex[:6]}"
    log_dir = out_dir / namespace
    log_dir.mkdir(parents=True)
    result = RunResult(index, seed, namespace, str(log_dir))
    teams = opts.teams(namespace)
    _create_namespaces(kube, (namespace, *teams))
    t0 = time.monotonic()
    recorder = Recorder(kube, namespace, t0, also=teams)
    recorder.start()
    sessions = _all_sessions(kubeconfig, (namespace, *teams), rng, opts)
    controller = Controller(
        kubeconfig,
        namespace,
        log_dir,
        opts.controller_log_level,
        opts.controller_args(namespace, teams),
    )
    controller.start()
    churn = Churn(
        kube,
        namespace,
        rng,
        opts.agents,
        uri_pool(opts.agents, opts.per_uri),
        namespaces=[namespace, *teams] if teams else [],
    )
    disruptor = Disruptor(
        rng, opts, controller=controller, apiserver=apiserver, result=result, t0=t0
    )
    try:
        start = time.monotonic()
        while (elapsed := time.monotonic() - start) < opts.seconds:
            disruptor.due(elapsed)
            churn.step()
            time.sleep(max(0.0, opts.interval * rng.uniform(0.5, 1.5)))
        disruptor.join()
        if not controller.alive():
            controller.start(wait=False)
        quiet = time.monotonic()
        result.evidence.append(f"t={quiet - t0:.1f}s churn stopped")
        state = _settle(kube, (namespace, *teams), opts, quiet, result)
        if not state.converged:
            result.evidence.append(f"not converged after {opts.settle:.0f}s: {state.summary()}")
        result.lost_updates = len(state.lost)
        _delete_namespace(kube, namespace, result, t0, also=teams)
    finally:
        controller.stop()
        _stop_sessions(sessions, result)
        recorder.stop()
    result.changes = sum(churn.made.values())
    result.refused = sum(churn.refused.values())
    result.actions = dict(sorted((churn.made + churn.refused).items()))
    result.controller_kills = controller.kills
    result.controller_exits = len(controller.exits)
    result.evidence.extend(controller.exits)
    recorder.dump(log_dir / "versions.jsonl")
    _judge(result, replay(recorder.versions), recorder.gaps)
    errors = controller.error_lines()
    result.controller_errors = len(errors)
    (log_dir / "controller-errors.txt").write_text("\n".join(errors) + "\n")
    if audit_log:
        result.deletes_by = _deletes(Path(audit_log), (namespace, *teams))
    (log_dir / "result.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
    return result


def _deletes(audit_log: Path, namespaces: tuple[str, ...]) -> dict[str, int]:
    deletes: Counter[str] = Counter()
    for ns in namespaces:
        deletes.update(audit_deletes(audit_log, ns))
    return dict(deletes)


def _create_namespaces(kube: Kube, namespaces: tuple[str, ...]) -> None:
    for ns in namespaces:
        kube.create(
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        )


def _stop_sessions(sessions: list[Sessions | None], result: RunResult) -> None:
    """Stop the simulated sidecars of every namespace; what they did, summed."""
    stats: Counter[str] = Counter()
    for simulated in sessions:
        if simulated is not None:
            stats.update(simulated.stop())
    if any(s is not None for s in sessions):
        result.sessions = dict(stats)


def _all_sessions(
    kubeconfig: str, namespaces: tuple[str, ...], rng: random.Random, opts: Options
) -> list[Sessions | None]:
    session_rng = random.Random(rng.randrange(1 << 31))
    return [_sessions(kubeconfig, ns, session_rng, opts) for ns in namespaces]


def _sessions(
    kubeconfig: str, namespace: str, rng: random.Random, opts: Options
) -> Sessions | None:
    """The simulated delivery sidecars of the run's session pods (started), if wanted."""
    if not opts.sessions:
        return None
    kube = Kube(kubeconfig, user_agent="bindery-chaos-sessions/1")
    # Fail fast while the API server is down: the sidecar tries again a second later.
    kube.client.rest_client.pool_manager.connection_pool_kw["retries"] = False
    return Sessions(kube, namespace, rng, acknowledging_share=opts.acknowledging_share).start()


def _settle(
    kube: Kube, namespace: tuple[str, ...], opts: Options, quiet: float, result: RunResult
) -> FinalState:
    """Poll the namespace until it converges (or ``opts.settle`` s pass); count stuck URIs."""
    counted = False
    while True:
        waited = time.monotonic() - quiet
        try:
            state = snapshot(kube, namespace)
        except Exception as exc:  # the API server may still be coming back: poll again
            if waited >= opts.settle:
                raise HarnessError(
                    f"could not read namespaces {', '.join(namespace)} for "
                    f"{opts.settle:.0f} s after the churn: {exc}; see the API server's log "
                    "under the cluster directory"
                ) from exc
            time.sleep(0.5)
            continue
        waited = time.monotonic() - quiet
        if state.converged:
            result.converged_after = round(waited, 2)
            return state
        if waited >= STUCK_AFTER and not counted:
            counted = True
            result.stuck = len(state.stuck)
            for line in state.stuck:
                result.evidence.append(f"stuck {STUCK_AFTER:.0f}s after quiet: {line}")
        if waited >= opts.settle:
            return state
        time.sleep(0.5)


def _delete_namespace(
    kube: Kube, namespace: str, result: RunResult, t0: float, *, also: tuple[str, ...] = ()
) -> None:
    """Delete the run's namespace (and ``also``) with the controller running; time how long the
    run's own takes."""
    for team in also:
        kube.delete(f"/api/v1/namespaces/{team}")
    started = time.monotonic()
    result.namespace_deleted_at = round(started - t0, 3)
    result.evidence.append(f"t={started - t0:.1f}s namespace deletion started")
    kube.delete(f"/api/v1/namespaces/{namespace}")
    gone = False
    while time.monotonic() - started < NAMESPACE_WAIT:
        with suppress(Exception):  # a slow or restarting API server: ask again
            gone = kube.get(f"/api/v1/namespaces/{namespace}") is None
        if gone:
            result.namespace_gone_after = round(time.monotonic() - started, 2)
            return
        time.sleep(0.5)
    result.evidence.append(
        f"namespace {namespace} still present {NAMESPACE_WAIT:.0f} s after its deletion"
    )


def _judge(result: RunResult, rep: Replay, gaps: list[Gap]) -> None:
    result.gaps = len(gaps)
    result.gap_ranges = [(g.kind, g.from_rv, g.to_rv) for g in gaps]
    judge_replay(result, rep)


REPLAY_LINES = (
    "exclusivity:",
    "delivered-without-hold:",
    "acknowledged-exclusivity:",
    "acknowledged digests not recorded",
    "unintended relaunch",
    "pod recreated",
)


def judge_replay(result: RunResult, rep: Replay) -> None:
    """Set the figures and evidence that come from the replay (again, for ``--replay``)."""
    result.evidence = [e for e in result.evidence if not e.startswith(REPLAY_LINES)]
    result.versions = rep.versions
    result.versions_by_kind = dict(sorted(rep.by_kind.items()))
    result.exclusivity = len(rep.of(EXCLUSIVITY))
    result.without_hold = len(rep.of(WITHOUT_HOLD))
    result.acknowledged_exclusivity = len(rep.of(ACKNOWLEDGED_EXCLUSIVITY))
    result.acknowledgements = rep.acknowledgements
    result.unknown_digests = len(rep.unknown_digests)
    result.unintended_relaunches = len(rep.unintended)
    result.pods_recreated_in_place = len(rep.in_place)
    result.intended_relaunches = sum(1 for r in rep.replacements if r.intended)
    result.relaunch_raises = rep.relaunch_raises
    result.workload_recreations = rep.workload_recreations
    deleted_at = result.namespace_deleted_at
    late = [e for e in rep.episodes if deleted_at is not None and e.start_at >= deleted_at]
    result.in_namespace_deletion = len(late)
    # A deletion inside a gap is replayed at the relist's revision: later than it happened.
    uncertain = [(a, b) for kind, a, b in result.gap_ranges if kind in ("ConfigMap", "Lease")]
    for ep in rep.episodes[:30]:
        phase = " [namespace deletion]" if ep in late else ""
        if any(a < ep.start_rv <= b for a, b in uncertain):
            phase += " [inside a recording gap: may be an artefact of the relist]"
        result.evidence.append(ep.describe() + phase)
    if rep.unknown_digests:
        result.evidence.append(
            f"acknowledged digests not recorded in any ConfigMap version (not judged): "
            f"{', '.join(sorted(rep.unknown_digests)[:5])}"
        )
    for r in rep.unintended[:10]:
        result.evidence.append(
            f"unintended relaunch of {r.agent} (uid {r.agent_uid}): pod {r.old_pod} -> "
            f"{r.new_pod} at rv {r.rv}, launch generation {r.old_generation} both, template "
            f"revision {r.old_revision} -> {r.new_revision}, workload {r.old_workload} -> "
            f"{r.new_workload}"
        )
    for r in rep.in_place[:5]:
        result.evidence.append(
            f"pod recreated in place (not counted): {r.agent}: {r.old_pod} -> {r.new_pod} at rv "
            f"{r.rv}, same workload, template revision {r.new_revision} and launch generation"
        )


WATCHED = {"pods", "statefulsets", "configmaps", "leases", "agentspecs"}


def audit_deletes(audit_log: Path, namespace: str) -> dict[str, int]:
    """Who deleted what in ``namespace``: "<resource> by <user agent>" -> count."""
    counts: dict[str, int] = {}
    with audit_log.open("rb") as lines:
        for raw in lines:
            if namespace.encode() not in raw or b'"delete' not in raw:
                continue
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a line the API server is still writing
            ref = entry.get("objectRef") or {}
            if ref.get("namespace") != namespace or not str(entry.get("verb")).startswith("delete"):
                continue
            if entry.get("stage") != "ResponseComplete" or ref.get("resource") not in WATCHED:
                continue
            agent = str(entry.get("userAgent", "")).split("/")[0]
            key = f"{entry.get('verb')} {ref.get('resource')} by {agent}"
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))
