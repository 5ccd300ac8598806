"""The fleet benchmark's same-writes baseline: the writes Bindery's design makes for a change of
a Resource that every agent binds, and nothing else (issue 38).

For each new generation of the shared Resource it writes, per agent, in the controller's
order: the bindings ConfigMap (merge patch of ``bindings.json``, the controller's layout with the
Resource's new attributes), then the agent's status saying the document is written and not yet
applied (``delivery`` pending, Ready False); the agent's session (its delivery sidecar, played
by the same code as on the controller's side) records the application on the agent's
acknowledgement Lease; on that Lease event the baseline writes the agent's status again
(applied, Ready True). It writes the Resource's status twice per generation: when it sees the
new generation (rollout pending) and once the last agent applied it (``Delivered`` True), which
is what the benchmark's clock waits for. Statuses have the controller's shape and about its
size (JSON patch ``add /status``, the controller's verb).

Same transport as the e2e baselines (``kubernetes.client.ApiClient``, plain JSON), 8 workers, a
deduplicating queue of agents (one worker per agent at a time, a change seen meanwhile runs it
again), level-triggered: each pass does what the agent's state calls for. No resolution, no
event, no index: the baseline knows every agent binds the one Resource.

    python -m bench.fleet_baseline --kubeconfig K --namespace NS [--workers 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from bindery_session.wire import digest

from bench import fleet_objects as objs
from bench.e2e_baseline import DedupQueue
from controller.domain import names
from controller.domain.acknowledgement import Acknowledgement
from harness.kube import Kube, KubeError, iter_watch

USER_AGENT = "bindery-fleet-baseline/1"
MANAGED_BY = "app.kubernetes.io/managed-by"
Body = dict[str, Any]
HASH = "sha256:" + "0" * 64
"""A trajectory hash of the controller's length (the baseline launches nothing)."""


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _condition(type_: str, status: bool, reason: str, message: str, gen: int) -> Body:
    return {
        "lastTransitionTime": _now(),
        "message": message,
        "observedGeneration": gen,
        "reason": reason,
        "status": "True" if status else "False",
        "type": type_,
    }


