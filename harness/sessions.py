"""Simulated sessions on kwok's fake node: each Running session pod gets its delivery sidecar.

On kwok's node no container runs, so no session acknowledges a bindings document and every
``work`` handoff waits for a grace period or for the pod to go. :class:`Sessions` plays the
delivery sidecar (``bindery deliver``) of every session pod that kwok reports Running, that the
agent's session StatefulSet made and that has the sidecar in its spec: it follows the agent's
bindings ConfigMap and, after a seeded random delay, records on the agent's acknowledgement
Lease what the real sidecar would for that pod (the pod's name and uid).

The record is built and written by the real sidecar's code (:class:`controller.sidecar.
Sidecar`: ``deliver``, ``read_ack``, ``publish``), and the simulated runtime writes its
acknowledgement file with :mod:`bindery_session`; only the API calls differ: they
go through the harness's admin client instead of the pod's token (so the chart's admission policy
that lets only a session's own pod write its Lease is not exercised here).

A share of the sessions runs a runtime that acknowledges (announces itself, then applies each
delivered document after a further delay); the others only have their documents delivered.
"""

from __future__ import annotations

import heapq
import random
import shutil
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bindery_session import BindingsError, acknowledge, announce, load_bindings, refuse

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain.delivery import BINDINGS_FILE
from controller.k8s.builders import AGENT_LABEL, has_delivery_sidecar, session_pod_of
from controller.sidecar import ApiRequestError, InCluster, Sidecar
from harness.kube import Kube, Watch

Body = dict[str, Any]

RETRY_AFTER = 1.0
"""Seconds before a failed acknowledgement write is tried again (as the real sidecar waits)."""


def session_delay(rng: random.Random) -> float:
    """Mostly tens to hundreds of milliseconds, one time in ten 1-4 s (a slow session)."""
    return rng.uniform(1.0, 4.0) if rng.random() < 0.1 else rng.uniform(0.02, 0.4)


class AdminApi(InCluster):
    """The sidecar's API requests made with the harness's client (admin credentials)."""

    def __init__(self, kube: Kube, timeout: float = 5.0) -> None:
        super().__init__(host="", port=0, token_file=Path(), ca_file=Path(), timeout=timeout)
        self.kube = kube

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        try:
            return self.kube.request(
                method,
                path,
                body,
                content_type=content_type or "application/json",
                timeout=self.timeout,
            )
        except Exception as exc:  # any failure: the sidecar's loop tries again
            raise ApiRequestError(f"{method} {path}: {exc}") from exc


@dataclass
class Session:
    """One pod's simulated sidecar and runtime."""

    agent: str
    pod_name: str
    pod_uid: str
    sidecar: Sidecar
    acknowledges: bool
    """Its runtime acknowledges documents (else they are only delivered)."""
    delivered_rv: int = 0
    """The ConfigMap resourceVersion last taken for delivery (never goes back)."""
    due: float = 0.0
    """When the last scheduled delivery happens (deliveries stay in order)."""
    retry_at: float = 0.0


@dataclass(order=True)
class _Action:
    at: float
    seq: int
    pod_uid: str = field(compare=False)
    run: Callable[[Session], None] = field(compare=False)


