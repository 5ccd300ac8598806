"""The delivery sidecar: brings each new bindings document into the session within a second,
and carries the session's acknowledgement back to the controller.

It runs beside the agent's runtime in the session pod (``bindery deliver``, a native sidecar of
the project's image) with the only API credentials in the pod: a pod-bound token allowed to
read one ConfigMap (``<agent>-bindings``) and to write one Lease (``bindery-ack-<agent>``).

* **Delivery**: it watches its ConfigMap through the API (``fieldSelector=metadata.name=``) and
  writes each new document to the file the runtime reads, by temp file and rename, so a reader
  sees the old document or the new one, whole. At start it copies the mounted ConfigMap (the
  seed), so a session is never worse off than with the kubelet's projection alone.
* **Acknowledgement**: the runtime writes what it did with a document (its digest, ``Applied``
  or ``Refused`` with a reason) to the acknowledgement file (:func:`controller.session.acknowledge`,
  ``bindery ack``); the sidecar records it on the Lease with the pod's uid. A runtime that never
  acknowledges still gets ``delivered`` once the file is in place. Once the runtime has
  acknowledged anything in this pod, the Lease says so (``acknowledges``), and the controller
  waits for ``applied`` from then on.

Only the standard library: the sidecar runs in every session pod, so it stays small.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

from controller.domain import acknowledgement as ack
from controller.domain.delivery import BINDINGS_FILE
from controller.domain.errors import ApiServerError

log = structlog.get_logger("bindery.sidecar")


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` by a temp file and a rename in the same directory."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


class ApiRequestError(ApiServerError):
    """The API server did not answer, or refused a request; the loop retries."""


@dataclass
class InCluster:
    """The API server as the pod sees it, with the pod's own (rotating) token."""

    host: str
    port: int
    token_file: Path
    ca_file: Path
    timeout: float = 10.0

    @classmethod
    def from_environment(cls, token_dir: Path) -> InCluster:
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise SystemExit(
                "bindery deliver: KUBERNETES_SERVICE_HOST is not set: it runs inside a pod"
            )
        return cls(host, int(port), token_dir / "token", token_dir / "ca.crt")

    def connect(self, timeout: float | None = None) -> http.client.HTTPSConnection:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        return http.client.HTTPSConnection(
            self.host, self.port, context=ctx, timeout=timeout or self.timeout
        )

    def headers(self, content_type: str = "") -> dict[str, str]:
        out = {
            "Authorization": f"Bearer {self.token_file.read_text().strip()}",
            "Accept": "application/json",
            "User-Agent": "bindery-deliver",
        }
        if content_type:
            out["Content-Type"] = content_type
        return out

    def request(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        conn = self.connect()
        try:
            payload = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=payload, headers=self.headers(content_type))
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise ApiRequestError(f"{method} {path}: {exc}") from exc
        finally:
            conn.close()
        if resp.status >= 300:
            raise ApiRequestError(f"{method} {path}: HTTP {resp.status}: {data[:300]!r}")
        return json.loads(data) if data else None