class FleetBaseline:
    def __init__(self, kube: Kube, namespace: str, workers: int) -> None:
        self.kube = kube
        self.ns = namespace
        self.workers = workers
        self.lock = threading.Lock()
        self.queue = DedupQueue()
        self.agents: dict[str, Body] = {}
        self.resource: Body = {}
        self.generation = 0
        self.config_maps: dict[str, str] = {}
        """ConfigMap name -> its bindings.json, as last written or listed."""
        self.delivered: dict[str, tuple[int, str]] = {}
        """Agent -> (generation, digest) of the document last written for it."""
        self.acked: dict[str, str] = {}
        """Agent -> the digest its session last applied (its Lease)."""
        self.reported: dict[str, int] = {}
        """Agent -> the generation whose application its status reports."""
        self.finished = 0
        """The last generation whose Delivered status was written."""

    # -------------------------------------------------------------------------- documents

    def document(self, agent: str, res: Body) -> str:
        """The bindings.json the controller delivers for an agent that binds ``res`` (same
        layout and bytes)."""
        md, spec = res["metadata"], res["spec"]
        bound = {
            "alias": objs.RESOURCE,
            "attributes": spec.get("attributes") or {},
            "name": md["name"],
            "namespace": self.ns,
            "type": spec["type"],
            "uid": md["uid"],
            "uri": spec["uri"],
        }
        doc = {
            "agent": {"name": agent, "namespace": self.ns},
            "apiVersion": objs.API_VERSION,
            "kind": "Bindings",
            "resources": [
                {
                    "name": objs.RESOURCE,
                    "resource": bound,
                    "state": "Bound",
                    "tag": objs.TYPE,
                    "uri": objs.URI,
                }
            ],
            "tools": [],
        }
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def agent_status(self, agent: Body, res: Body, written: str, applied: str) -> Body:
        """The agent's status, the controller's shape: pending until ``applied == written``."""
        md = agent["metadata"]
        gen = int(md.get("generation") or 1)
        name = md["name"]
        done = applied == written
        config_map = f"{name}-bindings"
        ready = (
            f"1 bound, 0 deferred, 0 unbound; delivered to ConfigMap {config_map}; applied by "
            f"session pod {name}-session-0"
            if done
            else f"1 bound, 0 deferred, 0 unbound; delivered to ConfigMap {config_map}; waiting "
            f"for session pod {name}-session-0 to apply {written[:19]}"
        )
        delivery: Body = {
            "deliveredDigest": written if done else applied,
            "digest": written,
            "podUID": f"fleet-baseline-{name}",
            "synced": done,
            "writtenAt": _micro(),
        }
        if applied:
            delivery["appliedDigest"] = applied
            delivery["acknowledgedAt"] = _micro()
        return {
            "bindings": [
                {
                    "mode": "direct",
                    "name": objs.RESOURCE,
                    "resource": {
                        "alias": objs.RESOURCE,
                        "name": res["metadata"]["name"],
                        "namespace": self.ns,
                        "type": objs.TYPE,
                        "uid": res["metadata"]["uid"],
                        "uri": objs.URI,
                    },
                    "state": "Bound",
                    "tag": objs.TYPE,
                    "uri": objs.URI,
                }
            ],
            "bindingsConfigMap": config_map,
            "conditions": [
                _condition(
                    "Ready",
                    done,
                    "BindingsApplied" if done else "AwaitingAcknowledgement",
                    ready,
                    gen,
                ),
                _condition("Reconciling", not done, "Reconciled", "", gen),
                _condition("Stalled", False, "Reconciled", "", gen),
                _condition(
                    "RelaunchRequired",
                    False,
                    "UpToDate",
                    "the session runs the current spec.runtime",
                    gen,
                ),
            ],
            "delivery": delivery,
            "desiredLaunchGeneration": 0,
            "desiredTrajectoryHash": HASH,
            "drift": False,
            "lastLaunchTime": _now(),
            "launch": "0/0",
            "launchedGeneration": 0,
            "launchedTrajectoryHash": HASH,
            "observedGeneration": gen,
            "observedLaunchGeneration": 0,
            "session": {"phase": "Running", "pod": f"{name}-session-0"},
            "state": "Idle",
        }

    def resource_status(self, gen: int, applied: int) -> Body:
        """The Resource's status, the controller's shape, with the rollout of ``gen``."""
        total = len(self.agents)
        pending = total - applied
        of = f"generation {gen}: applied by {applied} of {total} dependent agent(s)"
        delivered = (
            _condition("Delivered", True, "Delivered", of, gen)
            if not pending
            else _condition("Delivered", False, "Pending", f"{of}; {pending} pending", gen)
        )
        return {
            "conditions": [
                _condition("Ready", True, "Valid", "the resource matches its type's contract", gen),
                _condition("Reconciling", bool(pending), "Reconciled", "", gen),
                _condition("Stalled", False, "Reconciled", "", gen),
                delivered,
            ],
            "delivered": f"{applied}/{total}",
            "observedGeneration": gen,
            "rollout": {
                "applied": applied,
                "dependents": total,
                "generation": gen,
                "pending": pending,
                "refused": 0,
                "suspended": 0,
            },
            "valid": True,
        }

    # -------------------------------------------------------------------------- writes

    def write_config_map(self, agent: Body, text: str) -> None:
        name = f"{agent['metadata']['name']}-bindings"
        with self.lock:
            known = self.config_maps.get(name)
        if known == text:
            return
        cms = f"/api/v1/namespaces/{self.ns}/configmaps"
        if known is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": name,
                    "labels": {
                        MANAGED_BY: "bindery",
                        "bindery.dev/agent": agent["metadata"]["name"],
                        "app.kubernetes.io/component": "bindings",
                    },
                    "ownerReferences": [objs.owner(agent)],
                },
                "data": {"bindings.json": text},
            }
            try:
                self.kube.create(cms, body)
            except KubeError as exc:
                if exc.status != 409:
                    raise
                known = ""
        if known is not None:
            self.kube.merge_patch(f"{cms}/{name}", {"data": {"bindings.json": text}})
        with self.lock:
            self.config_maps[name] = text

    def write_status(self, path: str, status: Body) -> None:
        self.kube.json_patch(path, [{"op": "add", "path": "/status", "value": status}])

    # -------------------------------------------------------------------------- the pass

    def reconcile(self, name: str) -> None:
        """What the agent's state calls for: its new document and pending status, or its
        applied status (and the Resource's Delivered status after the last one)."""
        with self.lock:
            agent = self.agents.get(name)
            res, gen = self.resource, self.generation
            written = self.delivered.get(name)
            acked = self.acked.get(name, "")
            reported = self.reported.get(name)
        if agent is None or not res:
            return
        status_path = objs.path("agentspecs", self.ns, f"{name}/status")
        if written is None or written[0] != gen:
            text = self.document(name, res)
            dg = digest(text)
            with self.lock:
                self.delivered[name] = (gen, dg)
            self.write_config_map(agent, text)
            self.write_status(status_path, self.agent_status(agent, res, dg, acked))
            return
        if acked != written[1] or reported == gen:
            return
        self.write_status(status_path, self.agent_status(agent, res, written[1], acked))
        with self.lock:
            self.reported[name] = gen
            applied = sum(1 for g in self.reported.values() if g == gen)
            last = applied == len(self.agents) and self.finished < gen
            if last:
                self.finished = gen
        if last:
            self.write_status(
                objs.path("resources", self.ns, f"{objs.RESOURCE}/status"),
                self.resource_status(gen, applied),
            )

    def worker(self) -> None:
        while True:
            name = self.queue.get()
            try:
                self.reconcile(name)
            except Exception as exc:  # retry once the API server answers again
                print(f"fleet baseline: {name}: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.5)
                self.queue.add(name)
            finally:
                self.queue.done(name)

    # -------------------------------------------------------------------------- intake

    def on_resource(self, kind: str, body: Body) -> None:
        if kind == "DELETED" or body["metadata"]["name"] != objs.RESOURCE:
            return
        gen = int(body["metadata"].get("generation") or 0)
        with self.lock:
            if gen <= self.generation:
                return
            self.resource, self.generation = body, gen
            applied = sum(1 for g in self.reported.values() if g == gen)
            agents = list(self.agents)
        for name in agents:
            self.queue.add(name)
        path = objs.path("resources", self.ns, f"{objs.RESOURCE}/status")
        try:
            self.write_status(path, self.resource_status(gen, applied))
        except Exception as exc:  # only a progress report: the Delivered one follows
            print(f"fleet baseline: resource status: {exc}", file=sys.stderr, flush=True)

    def on_lease(self, kind: str, body: Body) -> None:
        name = body["metadata"]["name"]
        if kind == "DELETED" or not name.startswith(names.ACK_LEASE_PREFIX):
            return
        agent = name.removeprefix(names.ACK_LEASE_PREFIX)
        ack = Acknowledgement.from_annotations(body["metadata"].get("annotations") or {})
        with self.lock:
            if agent not in self.agents or self.acked.get(agent) == ack.applied_digest:
                return
            self.acked[agent] = ack.applied_digest
        self.queue.add(agent)

    def watch(self, path: str, rv: str, handle: Any) -> None:
        while True:
            try:
                for ev in iter_watch(self.kube.client, path, rv):
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        rv = self._relist(path, handle)
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                        handle(ev["type"], obj)
            except Exception as exc:
                print(f"fleet baseline: watch {path}: {exc}", file=sys.stderr, flush=True)
                time.sleep(0.5)

    def _relist(self, path: str, handle: Any) -> str:
        data = self.kube.request("GET", path)
        for item in data.get("items") or []:
            handle("MODIFIED", item)
        return str((data.get("metadata") or {}).get("resourceVersion", ""))

    def run(self) -> None:
        agents = self.kube.request("GET", objs.path("agentspecs", self.ns))
        self.agents = {a["metadata"]["name"]: a for a in agents.get("items") or []}
        cms = self.kube.request(
            "GET",
            f"/api/v1/namespaces/{self.ns}/configmaps",
            query=[("labelSelector", f"{MANAGED_BY}=bindery")],
        )
        self.config_maps = {
            c["metadata"]["name"]: (c.get("data") or {}).get("bindings.json", "")
            for c in cms.get("items") or []
        }
        leases_path = f"/apis/coordination.k8s.io/v1/namespaces/{self.ns}/leases"
        leases = self.kube.request("GET", leases_path)
        for lease in leases.get("items") or []:
            self.on_lease("ADDED", lease)
        resources_path = objs.path("resources", self.ns)
        resources = self.kube.request("GET", resources_path)
        for threadno in range(self.workers):
            threading.Thread(target=self.worker, name=f"worker-{threadno}", daemon=True).start()
        for item in resources.get("items") or []:
            self.on_resource("ADDED", item)
        for path, listing, handle in (
            (leases_path, leases, self.on_lease),
            (resources_path, resources, self.on_resource),
        ):
            rv = str((listing.get("metadata") or {}).get("resourceVersion", ""))
            threading.Thread(target=self.watch, args=(path, rv, handle), daemon=True).start()
        print(json.dumps({"event": "fleet baseline started", "agents": len(self.agents)}))
        sys.stdout.flush()
        while True:
            time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the fleet benchmark's same-writes baseline")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args(argv)
    FleetBaseline(Kube(args.kubeconfig, USER_AGENT), args.namespace, args.workers).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