class Sessions:
    """Delivery sidecars for the session pods of one namespace; one thread for all of them.

    ``delay(rng)`` is drawn before each delivery and, for an acknowledging runtime, again before
    it applies what was delivered. ``stats`` counts pods, deliveries, applications, Lease writes
    and failed writes.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        rng: random.Random,
        *,
        acknowledging_share: float = 0.5,
        delay: Callable[[random.Random], float] = session_delay,
        tick: float = 0.05,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.rng = rng
        self.acknowledging_share = acknowledging_share
        self.delay = delay
        self.refusing: dict[str, str] = {}
        """Agent name -> the reason its acknowledging runtime refuses every document it gets."""
        self.holding: set[str] = set()
        """Agents whose acknowledging runtime takes its documents in but applies none (yet)."""
        self.tick = tick
        self.api = AdminApi(kube)
        self.pods = Watch(kube, f"/api/v1/namespaces/{namespace}/pods")
        self.config_maps = Watch(kube, f"/api/v1/namespaces/{namespace}/configmaps")
        self.sessions: dict[str, Session] = {}  # pod uid -> session
        self.stats: Counter[str] = Counter()
        self._actions: list[_Action] = []
        self._seq = 0
        self._dir = Path(tempfile.mkdtemp(prefix=f"bindery-sessions-{namespace}-"))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sessions", daemon=True)

    def start(self) -> Sessions:
        self.pods.start()
        self.config_maps.start()
        self._thread.start()
        return self

    def stop(self) -> dict[str, int]:
        """Stop every sidecar; what they did (``stats``)."""
        self._stop.set()
        self._thread.join(timeout=30)
        self.pods.stop()
        self.config_maps.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
        return dict(sorted(self.stats.items()))

    # ------------------------------------------------------------------------------ the loop

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            self._follow_pods(now)
            for session in list(self.sessions.values()):
                self._follow_config_map(session, now)
            while self._actions and self._actions[0].at <= time.monotonic():
                action = heapq.heappop(self._actions)
                if (target := self.sessions.get(action.pod_uid)) is not None:
                    action.run(target)  # else its pod has gone
            for session in list(self.sessions.values()):
                self._publish(session)
            self._stop.wait(self.tick)

    def _schedule(self, at: float, pod_uid: str, run: Callable[[Session], None]) -> None:
        self._seq += 1
        heapq.heappush(self._actions, _Action(at, self._seq, pod_uid, run))

    def _follow_pods(self, now: float) -> None:
        """Start a sidecar for each new Running session pod; drop those of pods that go."""
        with self.pods.lock:
            pods = list(self.pods.objects.values())
        running: dict[str, Body] = {}
        for pod in pods:
            md = pod.get("metadata") or {}
            agent = str((md.get("labels") or {}).get(AGENT_LABEL, ""))
            if (
                agent
                and (pod.get("status") or {}).get("phase") == "Running"
                and not md.get("deletionTimestamp")
                and session_pod_of(pod, agent)
                and has_delivery_sidecar(pod)
            ):
                running[str(md.get("uid", ""))] = pod
        for uid in [u for u in self.sessions if u not in running]:
            del self.sessions[uid]
            shutil.rmtree(self._dir / uid, ignore_errors=True)
            self.stats["pods ended"] += 1
        for uid, pod in running.items():
            if uid not in self.sessions:
                self.sessions[uid] = self._session(pod, now)

    def _session(self, pod: Body, now: float) -> Session:
        md = pod["metadata"]
        agent = str(md["labels"][AGENT_LABEL])
        files = self._dir / str(md["uid"])
        files.mkdir(parents=True, exist_ok=True)
        sidecar = Sidecar(
            api=self.api,
            namespace=self.namespace,
            config_map=f"{agent}-bindings",
            lease=names.ack_lease_name(agent),
            pod_name=str(md["name"]),
            pod_uid=str(md["uid"]),
            seed=files / "seed.json",
            out=files / BINDINGS_FILE,
            ack_file=files / ack.ACK_FILE,
        )
        acknowledges = self.rng.random() < self.acknowledging_share
        if acknowledges:
            announce(sidecar.ack_file)
        session = Session(agent, sidecar.pod_name, sidecar.pod_uid, sidecar, acknowledges)
        self.stats["pods"] += 1
        self.stats["acknowledging pods"] += int(acknowledges)
        # The real sidecar lists its ConfigMap when it starts: a read from the API server.
        try:
            listed = self.api.request(
                "GET", f"/api/v1/namespaces/{self.namespace}/configmaps/{sidecar.config_map}"
            )
        except ApiRequestError:
            listed = None  # not there yet (or no answer): the watch brings it
        if listed:
            self._take(session, listed, now)
        return session

    def _follow_config_map(self, session: Session, now: float) -> None:
        cm = self.config_maps.get(session.sidecar.config_map)
        if cm is not None:
            self._take(session, cm, now)

    def _take(self, session: Session, cm: Body, now: float) -> None:
        """Schedule the delivery of a ConfigMap version newer than the last one taken."""
        rv = int((cm.get("metadata") or {}).get("resourceVersion") or 0)
        text = (cm.get("data") or {}).get(BINDINGS_FILE)
        if rv <= session.delivered_rv or not isinstance(text, str):
            return
        session.delivered_rv = rv
        session.due = max(session.due, now + self.delay(self.rng))
        self._schedule(session.due, session.pod_uid, lambda s: self._deliver(s, text))

    def _deliver(self, session: Session, text: str) -> None:
        session.sidecar.deliver(text)
        self.stats["deliveries"] += 1
        if session.acknowledges:
            at = time.monotonic() + self.delay(self.rng)
            self._schedule(at, session.pod_uid, self._apply)

    def _apply(self, session: Session) -> None:
        """The runtime applies the document in its file now (the newest delivered), or refuses
        it (:attr:`refusing`), or leaves it for later (:attr:`holding`: tried again each
        tick)."""
        if session.agent in self.holding:
            self._schedule(time.monotonic() + self.tick, session.pod_uid, self._apply)
            return
        try:
            bindings = load_bindings(session.sidecar.out)
            reason = self.refusing.get(session.agent)
            if reason:
                refuse(bindings, reason, session.sidecar.ack_file)
                self.stats["refused"] += 1
                return
            acknowledge(bindings, session.sidecar.ack_file)
        except BindingsError:
            self.stats["unreadable documents"] += 1
            return
        self.stats["applied"] += 1

    def _publish(self, session: Session) -> None:
        if time.monotonic() < session.retry_at:
            return
        session.sidecar.read_ack()
        try:
            if session.sidecar.publish():
                self.stats["lease writes"] += 1
        except ApiRequestError:
            self.stats["failed lease writes"] += 1
            session.retry_at = time.monotonic() + RETRY_AFTER
