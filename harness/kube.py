"""Small synchronous Kubernetes helpers for the harness's users (bench, chaos).

Everything goes through ``kubernetes.client.ApiClient`` with plain JSON bodies (no generated
models), under a user agent of its own, so the API server's audit log tells the benchmark's
requests from the controller's and the baseline's.

* :class:`Kube`: JSON requests, bulk creation from a thread pool.
* :class:`Watch`: a LIST+WATCH mirror of one collection in a thread, with :class:`Tracker` s
  that record when (by the monotonic clock of this process, at the receipt of the watch event)
  a set of objects first satisfied a predicate.
* :func:`audit_writes`: the writes in the API server's audit log after a byte offset.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

Body = dict[str, Any]
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


class KubeError(RuntimeError):
    def __init__(self, status: int, method: str, path: str, text: str) -> None:
        self.status = status
        super().__init__(f"{method} {path}: HTTP {status}: {text[:300]}")


def api_client(kubeconfig: str | Path, user_agent: str, pool: int = 32) -> client.ApiClient:
    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig), client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    api = client.ApiClient(cfg)
    api.user_agent = user_agent
    return api


class Kube:
    """JSON requests against the API server through the Kubernetes client's transport."""

    def __init__(self, kubeconfig: str | Path, user_agent: str = "bindery-bench/1") -> None:
        self.kubeconfig = str(kubeconfig)
        self.user_agent = user_agent
        self.client = api_client(kubeconfig, user_agent)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        timeout: float = 60,
    ) -> Body:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        ser = self.client.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self.client.call_api(*ser, _request_timeout=(5, timeout))
        raw = resp.read()  # type: ignore[no-untyped-call]
        if not 200 <= resp.status < 300:
            raise KubeError(resp.status, method, path, raw.decode(errors="replace"))
        return json.loads(raw) if raw else {}

    def get(self, path: str) -> Body | None:
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list_all(self, path: str, label_selector: str = "") -> list[Body]:
        items: list[Body] = []
        token = ""
        while True:
            query = [("limit", "1000")]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            data = self.request("GET", path, query=query)
            items += data.get("items") or []
            token = (data.get("metadata") or {}).get("continue", "")
            if not token:
                return items

    def create(self, path: str, body: Body) -> Body:
        return self.request("POST", path, body)

    def create_many(
        self, path_of: Callable[[Body], str], bodies: Iterable[Body], threads: int = 12
    ) -> int:
        """Create every body (HTTP 409 counts as done); returns how many were sent."""

        def one(body: Body) -> None:
            for attempt in range(5):
                try:
                    self.create(path_of(body), body)
                except KubeError as exc:
                    if exc.status == 409:
                        return
                    if (exc.status < 500 and exc.status != 429) or attempt == 4:
                        raise
                else:
                    return
                time.sleep(0.2 * (attempt + 1))

        items = list(bodies)
        with ThreadPoolExecutor(threads) as pool:
            for _ in pool.map(one, items):
                pass
        return len(items)

    def json_patch(self, path: str, ops: list[Body]) -> Body:
        return self.request("PATCH", path, ops, content_type=JSON_PATCH)

    def merge_patch(self, path: str, patch: Body) -> Body:
        return self.request("PATCH", path, patch, content_type=MERGE_PATCH)

    def delete(self, path: str) -> None:
        with contextlib.suppress(KubeError):
            self.request("DELETE", path)

    def close(self) -> None:
        self.client.close()  # type: ignore[no-untyped-call]


# ------------------------------------------------------------------------------------ watches


