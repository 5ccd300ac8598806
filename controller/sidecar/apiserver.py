"""The API server as a session pod sees it: HTTPS with the pod's own rotating token, through
``http.client`` (the sidecar makes a handful of requests; no client library is needed)."""

from __future__ import annotations

import http.client
import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.domain.errors import ApiServerError


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
