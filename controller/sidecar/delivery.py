"""The sidecar's loop: the document brought in, the acknowledgement carried out.

* **Delivery**: it watches its ConfigMap through the API (``fieldSelector=metadata.name=``) and
  writes each new document to the file the runtime reads, replaced whole
  (:func:`bindery_session.files.write_atomically`), so a reader sees the old document or the new
  one. At start it copies the mounted ConfigMap (the seed), so a session is never worse off than
  with the kubelet's projection alone.
* **Acknowledgement**: the runtime writes what it did with a document to the acknowledgement
  file (:class:`bindery_session.wire.AckRecord`, written by :func:`bindery_session.acknowledge`
  or ``bindery ack``); the sidecar records it on the Lease with the pod's uid
  (:class:`controller.domain.acknowledgement.Acknowledgement`). A runtime that never
  acknowledges still gets ``delivered`` once the file is in place. Once the runtime has
  acknowledged anything in this pod, the Lease says so (``acknowledges``), and the controller
  waits for ``applied`` from then on.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog
from bindery_session.files import write_atomically
from bindery_session.wire import (
    APPLIED,
    BINDINGS_FILE,
    REFUSED,
    STARTED,
    AckRecord,
    digest,
    now_rfc3339,
)

from controller.domain.acknowledgement import Acknowledgement
from controller.sidecar.apiserver import ApiRequestError, InCluster

log = structlog.get_logger("bindery.sidecar")


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
        identity = digest(text)
        with self._lock:
            if self._record.get("delivered") == identity and self.out.exists():
                return
        write_atomically(self.out, raw)
        log.info("delivered bindings", digest=identity)
        with self._lock:
            self._record["delivered"] = identity
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
            record = AckRecord.read(self.ack_file.read_bytes())
        except OSError:
            return
        if record is None:
            return
        state, acked = record.state, record.digest
        with self._lock:
            if state == STARTED and self._record.get("acknowledges") != "true":
                pass
            elif state == APPLIED and self._record.get("applied") != acked:
                self._record["applied"] = acked
                self._record["refused"] = ""
                self._record["refusal"] = ""
            elif state == REFUSED and self._record.get("refused") != acked:
                self._record["refused"] = acked
                self._record["refusal"] = (record.message or "refused")[:1024]
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
        annotations = Acknowledgement(
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
