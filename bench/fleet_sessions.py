"""The fleet benchmark's sessions: the chaos harness's simulated delivery sidecars
(:class:`harness.sessions.Sessions`, the real sidecar's code), for a thousand pods at once.

Two differences from the harness's loop, neither in what a sidecar does:

* it looks only at what moved: pods when the pod watch had events (and once a second), each
  ConfigMap when the ConfigMap watch had events, and the acknowledgement file and Lease of a
  session only while it has something to say (from its delivery or application until the
  sidecar's settle time has passed, longer while a write is being retried). The harness's loop
  reads every session's acknowledgement file every tick, which at 1,000 sessions costs the
  benchmark process a large share of a core for sessions that have nothing new;
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
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.fleet_objects import REVISION
from controller.k8s.builders import AGENT_LABEL
from harness.kube import Kube
from harness.sessions import Session, Sessions

SWEEP = 1.0
"""Seconds between looks at every pod and ConfigMap even without watch events (a relist)."""
TALK = 1.0
"""Seconds past the sidecar's settle time during which a touched session is still published."""


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
        self._talking: dict[str, float] = {}
        """Pod uid -> until when its acknowledgement file and Lease are looked at."""
        self._applied: dict[str, dict[str, float]] = {}
        """Revision -> agent -> when its runtime applied a document of that revision."""
        self._lock = threading.Lock()

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
            now = time.monotonic()
            for uid, until in list(self._talking.items()):
                talking = self.sessions.get(uid)
                if talking is None or now > until:
                    del self._talking[uid]
                    continue
                self._publish(talking)
                if talking.retry_at > now:
                    self._talking[uid] = max(until, talking.retry_at + TALK)
            self._stop.wait(self.tick)

    def _talk(self, session: Session) -> None:
        until = time.monotonic() + session.sidecar.settle + TALK
        self._talking[session.pod_uid] = max(self._talking.get(session.pod_uid, 0.0), until)

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