@dataclass
class Sidecar:
    """One session pod's delivery and acknowledgement loop."""

    api: InCluster
    namespace: str
    config_map: str
    lease: str
    pod_name: str
    pod_uid: str
    seed: Path
    out: Path
    ack_file: Path
    key: str = BINDINGS_FILE
    settle: float = 2.0
    """Seconds to hold a delivered-only record back while the runtime, known to acknowledge,
    may still apply the document: one Lease write per change instead of two."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _record: dict[str, str] = field(default_factory=dict)
    _written: dict[str, str] = field(default_factory=dict)
    _pending_since: float = 0.0

    # ---------------------------------------------------------------- delivery

    def deliver(self, text: str) -> None:
        """Put a document in place (if it is new) and note it delivered."""
        raw = text.encode("utf-8")
        digest = ack.digest(text)
        with self._lock:
            if self._record.get("delivered") == digest and self.out.exists():
                return
        write_atomically(self.out, raw)
        log.info("delivered bindings", digest=digest)
        with self._lock:
            self._record["delivered"] = digest
            self._record["deliveredAt"] = now_rfc3339()
            self._pending_since = time.monotonic()

    def seed_once(self) -> None:
        try:
            text = self.seed.read_text(encoding="utf-8")
        except OSError as exc:
            log.warning("no seed document yet", path=str(self.seed), error=str(exc))
            return
        self.deliver(text)

    def watch(self, stop: threading.Event) -> None:
        """List, then watch the ConfigMap; deliver every version; reconnect on any failure."""
        base = f"/api/v1/namespaces/{quote(self.namespace)}/configmaps"
        selector = quote(f"metadata.name={self.config_map}")
        while not stop.is_set():
            try:
                listing = self.api.request("GET", f"{base}?fieldSelector={selector}")
                for item in listing.get("items") or []:
                    self._deliver_object(item)
                version = (listing.get("metadata") or {}).get("resourceVersion", "")
                self._stream(
                    f"{base}?fieldSelector={selector}&watch=1&allowWatchBookmarks=true"
                    f"&timeoutSeconds=300&resourceVersion={version}",
                    stop,
                )
            except (ApiRequestError, OSError, http.client.HTTPException, ValueError) as exc:
                log.warning("watching the bindings ConfigMap failed; retrying", error=str(exc))
                stop.wait(1.0)

    def _stream(self, path: str, stop: threading.Event) -> None:
        conn = self.api.connect(timeout=330)
        try:
            conn.request("GET", path, headers=self.api.headers())
            resp = conn.getresponse()
            if resp.status != 200:
                raise ApiRequestError(f"watch: HTTP {resp.status}: {resp.read()[:300]!r}")
            while not stop.is_set():
                line = resp.readline()
                if not line:
                    return
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._deliver_object(event.get("object") or {})
                elif event.get("type") == "ERROR":
                    return  # expired version: list again
        finally:
            conn.close()

    def _deliver_object(self, config_map: dict[str, Any]) -> None:
        text = (config_map.get("data") or {}).get(self.key)
        if isinstance(text, str):
            self.deliver(text)

    # ---------------------------------------------------------------- acknowledgement

    def read_ack(self) -> None:
        """Take in what the runtime wrote to the acknowledgement file, if it is new."""
        try:
            data = json.loads(self.ack_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or not isinstance(data.get("digest"), str):
            return
        state, digest = data.get("state"), data["digest"]
        with self._lock:
            if state == ack.STARTED and self._record.get("acknowledges") != "true":
                pass
            elif state == ack.APPLIED and self._record.get("applied") != digest:
                self._record["applied"] = digest
                self._record["refused"] = ""
                self._record["refusal"] = ""
            elif state == ack.REFUSED and self._record.get("refused") != digest:
                self._record["refused"] = digest
                self._record["refusal"] = str(data.get("message") or "refused")[:1024]
            else:
                return
            self._record["acknowledgedAt"] = now_rfc3339()
            self._record["acknowledges"] = "true"

    def publish(self) -> bool:
        """Write the record to the Lease if it changed; whether a write was made."""
        with self._lock:
            record = dict(self._record)
            settling = (
                record.get("acknowledges") == "true"
                and record.get("delivered") not in (record.get("applied"), record.get("refused"))
                and time.monotonic() - self._pending_since < self.settle
            )
        if record == self._written or settling:
            return False
        annotations = ack.Acknowledgement(
            pod_uid=self.pod_uid,
            pod_name=self.pod_name,
            delivered_digest=record.get("delivered", ""),
            delivered_at=record.get("deliveredAt", ""),
            applied_digest=record.get("applied", ""),
            refused_digest=record.get("refused", ""),
            refusal=record.get("refusal", ""),
            acknowledged_at=record.get("acknowledgedAt", ""),
            acknowledges=record.get("acknowledges") == "true",
        ).annotations()
        patch = {
            "metadata": {"annotations": annotations},
            "spec": {"holderIdentity": self.pod_name, "renewTime": now_rfc3339()},
        }
        path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{quote(self.namespace)}"
            f"/leases/{quote(self.lease)}"
        )
        self.api.request("PATCH", path, patch, "application/merge-patch+json")
        self._written = record
        log.info("acknowledged", **{k: v for k, v in record.items() if v})
        return True

    def run(self, stop: threading.Event, interval: float = 0.1) -> None:
        self.seed_once()
        watcher = threading.Thread(target=self.watch, args=(stop,), daemon=True)
        watcher.start()
        while not stop.is_set():
            self.read_ack()
            try:
                self.publish()
            except ApiRequestError as exc:
                log.warning("recording the acknowledgement failed; retrying", error=str(exc))
                stop.wait(1.0)
            stop.wait(interval)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``bindery deliver``'s arguments (the session builder passes them all)."""
    parser.add_argument("--config-map", required=True, help="the agent's bindings ConfigMap")
    parser.add_argument("--lease", required=True, help="the agent's acknowledgement Lease")
    parser.add_argument("--seed", required=True, type=Path, help="the mounted ConfigMap's file")
    parser.add_argument("--out", required=True, type=Path, help="the file the runtime reads")
    parser.add_argument("--ack-file", required=True, type=Path, help="what the runtime writes")
    parser.add_argument("--token-dir", required=True, type=Path, help="token and ca.crt")


def run_from_args(args: argparse.Namespace) -> int:
    """Run the sidecar until SIGTERM (its pod's own identity comes from the downward API)."""
    env = {k: os.environ.get(k, "") for k in ("POD_NAME", "POD_UID", "POD_NAMESPACE")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        print(
            f"bindery deliver: {', '.join(missing)} not set; the session pod sets them from "
            "the downward API (it runs inside a Bindery session pod)",
            file=sys.stderr,
        )
        return 2
    sidecar = Sidecar(
        api=InCluster.from_environment(args.token_dir),
        namespace=env["POD_NAMESPACE"],
        config_map=args.config_map,
        lease=args.lease,
        pod_name=env["POD_NAME"],
        pod_uid=env["POD_UID"],
        seed=args.seed,
        out=args.out,
        ack_file=args.ack_file,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("delivering", config_map=args.config_map, lease=args.lease, pod=env["POD_NAME"])
    sidecar.run(stop)
    return 0
