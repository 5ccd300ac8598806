"""The fleet benchmark's sessions: the chaos harness's simulated delivery sidecars
(:class:`harness.sessions.Sessions`, the real sidecar's code), for a thousand pods at once.

Two differences from the harness's loop, neither in what a sidecar does:

* it looks only at what moved: pods when the pod watch had events (and once a second), each
  ConfigMap when the ConfigMap watch had events, and the acknowledgement file and Lease of a
  session only while it has something to say (from its start, delivery or application until
  its sidecar has written all it holds). The harness's loop reads every session's
  acknowledgement file every tick, which at 1,000 sessions costs the benchmark process a large
  share of a core for sessions that have nothing new;
* each session's Lease write is its own: a pool of threads makes them, as each pod's sidecar
  makes its own (the harness's one thread makes them one after the other, so the thousandth
  session's acknowledgement would wait for 999 round trips);
* the sessions' files are on /dev/shm where it exists, as a session pod's are on its
  memory-backed volume (the harness's go to the temporary directory, which may be a disk whose
  fsync the sidecar's atomic replacement waits for);
* it notes when each session's runtime applied each document (:meth:`FleetSessions.applied`),
  by the document's ``revision`` attribute, on this process's monotonic clock.

``roster``: sessions for these agents without pods (the same-writes baseline's namespace, where
no controller makes session pods): each gets a fixed pod name and uid, and the same sidecar and
runtime as a pod's.
"""

from __future__ import annotations

import heapq
import json
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.fleet_objects import REVISION
from controller.k8s.builders import AGENT_LABEL
from controller.sidecar import ApiRequestError, Sidecar
from harness.kube import Kube
from harness.sessions import RETRY_AFTER, Session, Sessions

SWEEP = 1.0
"""Seconds between looks at every pod and ConfigMap even without watch events (a relist)."""
SHM = Path("/dev/shm")  # noqa: S108 - memory-backed, as a session pod's volume; mkdtemp in it
PUBLISHERS = 16
"""Threads writing Leases at once (the API client's connection pool holds 32)."""


class FleetSessions(Sessions):
    """:class:`harness.sessions.Sessions` that keeps quiet sessions quiet, and times
    applications."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        rng: random.Random,
        *,
        delay: Callable[[random.Random], float],
        roster: Sequence[str] | None = None,
        tick: float = 0.05,
    ) -> None:
        super().__init__(kube, namespace, rng, acknowledging_share=1.0, delay=delay, tick=tick)
        self.roster = list(roster) if roster is not None else None
        self._talking: set[str] = set()
        """Pod uids whose acknowledgement file and Lease are looked at (until the sidecar has
        written all it holds)."""
        self._writing: set[str] = set()
        """Pod uids whose Lease write is under way in the pool."""
        self._guard = threading.Lock()
        self._pool = ThreadPoolExecutor(PUBLISHERS, thread_name_prefix="sidecar")
        self._applied: dict[str, dict[str, float]] = {}
        """Revision -> agent -> when its runtime applied a document of that revision."""
        self._lock = threading.Lock()
        if SHM.is_dir():
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = Path(tempfile.mkdtemp(prefix=f"bindery-sessions-{namespace}-", dir=SHM))

    def applied(self, revision: str) -> dict[str, float]:
        """Agent -> when its runtime applied the document of ``revision`` (monotonic clock)."""
        with self._lock:
            return dict(self._applied.get(revision, {}))

    # ------------------------------------------------------------------------------ the loop

    def _run(self) -> None:
        pods_seen = maps_seen = -1
        swept = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            sweep = now - swept >= SWEEP
            if sweep:
                swept = now
            if sweep or self.pods.events != pods_seen:
                pods_seen = self.pods.events
                self._follow_pods(now)
            if sweep or self.config_maps.events != maps_seen:
                maps_seen = self.config_maps.events
                for followed in list(self.sessions.values()):
                    self._follow_config_map(followed, now)
            while self._actions and self._actions[0].at <= time.monotonic():
                action = heapq.heappop(self._actions)
                if (target := self.sessions.get(action.pod_uid)) is not None:
                    action.run(target)
            with self._guard:
                due = [uid for uid in self._talking if uid not in self._writing]
            for uid in due:
                talking = self.sessions.get(uid)
                if talking is None:
                    with self._guard:
                        self._talking.discard(uid)
                    continue
                with self._guard:
                    self._writing.add(uid)
                self._pool.submit(self._publish_one, talking)
            self._stop.wait(self.tick)

    def _talk(self, session: Session) -> None:
        with self._guard:
            self._talking.add(session.pod_uid)

    def _publish_one(self, session: Session) -> None:
        """In the pool: the sidecar takes in the acknowledgement file and writes its Lease."""
        uid = session.pod_uid
        try:
            self._publish(session)
        finally:
            with self._guard:
                self._writing.discard(uid)
                if said_all(session.sidecar):
                    self._talking.discard(uid)

    def _publish(self, session: Session) -> None:
        """The harness's, with its counts kept under a lock (the pool's threads share them)."""
        if time.monotonic() < session.retry_at:
            return
        session.sidecar.read_ack()
        try:
            wrote = session.sidecar.publish()
        except ApiRequestError:
            with self._guard:
                self.stats["failed lease writes"] += 1
            session.retry_at = time.monotonic() + RETRY_AFTER
            return
        if wrote:
            with self._guard:
                self.stats["lease writes"] += 1

    def stop(self) -> dict[str, int]:
        counts = super().stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        return counts

    def _follow_pods(self, now: float) -> None:
        if self.roster is None:
            super()._follow_pods(now)
            return
        for agent in self.roster:
            uid = f"fleet-baseline-{agent}"
            if uid not in self.sessions:
                pod = {
                    "metadata": {
                        "name": f"{agent}-session-0",
                        "uid": uid,
                        "labels": {AGENT_LABEL: agent},
                    }
                }
                self.sessions[uid] = self._session(pod, now)

    def _session(self, pod: dict[str, Any], now: float) -> Session:
        session = super()._session(pod, now)
        self._talk(session)  # it announced itself: the Lease says it acknowledges
        return session

    def _deliver(self, session: Session, text: str) -> None:
        super()._deliver(session, text)
        self._talk(session)

    def _apply(self, session: Session) -> None:
        before = self.stats["applied"]
        super()._apply(session)
        if self.stats["applied"] == before:
            return
        at = time.monotonic()
        self._talk(session)
        revision = revision_of(session.sidecar.out.read_text(encoding="utf-8"))
        with self._lock:
            self._applied.setdefault(revision, {}).setdefault(session.agent, at)


def said_all(sidecar: Sidecar) -> bool:
    """Whether the sidecar's Lease carries everything its record holds (the comparison its
    ``publish`` makes before writing)."""
    with sidecar._lock:
        return sidecar._record == sidecar._written


def revision_of(document: str) -> str:
    """The shared Resource's ``revision`` attribute in a bindings document ('' if absent)."""
    try:
        doc = json.loads(document)
        for entry in doc.get("resources") or []:
            attributes = (entry.get("resource") or {}).get("attributes") or {}
            if REVISION in attributes:
                return str(attributes[REVISION])
    except (ValueError, AttributeError, TypeError):
        pass
    return ""
