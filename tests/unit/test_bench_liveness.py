"""bench's liveness prober against a real local HTTP server: answers counted, refusals before
the endpoint is served ignored, late answers counted as the kubelet would."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from typing import Any

import pytest

from bench.e2e_procs import LivenessProber
from harness.system import free_port


class _Health(http.server.BaseHTTPRequestHandler):
    delay = 0.0

    def do_GET(self) -> None:
        time.sleep(type(self).delay)
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(BrokenPipeError):  # the prober gave up on a late answer
            self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def port() -> int:
    return free_port()


def _serve(port: int) -> http.server.ThreadingHTTPServer:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_refusals_before_the_endpoint_is_served_are_not_failures(port: int) -> None:
    _Health.delay = 0.0
    prober = LivenessProber(f"http://127.0.0.1:{port}/healthz", period=0.1, timeout=0.5).start()
    time.sleep(0.4)  # nothing listens yet
    server = _serve(port)
    try:
        time.sleep(0.6)
        figures = prober.stop()
    finally:
        server.shutdown()
    assert figures["failures"] == 0, prober.failures
    assert int(figures["answers"] or 0) >= 1
    assert figures["first_answer_s"] is not None
    assert figures["first_answer_s"] >= 0.3


def test_late_answers_are_failures(port: int) -> None:
    _Health.delay = 0.0
    server = _serve(port)
    prober = LivenessProber(f"http://127.0.0.1:{port}/healthz", period=0.1, timeout=0.3).start()
    try:
        time.sleep(0.5)
        _Health.delay = 0.6  # the event loop "blocked" past the probe's timeout
        time.sleep(1.2)
        figures = prober.stop()
    finally:
        _Health.delay = 0.0
        server.shutdown()
    assert int(figures["answers"] or 0) >= 1
    assert int(figures["failures"] or 0) >= 1
    assert all("timed out" in f for f in prober.failures), prober.failures


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http:// URL"):
        LivenessProber("file:///etc/passwd")
