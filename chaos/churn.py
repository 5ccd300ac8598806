"""The seeded random mix of changes a run makes to its agents.

The harness is the only writer of agents' specs and labels, so it keeps its own model of each
agent and chooses the next change from it: create, delete (background, Foreground, Orphan),
switch the work URI within the per-URI pool, go idle, edit labels only, raise
relaunchGeneration of an agent with a runtime. Refused changes (409/404/422) are counted, not
retried: they are part of the chaos (a name still finalizing, an agent already gone).

Some agents with a runtime have an idle policy with a small ``suspendAfterSeconds``; their work
comes and goes more often, so their sessions are suspended and resumed during the run.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.kube import Kube, KubeError

Body = dict[str, Any]
GROUP_PATH = "/apis/bindery.dev/v1alpha1/namespaces/{ns}/agentspecs"
TAG = "github-issue"
RESOURCE_TYPE: Body = {
    "apiVersion": "bindery.dev/v1alpha1",
    "kind": "ResourceType",
    "metadata": {"name": TAG},
    "spec": {"description": "An issue on GitHub.", "uriSchemes": [TAG]},
}
RUNTIME: Body = {"image": "registry.example/chaos-agent:1", "model": "chaos"}
SUSPEND_AFTER = (1, 2, 3)
"""The idle policies' seconds: short, so suspensions and resumes race the handoffs."""


def uri_pool(agents: int, per_uri: int) -> list[str]:
    return [f"{TAG}://chaos/repo/{i}" for i in range(max(1, agents // max(1, per_uri)))]


@dataclass
class AgentModel:
    name: str
    work: str | None
    runtime: bool
    relaunch: int = 0
    labels: int = 0
    suspends: bool = False
    """Its runtime has an idle policy: its session is suspended while it has no work."""


@dataclass
class Churn:
    """Chooses and makes changes; ``made`` counts what the API server accepted, by action."""

    kube: Kube
    namespace: str
    rng: random.Random
    agents: int
    uris: list[str]
    runtime_share: float = 0.3
    suspend_share: float = 0.4
    """Of the agents with a runtime, the share with an idle policy."""
    names: list[str] = field(default_factory=list)
    live: dict[str, AgentModel] = field(default_factory=dict)
    made: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    raises: int = 0
    namespaces: list[str] = field(default_factory=list)
    """Spread the agents over these namespaces (each name always in the same one, so names stay
    unique across them); empty: all in ``namespace``."""

    def __post_init__(self) -> None:
        # A pool of names bigger than the population, so deleted names come back.
        self.names = [f"agent-{i:03d}" for i in range(self.agents + self.agents // 2)]

    @property
    def path(self) -> str:
        return GROUP_PATH.format(ns=self.namespace)

    def path_of(self, name: str) -> str:
        """The collection ``name`` lives in: its namespace of ``namespaces`` by its number."""
        if not self.namespaces:
            return self.path
        return GROUP_PATH.format(ns=self.namespaces[int(name[-3:]) % len(self.namespaces)])

    def _work(self) -> str | None:
        return self.rng.choice(self.uris) if self.rng.random() < 0.85 else None

    @staticmethod
    def _resources(work: str | None) -> list[Body]:
        return [{"name": "work", "tag": TAG, "uri": work}] if work else []

    def create(self, name: str | None = None) -> None:
        free = [n for n in self.names if n not in self.live]
        if name is None:
            if not free:
                return
            name = self.rng.choice(free)
        model = AgentModel(name, self._work(), self.rng.random() < self.runtime_share)
        spec: Body = {"resources": self._resources(model.work)}
        if model.runtime:
            spec["runtime"] = RUNTIME
            spec["relaunchGeneration"] = 0
            model.suspends = self.rng.random() < self.suspend_share
            if model.suspends:
                idle = {"suspendAfterSeconds": self.rng.choice(SUSPEND_AFTER)}
                spec["runtime"] = {**RUNTIME, "idle": idle}
        body = {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": "AgentSpec",
            "metadata": {"name": name, "labels": {"chaos": "0"}},
            "spec": spec,
        }
        if self._send("create", "POST", self.path_of(name), body):
            self.live[name] = model

    def step(self) -> None:
        """One change, chosen by weight; the population drifts around ``agents``."""
        if not self.live or (len(self.live) < self.agents and self.rng.random() < 0.5):
            self.create()
            return
        model = self.live[self.rng.choice(sorted(self.live))]
        with_runtime = model.runtime
        actions = ["delete", "switch", "switch", "switch", "idle", "label"]
        if with_runtime:
            actions.append("relaunch")
        if model.suspends:  # work comes and goes: suspend, then resume on the next switch
            actions += ["idle", "idle", "switch"]
        action = self.rng.choice(actions)
        url = f"{self.path_of(model.name)}/{model.name}"
        if action == "delete":
            policy = self.rng.choice(["Background", "Background", "Foreground", "Orphan"])
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy}
            if self._send(f"delete-{policy.lower()}", "DELETE", url, body):
                del self.live[model.name]
        elif action in ("switch", "idle"):
            work = self.rng.choice([u for u in self.uris if u != model.work] or self.uris)
            target = None if action == "idle" else work
            patch: Body = {"spec": {"resources": self._resources(target)}}
            if self._send(action, "PATCH", url, patch, merge=True):
                model.work = target
        elif action == "label":
            model.labels += 1
            patch = {"metadata": {"labels": {"chaos": str(model.labels)}}}
            self._send("label", "PATCH", url, patch, merge=True)
        else:
            patch = {"spec": {"relaunchGeneration": model.relaunch + 1}}
            if self._send("relaunch", "PATCH", url, patch, merge=True):
                model.relaunch += 1
                self.raises += 1

    def _send(
        self, action: str, method: str, path: str, body: Body, *, merge: bool = False
    ) -> bool:
        try:
            self.kube.request(
                method,
                path,
                body,
                content_type="application/merge-patch+json" if merge else "application/json",
                timeout=10,
            )
        except KubeError as exc:
            self.refused[f"{action}:{exc.status}"] += 1
            if exc.status == 404 and method != "POST":
                # Gone already (a deletion finished): forget it.
                self.live.pop(path.rsplit("/", 1)[-1], None)
            return False
        except Exception:
            self.refused[f"{action}:unreachable"] += 1
            return False
        self.made[action] += 1
        return True
