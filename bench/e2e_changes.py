"""The changes the latency scenarios make, and how one change is timed.

A sample arms trackers on the benchmark's own watches (``harness.kube.Watch``: each event
stamped on receipt), makes one change through the API, and waits until every tracker is done:
its latency is the seconds from just before the change to the last stamp. :class:`Changes`
keeps what was changed so far (each agent's ``notes`` URI version, the team issues' alias,
the anchor Deployments' template revision), so that every change is a new value.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

from bench import e2e_objects as objs
from harness.kube import Kube, Tracker, Watch

Armed = list[tuple[Watch, Tracker]]
"""(watch, tracker) pairs a sample waits for."""


class Changes:
    """Spec changes with a new value each time, and the timing of one of them."""

    def __init__(self, kube: Kube, anchor_ns: str, timeout: float) -> None:
        self.kube = kube
        self.anchor_ns = anchor_ns
        self.timeout = timeout
        self.versions: dict[str, int] = {}
        self.alias_version = 0
        self.anchor_rev = 0
        self.written: dict[str, Any] = {}
        """The object the last spec PATCH returned."""

    # ------------------------------------------------------------------------ the changes

    def next_notes_uri(self, ns: str, i: int) -> str:
        """The ``notes`` URI the next :meth:`binding` of agent ``i`` in ``ns`` writes."""
        return objs.notes_uri(i, self.versions.get(f"{ns}/{i}", 0) + 1)

    def binding(self, ns: str, i: int) -> str:
        """Agent ``i``'s ``notes`` binding to a new URI (a JSON patch)."""
        key = f"{ns}/{i}"
        v = self.versions[key] = self.versions.get(key, 0) + 1
        uri = objs.notes_uri(i, v)
        self.written = self.kube.json_patch(
            objs.path("agentspecs", ns, objs.agent_name(i)),
            [
                {"op": "test", "path": "/spec/resources/2/name", "value": "notes"},
                {"op": "replace", "path": "/spec/resources/2/uri", "value": uri},
            ],
        )
        return uri

    def template(self, name: str) -> None:
        """An anchor Deployment's pod template, by a new annotation value."""
        self.anchor_rev += 1
        self.written = self.kube.merge_patch(
            f"{objs.deployments_path(self.anchor_ns)}/{name}",
            {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {objs.ANCHOR_ANNOTATION: str(self.anchor_rev)}}
                    }
                }
            },
        )

    def next_alias(self) -> str:
        """The alias the next :meth:`alias` writes."""
        return f"issue-v{self.alias_version + 1}"

    def alias(self, ns: str, team: int) -> str:
        """A team issue's alias, which its 50 dependents deliver."""
        self.alias_version += 1
        alias = f"issue-v{self.alias_version}"
        self.kube.merge_patch(
            objs.path("resources", ns, objs.team_issue_name(team)), {"spec": {"alias": alias}}
        )
        return alias

    # ------------------------------------------------------------------------ timing one

    def sample(self, trackers: Callable[[], Armed], change: Callable[[], Any]) -> float:
        """Arm the trackers, make the change, wait for every tracker: seconds from the change."""
        armed = trackers()
        t0 = time.monotonic()
        change()
        try:
            end = max(tr.wait(self.timeout) for _, tr in armed)
        finally:
            for w, tr in armed:
                w.untrack(tr)
        return float(end - t0)

    def binding_sample(self, ns: str, i: int, agents: Watch, cms: Watch | None) -> float:
        """Agent ``i``'s binding changed, until its status (and ConfigMap, if watched) shows it."""
        uri = self.next_notes_uri(ns, i)
        arm = functools.partial(arm_binding, objs.agent_name(i), uri, agents, cms)
        return self.sample(arm, functools.partial(self.binding, ns, i))

    def alias_sample(
        self, ns: str, team: int, shape: objs.Shape, agents: Watch, cms: Watch | None
    ) -> float:
        """A team issue's alias changed, until every dependent's status (and ConfigMap, if
        watched) shows it."""
        deps = objs.team_members(team, shape)
        uri = objs.team_issue_uri(team)
        arm = functools.partial(arm_fanout, deps, self.next_alias(), uri, agents, cms)
        return self.sample(arm, functools.partial(self.alias, ns, team))

    def generation_sample(self, w: Watch, name: str, change: Callable[[], Any]) -> float:
        """Seconds from the spec PATCH to the first event of ``name`` whose
        status.observedGeneration reaches the generation the PATCH made."""
        body = w.get(name)
        if body is None:
            raise RuntimeError(f"{name} is not in the benchmark's watch of {w.path}")
        gen = int(body["metadata"]["generation"]) + 1
        tr = w.track(functools.partial(objs.observed_at_least, gen=gen), 1, [name])
        t0 = time.monotonic()
        try:
            change()
            got = int(self.written["metadata"]["generation"])
            if got != gen:
                raise RuntimeError(
                    f"{w.path}/{name}: the spec PATCH made generation {got}, expected {gen} "
                    "(the watch was behind, or something else changed the spec): rerun"
                )
            end = tr.wait(self.timeout)
        finally:
            w.untrack(tr)
        return float(end - t0)


def arm_binding(name: str, uri: str, agents: Watch, cms: Watch | None) -> Armed:
    """Trackers for a binding sample: the agent's status, and its ConfigMap if watched, show
    the new URI."""
    out = [(agents, agents.track(lambda b: objs.status_has_uri(b, uri), 1, [name]))]
    if cms is not None:
        pred = objs.cm_contains(json.dumps(uri))
        out.append((cms, cms.track(pred, 1, [f"{name}-bindings"])))
    return out


def arm_fanout(deps: list[str], alias: str, uri: str, agents: Watch, cms: Watch | None) -> Armed:
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
        pred = objs.cm_contains(f'"alias": {json.dumps(alias)}')
        out.append((cms, cms.track(pred, len(deps), names)))
    return out
