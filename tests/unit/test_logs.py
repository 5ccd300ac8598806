"""The controller's log lines: one JSON shape for its own records and kopf's."""

from __future__ import annotations

import io
import json
import logging

import aiohttp
import pytest
import structlog
from aiohttp import web

from controller.runtime import logs

URL = "GET https://127.0.0.1:6443/apis/bindery.dev/v1alpha1/agentspecs?watch=true"


@pytest.fixture
def lines():  # type: ignore[no-untyped-def]
    """What the controller writes, read back as JSON lines."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    logs.configure("INFO", json=True)
    out = io.StringIO()
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(out)

    def read() -> list[dict[str, object]]:
        return [json.loads(line) for line in out.getvalue().splitlines() if line]

    yield read
    root.handlers[:], level = saved
    root.setLevel(level)


def test_kopf_retries_that_recover_are_warnings(lines) -> None:  # type: ignore[no-untyped-def]
    kopf_api = logging.getLogger(logs.KOPF_API_LOGGER)
    kopf_api.error(f"Request attempt 1/5 failed; will retry: {URL} -> ClientConnectorError()")
    kopf_api.error(f"Request attempt 2/5 failed; TCP closed; will re-authenticate: {URL}")
    kopf_api.error(f"Request attempt 5/5 failed; escalating: {URL} -> ClientConnectorError()")
    got = [(line["level"], str(line["event"]).split(";")[1].strip()) for line in lines()]
    assert got == [
        ("warning", "will retry: " + URL + " -> ClientConnectorError()"),
        ("warning", "TCP closed"),
        ("error", "escalating: " + URL + " -> ClientConnectorError()"),
    ]


def test_a_retried_watch_is_a_warning(lines) -> None:  # type: ignore[no-untyped-def]
    """kopf's watch streams log their request retries to their own logger: a watch that meets
    "storage is (re)initializing" (429) just after its CRD is installed recovers by itself."""
    watching = logging.getLogger("kopf._cogs.clients.watching")
    watching.error(
        f"Request attempt #1/5 failed; will retry: {URL} -> "
        "APITooManyRequestsError('storage is (re)initializing')"
    )
    watching.error(f"Request attempt #5/5 failed; escalating: {URL} -> ClientConnectorError()")
    assert [line["level"] for line in lines()] == ["warning", "error"]


def test_configuring_twice_adds_the_filter_once(lines) -> None:  # type: ignore[no-untyped-def]
    logs.configure("INFO", json=True)
    for name in logs.KOPF_CLIENT_LOGGERS:
        client = logging.getLogger(name)
        assert sum(isinstance(f, logs.RetriesAreWarnings) for f in client.filters) == 1


def test_other_errors_stay_errors(lines) -> None:  # type: ignore[no-untyped-def]
    logging.getLogger("kopf.objects").error("Handler 'observe-agentspecs' failed; will retry")
    logging.getLogger("bindery.test").error("the pass failed; will retry")
    assert [line["level"] for line in lines()] == ["error", "error"]


async def test_the_liveness_probes_are_not_logged_but_failed_requests_are(lines) -> None:  # type: ignore[no-untyped-def]
    """Served as kopf serves ``--liveness`` (an aiohttp AppRunner with its default access log):
    a probe answered 200 leaves no line, a request the endpoint fails still does."""

    async def healthz(_: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application()
    app.add_routes([web.get("/healthz", healthz)])
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    (port,) = {address[1] for address in runner.addresses}
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/healthz", "/healthz", "/nowhere"):
                async with session.get(f"http://127.0.0.1:{port}{path}") as response:
                    await response.read()
    finally:
        await runner.cleanup()
    access = [line for line in lines() if line.get("logger") == logs.ACCESS_LOGGER]
    assert len(access) == 1, access
    assert '"GET /nowhere HTTP/1.1" 404' in str(access[0]["event"])


def test_a_message_below_the_level_runs_no_processor(lines, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    stamped: list[object] = []
    stamp = structlog.processors.TimeStamper.__call__

    def counting(self, logger, name, event):  # type: ignore[no-untyped-def]
        stamped.append(event["event"])
        return stamp(self, logger, name, event)

    monkeypatch.setattr(structlog.processors.TimeStamper, "__call__", counting)
    log = structlog.get_logger("bindery.test")
    log.debug("below the level", n=1)
    log.info("at the level", n=2)
    assert stamped == ["at the level"]  # the debug message stopped at the level check
    assert [(line["event"], line["level"]) for line in lines()] == [("at the level", "info")]


def test_debug_messages_show_at_the_debug_level() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logs.configure("DEBUG", json=True)
        out = io.StringIO()
        (handler,) = root.handlers
        assert isinstance(handler, logging.StreamHandler)
        handler.setStream(out)
        structlog.get_logger("bindery.test").debug("reconciled", outcome="unchanged")
        (line,) = [json.loads(text) for text in out.getvalue().splitlines()]
        assert (line["event"], line["level"], line["outcome"]) == (
            "reconciled",
            "debug",
            "unchanged",
        )
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
