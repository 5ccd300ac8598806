"""The baseline client: the least a controller must do, to measure this API server's limit.

Same language (Python), same machine, same transport (``kubernetes.client.ApiClient``, plain
JSON bodies) and the same number of workers as the controller (8). It LISTs the namespace's
Tools, Resources and AgentSpecs once, then WATCHes AgentSpecs and Resources, and for every
agent whose status is not current writes one status (a JSON patch ``add /status``, the verb the
controller uses) of the controller's shape and about its size: ``observedGeneration``, ``state``,
one ``bindings`` row per direct binding and tool slot, and three conditions. It does no
resolution, keeps no index, writes no ConfigMap and posts no event: one write per agent.

A Resource change re-writes the status of the agents whose ``resourceSelector.matchLabels``
select it (a linear scan), so the fan-out benchmark has a baseline too.

    python -m bench.e2e_baseline --kubeconfig K --namespace NS [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from bench.e2e_kube import Kube, iter_watch
from bench.e2e_objects import path

USER_AGENT = "bindery-baseline/1"
Body = dict[str, Any]


class DedupQueue:
    """A name is queued at most once; one re-queued while being processed runs again after."""

    def __init__(self) -> None:
        self._q: queue.Queue[str] = queue.Queue()
        self._lock = threading.Lock()
        self._pending: set[str] = set()
        self._active: set[str] = set()
        self._dirty: set[str] = set()

    def add(self, name: str) -> None:
        with self._lock:
            if name in self._active:
                self._dirty.add(name)
            elif name not in self._pending:
                self._pending.add(name)
                self._q.put(name)

    def get(self) -> str:
        name = self._q.get()
        with self._lock:
            self._pending.discard(name)
            self._active.add(name)
        return name

    def done(self, name: str) -> None:
        with self._lock:
            self._active.discard(name)
            again = name in self._dirty
            self._dirty.discard(name)
        if again:
            self.add(name)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Baseline:
    def __init__(self, kube: Kube, namespace: str, workers: int) -> None:
        self.kube = kube
        self.ns = namespace
        self.workers = workers
        self.lock = threading.Lock()
        self.agents: dict[str, Body] = {}
        self.resources: dict[str, Body] = {}
        self.slots: dict[str, list[Body]] = {}
        self.queue = DedupQueue()
        self.writes = 0

    # -------------------------------------------------------------------------- desired status

    def _selected(self, agent: Body) -> list[Body]:
        match = ((agent.get("spec") or {}).get("resourceSelector") or {}).get("matchLabels") or {}
        if not match:
            return []
        return [
            r
            for r in self.resources.values()
            if all(((r["metadata"].get("labels") or {}).get(k)) == v for k, v in match.items())
        ]

    def desired(self, agent: Body) -> Body:
        md, spec = agent["metadata"], agent.get("spec") or {}
        gen = md.get("generation", 0)
        rows: list[Body] = [
            {
                "name": b["name"],
                "tag": b["tag"],
                "uri": b["uri"],
                "mode": "direct",
                "state": "Bound",
            }
            for b in spec.get("resources") or []
        ]
        selected = self._selected(agent)
        for use in spec.get("tools") or []:
            for slot in self.slots.get(use["name"], []):
                row: Body = {
                    "name": f"{use['name']}.{slot['name']}",
                    "tool": use["name"],
                    "slot": slot["name"],
                    "mode": slot.get("binding", "contextual"),
                    "access": slot.get("access", "read_write"),
                    "resourceType": slot["resourceType"],
                    "required": slot.get("required", True),
                    "state": "Bound",
                }
                fit = [r for r in selected if r["spec"]["type"] == slot["resourceType"]]
                if fit:
                    r = fit[0]
                    row["resource"] = {
                        "uri": r["spec"]["uri"],
                        "type": r["spec"]["type"],
                        "alias": r["spec"].get("alias", ""),
                        "name": r["metadata"]["name"],
                        "namespace": self.ns,
                        "uid": r["metadata"]["uid"],
                    }
                rows.append(row)
        now = _now()
        message = (
            f"{len(rows)} bound, 0 deferred, 0 unbound; delivered to ConfigMap "
            f"{md['name']}-bindings"
        )

        def cond(type_: str, status: bool, reason: str, msg: str) -> Body:
            return {
                "type": type_,
                "status": "True" if status else "False",
                "reason": reason,
                "message": msg,
                "observedGeneration": gen,
                "lastTransitionTime": now,
            }

        return {
            "observedGeneration": gen,
            "state": "Idle",
            "bindingsConfigMap": f"{md['name']}-bindings",
            "bindings": rows,
            "conditions": [
                cond("Ready", True, "BindingsDelivered", message),
                cond("Reconciling", False, "Reconciled", ""),
                cond("Stalled", False, "Reconciled", ""),
            ],
        }

    @staticmethod
    def _same(current: Body, new: Body) -> bool:
        return bool(
            current.get("observedGeneration") == new["observedGeneration"]
            and current.get("bindings") == new["bindings"]
        )

    # -------------------------------------------------------------------------- workers

    def worker(self) -> None:
        while True:
            name = self.queue.get()
            try:
                with self.lock:
                    agent = self.agents.get(name)
                    new = self.desired(agent) if agent is not None else None
                if agent is None or new is None or self._same(agent.get("status") or {}, new):
                    continue
                written = self.kube.json_patch(
                    path("agentspecs", self.ns, name, "status"),
                    [{"op": "add", "path": "/status", "value": new}],
                )
                with self.lock:
                    self.writes += 1
                    cached = self.agents.get(name)
                    if cached is None or int(written["metadata"]["resourceVersion"]) >= int(
                        cached["metadata"]["resourceVersion"]
                    ):
                        self.agents[name] = written
            except Exception as exc:  # retry once the API server answers again
                print(f"baseline: {name}: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.5)
                self.queue.add(name)
            finally:
                self.queue.done(name)

    # -------------------------------------------------------------------------- intake

    def on_agent(self, kind: str, body: Body) -> None:
        name = body["metadata"]["name"]
        with self.lock:
            if kind == "DELETED":
                self.agents.pop(name, None)
                return
            cached = self.agents.get(name)
            if cached is not None and int(body["metadata"]["resourceVersion"]) <= int(
                cached["metadata"]["resourceVersion"]
            ):
                return
            self.agents[name] = body
        st = body.get("status") or {}
        if st.get("observedGeneration") != body["metadata"].get("generation"):
            self.queue.add(name)

    def on_resource(self, kind: str, body: Body) -> None:
        name = body["metadata"]["name"]
        with self.lock:
            if kind == "DELETED":
                self.resources.pop(name, None)
            else:
                self.resources[name] = body
            labels = body["metadata"].get("labels") or {}
            dependents = [
                a["metadata"]["name"]
                for a in self.agents.values()
                if (
                    match := ((a.get("spec") or {}).get("resourceSelector") or {}).get(
                        "matchLabels"
                    )
                )
                and all(labels.get(k) == v for k, v in match.items())
            ]
        for agent in dependents:
            self.queue.add(agent)

    def watch(self, plural: str, rv: str, handle: Any) -> None:
        while True:
            try:
                for ev in iter_watch(self.kube.client, path(plural, self.ns), rv):
                    obj = ev.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        handle(ev["type"], obj)
            except Exception as exc:
                print(f"baseline: watch {plural}: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.5)

    def _list(self, plural: str) -> tuple[list[Body], str]:
        data = self.kube.request("GET", path(plural, self.ns))
        return data.get("items") or [], (data.get("metadata") or {}).get("resourceVersion", "")

    def run(self) -> None:
        tools, _ = self._list("tools")
        self.slots = {t["metadata"]["name"]: t["spec"].get("resourceSlots") or [] for t in tools}
        resources, res_rv = self._list("resources")
        self.resources = {r["metadata"]["name"]: r for r in resources}
        agents, agent_rv = self._list("agentspecs")
        for a in agents:
            self.on_agent("ADDED", a)
        for i in range(self.workers):
            threading.Thread(target=self.worker, name=f"worker-{i}", daemon=True).start()
        threading.Thread(
            target=self.watch, args=("agentspecs", agent_rv, self.on_agent), daemon=True
        ).start()
        threading.Thread(
            target=self.watch, args=("resources", res_rv, self.on_resource), daemon=True
        ).start()
        print(
            json.dumps({"event": "baseline started", "agents": len(agents), "t": time.time()}),
            flush=True,
        )
        while True:
            time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the benchmark's baseline client")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)
    kube = Kube(args.kubeconfig, USER_AGENT)
    Baseline(kube, args.namespace, args.workers).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
