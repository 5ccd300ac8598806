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

``--writes same`` (issue 18) makes exactly the writes Bindery's design needs per agent, in the
controller's order: the bindings ConfigMap (created when absent, else a merge patch of its data,
the controller's shape: labels, owner reference, one ``bindings.json`` of the same layout),
then the status that reports it. Its user agent is ``bindery-samewrites/1``. It still resolves
nothing: the document is built from the same rows as the status.

    python -m bench.e2e_baseline --kubeconfig K --namespace NS [--workers 8] [--writes same]
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

from bench.e2e_objects import path
from harness.kube import Kube, KubeError, iter_watch

USER_AGENT = "bindery-baseline/1"
SAME_WRITES_USER_AGENT = "bindery-samewrites/1"
API_VERSION = "bindery.dev/v1alpha1"
MANAGED_BY = "app.kubernetes.io/managed-by"
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
    def __init__(
        self, kube: Kube, namespace: str, workers: int, *, config_maps: bool = False
    ) -> None:
        self.kube = kube
        self.ns = namespace
        self.workers = workers
        self.config_maps = config_maps
        self.lock = threading.Lock()
        self.agents: dict[str, Body] = {}
        self.resources: dict[str, Body] = {}
        self.by_uri: dict[str, Body] = {}
        self.slots: dict[str, list[Body]] = {}
        self.parents: dict[str, list[str]] = {}
        self.delivered: dict[str, str] = {}
        """ConfigMap name -> its bindings.json, as last written or listed (``--writes same``)."""
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
        if self.config_maps:
            self._fill(spec, rows, selected)
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

    def _ref(self, r: Body, alias: str = "") -> Body:
        out = {
            "uri": r["spec"]["uri"],
            "type": r["spec"]["type"],
            "name": r["metadata"]["name"],
            "namespace": self.ns,
            "uid": r["metadata"]["uid"],
        }
        if alias or r["spec"].get("alias"):
            out["alias"] = alias or r["spec"]["alias"]
        return out

    def _fits(self, rtype: str, wanted: str) -> bool:
        seen: set[str] = set()
        todo = [rtype]
        while todo:
            t = todo.pop()
            if t == wanted:
                return True
            if t not in seen:
                seen.add(t)
                todo += self.parents.get(t, [])
        return False

    def _fill(self, spec: Body, rows: list[Body], selected: list[Body]) -> None:
        """``--writes same``: the rows carry what the controller's do (each bound Resource, each
        slot's candidates), found by a plain first fit: the bytes of the controller's writes,
        without its resolution."""
        linked: list[tuple[str, Body]] = []
        for row in rows:
            if row["mode"] != "direct":
                continue
            r = self.by_uri.get(row["uri"])
            if r is None:
                row["resource"] = {"alias": row["name"], "type": row["tag"], "uri": row["uri"]}
            else:
                row["resource"] = self._ref(r, row["name"])
                linked.append((row["name"], r))
        linked += [(r["spec"].get("alias", ""), r) for r in selected]
        params = {u["name"]: u.get("params") or {} for u in spec.get("tools") or []}
        for row in rows:
            if row["mode"] == "direct":
                continue
            slot = next(
                (x for x in self.slots.get(row["tool"], []) if x["name"] == row["slot"]), {}
            )
            alias, found, reason = "", None, ""
            if row["mode"] == "static":
                name = slot.get("staticResource", "")
                found = self.resources.get(name)
                reason = f"selected: named by its staticResource '{name}'"
            elif row["mode"] == "parameter":
                value = params.get(row["tool"], {}).get(row["slot"], "")
                found = self.resources.get(value)
                reason = f"selected: named by its parameter value '{value}' (by name)"
            else:
                fit = [
                    (a, r) for a, r in linked if self._fits(r["spec"]["type"], slot["resourceType"])
                ]
                if fit:
                    alias, found = fit[0]
                    reason = "selected: the only compatible linked resource"
            if found is None:
                continue
            row["resource"] = self._ref(found, alias)
            candidate = {
                "reason": reason,
                "type": found["spec"]["type"],
                "uri": found["spec"]["uri"],
            }
            if alias:
                candidate["alias"] = alias
            row["candidates"] = [candidate]

    def document(self, agent: Body, status: Body) -> str:
        """The bindings.json the controller would deliver for these rows (same layout)."""

        def bound(row: Body) -> Body | None:
            ref = row.get("resource")
            if ref is None:
                return None
            r = self.by_uri.get(ref["uri"])
            if r is None or "uid" not in ref:
                return dict(ref)
            return {**ref, "attributes": r["spec"].get("attributes") or {}}

        resources: list[Body] = []
        tools: dict[str, list[Body]] = {}
        for row in status["bindings"]:
            if row["mode"] == "direct":
                entry = {k: row[k] for k in ("name", "tag", "uri", "state")}
                if (res := bound(row)) is not None:
                    entry["resource"] = res
                resources.append(entry)
                continue
            slot = {
                "name": row["slot"],
                "mode": row["mode"],
                "access": row["access"],
                "resourceType": row["resourceType"],
                "state": row["state"],
            }
            if (res := bound(row)) is not None:
                slot["resource"] = res
            tools.setdefault(row["tool"], []).append(slot)
        md = agent["metadata"]
        doc = {
            "apiVersion": API_VERSION,
            "kind": "Bindings",
            "agent": {"namespace": self.ns, "name": md["name"]},
            "resources": resources,
            "tools": [{"name": name, "slots": slots} for name, slots in tools.items()],
        }
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def config_map(self, agent: Body, rendered: str) -> Body:
        md = agent["metadata"]
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": f"{md['name']}-bindings",
                "namespace": self.ns,
                "labels": {
                    MANAGED_BY: "bindery",
                    "bindery.dev/agent": md["name"],
                    "app.kubernetes.io/component": "bindings",
                },
                "ownerReferences": [
                    {
                        "apiVersion": API_VERSION,
                        "kind": "AgentSpec",
                        "name": md["name"],
                        "uid": md["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "data": {"bindings.json": rendered},
        }

    def deliver(self, agent: Body, rendered: str) -> None:
        """Create the agent's bindings ConfigMap, or patch its data when it differs."""
        name = f"{agent['metadata']['name']}-bindings"
        with self.lock:
            known = self.delivered.get(name)
        if known == rendered:
            return
        cms = path("configmaps", self.ns)
        if known is None:
            try:
                self.kube.create(cms, self.config_map(agent, rendered))
            except KubeError as exc:
                if exc.status != 409:
                    raise
                known = ""  # created meanwhile by an earlier pass: patch it below
        if known is not None:
            self.kube.merge_patch(f"{cms}/{name}", {"data": {"bindings.json": rendered}})
        with self.lock:
            self.writes += 1
            self.delivered[name] = rendered

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
                    rendered = (
                        self.document(agent, new)
                        if self.config_maps and agent is not None and new is not None
                        else ""
                    )
                if agent is None or new is None or self._same(agent.get("status") or {}, new):
                    continue
                if self.config_maps:
                    self.deliver(agent, rendered)
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
            old = self.resources.pop(name, None)
            if old is not None:
                self.by_uri.pop(old["spec"]["uri"], None)
            if kind != "DELETED":
                self.resources[name] = body
                self.by_uri[body["spec"]["uri"]] = body
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

    def _list(self, plural: str, label_selector: str = "") -> tuple[list[Body], str]:
        query = [("labelSelector", label_selector)] if label_selector else None
        data = self.kube.request("GET", path(plural, self.ns), query=query)
        return data.get("items") or [], (data.get("metadata") or {}).get("resourceVersion", "")

    def run(self) -> None:
        tools, _ = self._list("tools")
        self.slots = {t["metadata"]["name"]: t["spec"].get("resourceSlots") or [] for t in tools}
        resources, res_rv = self._list("resources")
        self.resources = {r["metadata"]["name"]: r for r in resources}
        self.by_uri = {r["spec"]["uri"]: r for r in resources}
        if self.config_maps:
            types = self.kube.request("GET", path("resourcetypes")).get("items") or []
            self.parents = {
                t["metadata"]["name"]: (t.get("spec") or {}).get("parentTypes") or [] for t in types
            }
            cms, _ = self._list("configmaps", f"{MANAGED_BY}=bindery")
            self.delivered = {
                c["metadata"]["name"]: (c.get("data") or {}).get("bindings.json", "") for c in cms
            }
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
    parser.add_argument(
        "--writes",
        choices=["status", "same"],
        default="status",
        help="status: one status patch per agent; same: bindings ConfigMap + status, as Bindery",
    )
    args = parser.parse_args(argv)
    same = args.writes == "same"
    kube = Kube(args.kubeconfig, SAME_WRITES_USER_AGENT if same else USER_AGENT)
    Baseline(kube, args.namespace, args.workers, config_maps=same).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
