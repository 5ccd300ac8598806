"""Serving the adapter over Streamable HTTP on the pod's loopback.

One endpoint (``/mcp``) serves both protocol generations: the SDK answers a handshake-era client
(``initialize``, then a session with ``Mcp-Session-Id`` and its standalone GET stream) and a
2026-07-28 client (``server/discover``, then ``subscriptions/listen`` streams) alike. Sessions
are stateful, so that the GET stream exists, and never expire for idleness (a runtime may sit
for hours between two tool calls and still be told of a change). The SDK's DNS-rebinding
protection is on: a request whose ``Host`` or ``Origin`` is not a loopback name is refused
(421 and 403).
"""

from __future__ import annotations

import asyncio
import contextlib

import structlog
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from controller.mcp.adapter import BindingsAdapter

log = structlog.get_logger("bindery.mcp")

PATH = "/mcp"


def security() -> TransportSecuritySettings:
    """Host and Origin checks: loopback names only (any port: the check is of the name)."""
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def app(adapter: BindingsAdapter, host: str) -> Starlette:
    return adapter.server.streamable_http_app(
        streamable_http_path=PATH,
        host=host,
        stateless_http=False,
        session_idle_timeout=None,
        transport_security=security(),
    )


def url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{PATH}"


async def serve(adapter: BindingsAdapter, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; the document is watched meanwhile."""
    config = uvicorn.Config(
        app(adapter, host),
        host=host,
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    adapter.load()
    watching = asyncio.create_task(adapter.watch(), name="bindery-mcp-watch")
    log.info(
        "serving bindings over MCP",
        url=url(host, port),
        bindings=str(adapter.bindings_file),
        digest=adapter.snapshot.digest if adapter.snapshot else "",
        resolve=adapter.resolver is not None,
    )
    try:
        await server.serve()  # until SIGTERM or SIGINT (uvicorn's handlers)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