def iter_watch(
    api: client.ApiClient,
    path: str,
    resource_version: str,
    label_selector: str = "",
    *,
    timeout_seconds: int = 600,
    request_timeout: tuple[float, float] = (5, 700),
) -> Iterator[Body]:
    """Raw watch events (decoded JSON lines) of ``path`` from ``resource_version``; the server
    ends the watch after ``timeout_seconds``, the client gives up after ``request_timeout``
    (connect, read)."""
    query = [
        ("watch", "1"),
        ("resourceVersion", resource_version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(timeout_seconds)),
    ]
    if label_selector:
        query.append(("labelSelector", label_selector))
    ser = api.param_serialize(
        "GET",
        path,
        query_params=query,
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(*ser, _request_timeout=request_timeout)
    raw = resp.response
    try:
        if resp.status != 200:
            raise KubeError(resp.status, "WATCH", path, raw.read().decode(errors="replace"))
        buf = b""
        for chunk in raw.stream(65536, decode_content=True):
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
    finally:
        raw.release_conn()


class Tracker:
    """Which of the watched objects satisfy ``pred``, and when ``need`` of them first did.

    ``names``: only these objects count (None: all). ``done_at``: the receipt time of the event
    that made the count reach ``need`` (monotonic clock of this process).
    """

    def __init__(
        self, pred: Callable[[Body], bool], need: int, names: Iterable[str] | None = None
    ) -> None:
        self.pred = pred
        self.need = need
        self.names = set(names) if names is not None else None
        self.satisfied: set[str] = set()
        self.done_at: float | None = None
        self.last_change: float | None = None
        self.event = threading.Event()

    def update(self, name: str, body: Body | None, at: float) -> None:
        if self.names is not None and name not in self.names:
            return
        ok = body is not None and self.pred(body)
        if ok and name not in self.satisfied:
            self.satisfied.add(name)
            self.last_change = at
        elif not ok and name in self.satisfied:
            self.satisfied.discard(name)
            self.last_change = at
        if self.done_at is None and len(self.satisfied) >= self.need:
            self.done_at = at
            self.event.set()

    def wait(self, timeout: float) -> float:
        if not self.event.wait(timeout):
            raise TimeoutError(
                f"only {len(self.satisfied)}/{self.need} objects reached the state in {timeout} s"
            )
        assert self.done_at is not None
        return self.done_at


class Watch:
    """A mirror of one collection (namespaced path), kept current by a watch in a thread."""

    def __init__(self, kube: Kube, path: str, label_selector: str = "") -> None:
        self.path = path
        self.label_selector = label_selector
        self.api = api_client(kube.kubeconfig, kube.user_agent + "-watch", pool=2)
        self.lister = kube
        self.objects: dict[str, Body] = {}
        self.lock = threading.Lock()
        self.trackers: list[Tracker] = []
        self.events = 0
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"watch {path}", daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        if not self._synced.wait(120):
            raise TimeoutError(f"could not list {self.path}")
        return self

    def stop(self) -> None:
        self._stop.set()
        self.api.close()  # type: ignore[no-untyped-call]

    def _list(self) -> str:
        items: list[Body] = []
        token, rv = "", ""
        while True:
            query = [("limit", "2000")]
            if self.label_selector:
                query.append(("labelSelector", self.label_selector))
            if token:
                query.append(("continue", token))
            data = self.lister.request("GET", self.path, query=query)
            items += data.get("items") or []
            md = data.get("metadata") or {}
            rv = rv or md.get("resourceVersion", "")
            token = md.get("continue", "")
            if not token:
                break
        now = time.monotonic()
        with self.lock:
            self.objects = {i["metadata"]["name"]: i for i in items}
            for tracker in self.trackers:
                for name, body in self.objects.items():
                    tracker.update(name, body, now)
        return rv

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    rv = self._list()
                    self._synced.set()
                for ev in iter_watch(self.api, self.path, rv, self.label_selector):
                    now = time.monotonic()
                    kind, obj = ev.get("type"), ev.get("object") or {}
                    if kind == "ERROR":
                        rv = ""  # 410 Gone: list again
                        break
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if kind == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    with self.lock:
                        self.events += 1
                        if kind == "DELETED":
                            self.objects.pop(name, None)
                            body = None
                        else:
                            self.objects[name] = obj
                            body = obj
                        for tracker in self.trackers:
                            tracker.update(name, body, now)
                    if self._stop.is_set():
                        return
            except Exception:  # a dropped stream: resume from the last resourceVersion
                if self._stop.is_set():
                    return
                time.sleep(0.2)

    def track(
        self, pred: Callable[[Body], bool], need: int, names: Iterable[str] | None = None
    ) -> Tracker:
        tracker = Tracker(pred, need, names)
        now = time.monotonic()
        with self.lock:
            for name, body in self.objects.items():
                tracker.update(name, body, now)
            self.trackers.append(tracker)
        return tracker

    def untrack(self, tracker: Tracker) -> None:
        with self.lock, contextlib.suppress(ValueError):
            self.trackers.remove(tracker)

    def get(self, name: str) -> Body | None:
        with self.lock:
            return self.objects.get(name)

    def __len__(self) -> int:
        with self.lock:
            return len(self.objects)


# ------------------------------------------------------------------------------------ audit log


@dataclass(frozen=True)
class Write:
    user_agent: str
    verb: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    at: float
    """stageTimestamp as seconds since the epoch."""


def _epoch(stamp: str) -> float:
    # "2026-01-01T12:00:00.123456Z"
    base, _, frac = stamp.rstrip("Z").partition(".")
    seconds = time.mktime(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) - time.timezone
    return seconds + (float(f"0.{frac}") if frac else 0.0)


def audit_mark(audit_log: str | Path) -> int:
    return Path(audit_log).stat().st_size


def audit_writes(audit_log: str | Path, since: int = 0, until: int | None = None) -> list[Write]:
    """Completed writes (any response code) logged between two byte offsets of the audit log."""
    out = []
    with open(audit_log, "rb") as log:
        log.seek(since)
        data = log.read(None if until is None else max(0, until - since))
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue  # a line cut at the offset
        if entry.get("stage") != "ResponseComplete":
            continue
        ref = entry.get("objectRef") or {}
        out.append(
            Write(
                user_agent=str(entry.get("userAgent", "")),
                verb=entry.get("verb", ""),
                resource=ref.get("resource", ""),
                subresource=ref.get("subresource", ""),
                namespace=ref.get("namespace", ""),
                name=ref.get("name", ""),
                code=int((entry.get("responseStatus") or {}).get("code", 0)),
                at=_epoch(entry.get("stageTimestamp") or entry.get("requestReceivedTimestamp")),
            )
        )
    return out


def by_agent(writes: Iterable[Write], prefix: str) -> list[Write]:
    return [w for w in writes if w.user_agent.startswith(prefix)]


def summarize(writes: Iterable[Write]) -> dict[str, int]:
    """``resource[/sub] verb`` -> count."""
    counts = Counter(
        f"{w.resource}{'/' + w.subresource if w.subresource else ''} {w.verb}" for w in writes
    )
    return dict(sorted(counts.items()))
