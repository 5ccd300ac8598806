"""Record every version of the namespace's objects with the harness's own list-watches.

One thread per kind: LIST, then WATCH from the list's resourceVersion with bookmarks, resuming
from the last resourceVersion seen after every disconnect (API-server restarts included). When
the API server answers 410 Gone (the resumption point left its watch cache), the recorder lists
again and records the difference: changed objects at their own resourceVersion, vanished ones as
DELETED at the list's resourceVersion, and a :class:`Gap` saying versions may be missing there.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.replay import AGENT, CONFIG_MAP, DELETED, LEASE, POD, STATEFUL_SET, Body, Version
from harness.kube import Kube, KubeError, api_client, iter_watch

PATHS = {
    CONFIG_MAP: "/api/v1/namespaces/{ns}/configmaps",
    LEASE: "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
    AGENT: "/apis/bindery.dev/v1alpha1/namespaces/{ns}/agentspecs",
    POD: "/api/v1/namespaces/{ns}/pods",
    STATEFUL_SET: "/apis/apps/v1/namespaces/{ns}/statefulsets",
}
WATCH_SECONDS = 5


@dataclass(frozen=True)
class Gap:
    kind: str
    from_rv: int
    to_rv: int
    received: float


def _slim(kind: str, body: Body) -> Body:
    """Only what the checks read: keeps a run's recording small."""
    md = body.get("metadata") or {}
    out: Body = {
        "metadata": {
            k: md[k]
            for k in (
                "name",
                "uid",
                "resourceVersion",
                "generation",
                "labels",
                "annotations",
                "ownerReferences",
                "deletionTimestamp",
                "finalizers",
            )
            if k in md
        }
    }
    if kind == CONFIG_MAP:
        out["data"] = body.get("data") or {}
    elif kind == LEASE:
        out["spec"] = body.get("spec") or {}
    elif kind == AGENT:
        out["spec"] = body.get("spec") or {}
        out["status"] = body.get("status") or {}
    elif kind == STATEFUL_SET:
        template_md = ((body.get("spec") or {}).get("template") or {}).get("metadata") or {}
        out["spec"] = {"template": {"metadata": {"annotations": template_md.get("annotations")}}}
    elif kind == POD:
        out["status"] = {"phase": (body.get("status") or {}).get("phase")}
    return out


class KindRecorder:
    """LIST+WATCH one kind in one namespace, appending every version to ``versions``."""

    def __init__(self, kube: Kube, kind: str, namespace: str, t0: float) -> None:
        self.kind = kind
        self.path = PATHS[kind].format(ns=namespace)
        self.kube = kube
        self.api = api_client(kube.kubeconfig, kube.user_agent + "-watch", pool=2)
        self.t0 = t0
        self.versions: list[Version] = []
        self.gaps: list[Gap] = []
        self.reconnects = 0
        self.known: dict[str, int] = {}  # name -> resourceVersion
        self.rv = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"record {kind}", daemon=True)

    def start(self) -> None:
        self._relist(initial=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WATCH_SECONDS + 10)

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _add(self, event: str, body: Body, rv: int | None = None) -> None:
        md = body.get("metadata") or {}
        version = rv if rv is not None else int(md.get("resourceVersion") or 0)
        self.versions.append(
            Version(self.kind, event, version, _slim(self.kind, body), self._now())
        )
        name = str(md.get("name", ""))
        if event == DELETED:
            self.known.pop(name, None)
        else:
            self.known[name] = version

    def _relist(self, *, initial: bool = False) -> None:
        while True:
            try:
                data = self.kube.request("GET", self.path, timeout=30)
                break
            except Exception:
                if self._stop.is_set():
                    return
                time.sleep(0.3)
        list_rv = int((data.get("metadata") or {}).get("resourceVersion") or 0)
        items = {str(i["metadata"]["name"]): i for i in data.get("items") or []}
        if not initial:
            self.gaps.append(Gap(self.kind, int(self.rv or 0), list_rv, self._now()))
        for name in [n for n in self.known if n not in items]:
            gone = {"metadata": {"name": name, "resourceVersion": str(list_rv)}}
            self._add(DELETED, gone, list_rv)
        for name, item in items.items():
            if self.known.get(name) != int(item["metadata"]["resourceVersion"]):
                self._add("ADDED" if name not in self.known else "MODIFIED", item)
        self.rv = str(list_rv)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for event in self._watch():
                    if self._stop.is_set():
                        return
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "BOOKMARK":
                        self.rv = str(obj["metadata"]["resourceVersion"])
                    elif kind == "ERROR":
                        if obj.get("code") == 410:
                            self._relist()
                        else:
                            time.sleep(0.3)
                        break
                    else:
                        self._add(str(kind), obj)
                        self.rv = str(obj["metadata"]["resourceVersion"])
            except KubeError as exc:
                if exc.status == 410:
                    self._relist()
                else:
                    time.sleep(0.3)
            except Exception:
                time.sleep(0.3)
            self.reconnects += 1

    def _watch(self) -> Iterator[Body]:
        return iter_watch(
            self.api,
            self.path,
            self.rv,
            timeout_seconds=WATCH_SECONDS,
            request_timeout=(3, WATCH_SECONDS + 10),
        )


class Recorder:
    """Every kind the invariants need, recorded from before the first change of a run."""

    def __init__(
        self, kube: Kube, namespace: str, t0: float, *, also: tuple[str, ...] = ()
    ) -> None:
        """Record ``namespace`` and the namespaces ``also`` (their object names are unique
        across them: the churn's agent names, and holds living in ``namespace`` only)."""
        self.kinds = [
            KindRecorder(kube, kind, ns, t0) for ns in (namespace, *also) for kind in PATHS
        ]

    def start(self) -> None:
        for k in self.kinds:
            k.start()

    def stop(self) -> None:
        for k in self.kinds:
            k._stop.set()
        for k in self.kinds:
            k.stop()

    @property
    def versions(self) -> list[Version]:
        return [v for k in self.kinds for v in k.versions]

    @property
    def gaps(self) -> list[Gap]:
        return [g for k in self.kinds for g in k.gaps]

    def dump(self, path: Path) -> None:
        with path.open("w") as out:
            for v in sorted(self.versions, key=lambda v: v.rv):
                record: dict[str, Any] = {
                    "rv": v.rv,
                    "kind": v.kind,
                    "event": v.event,
                    "t": round(v.received, 3),
                    "body": v.body,
                }
                out.write(json.dumps(record, sort_keys=True) + "\n")
