"""The start-up check against an API server that has only just started.

A small HTTP server (:class:`harness.fakes.StandIn`) stands in for kube-apiserver's discovery and
``/readyz`` (what the check reads); the real server's exit codes are proven in
tests/integration/test_run_errors.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import structlog
import structlog.testing
from aiohttp import web
from kubernetes import client

from controller.domain.models import GROUP, VERSION
from controller.runtime.exits import Exit
from controller.runtime.preflight import (
    PLURALS,
    PreflightError,
    check_cluster,
)
from harness.fakes import Handler, serving_in_thread


@dataclass
class Plane:
    """What the stand-in answers: whether ``/readyz`` passes and whether the CRDs are served."""

    url: str = ""
    ready: list[bool] = field(default_factory=lambda: [False])
    """One answer per /readyz request (the last one repeats)."""
    crds_after: int = 1_000_000
    """Discovery serves Bindery's kinds from this /apis request on (0: at once)."""
    apis_asked: int = 0
    minor: str = "36"


def _answers(plane: Plane) -> Handler:
    """kube-apiserver's discovery and ``/readyz``, as ``plane`` says; 404 for anything else."""

    async def version(_: web.Request) -> web.Response:
        return web.json_response(
            {"major": "1", "minor": plane.minor, "gitVersion": f"v1.{plane.minor}.0"}
        )

    async def apis(_: web.Request) -> web.Response:
        plane.apis_asked += 1
        groups = []
        if plane.apis_asked > plane.crds_after:
            groups = [{"name": GROUP, "versions": [{"version": VERSION}]}]
        return web.json_response({"groups": groups})

    async def group(_: web.Request) -> web.Response:
        return web.json_response({"resources": [{"name": p} for p in PLURALS]})

    async def readyz(_: web.Request) -> web.Response:
        ok = plane.ready.pop(0) if len(plane.ready) > 1 else plane.ready[0]
        return web.Response(status=200 if ok else 500, text="ok" if ok else "[-]crd failed")

    routes = {
        "/version": version,
        "/apis": apis,
        f"/apis/{GROUP}/{VERSION}": group,
        "/readyz": readyz,
    }

    async def handle(request: web.Request) -> web.Response:
        route = routes.get(request.path)
        if request.method != "GET" or route is None:
            return web.Response(status=404)
        return await route(request)

    return handle


@pytest.fixture
def plane() -> Iterator[Plane]:
    state = Plane()
    with serving_in_thread(_answers(state)) as stand_in:
        state.url = stand_in.url
        yield state


def _client(url: str) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = url
    return client.ApiClient(cfg)


def test_kinds_missing_while_the_api_server_is_not_ready_is_not_yet_missing_crds(
    plane: Plane,
) -> None:
    with pytest.raises(PreflightError) as caught:
        check_cluster(_client(plane.url))
    assert caught.value.code == Exit.UNREACHABLE
    assert caught.value.transient
    assert "not ready yet" in caught.value.message


def test_kinds_missing_from_a_ready_api_server_are_missing_crds(plane: Plane) -> None:
    plane.ready = [True]
    with pytest.raises(PreflightError) as caught:
        check_cluster(_client(plane.url), wait=5.0, retry=0.05)  # no wait: nothing will change
    assert caught.value.code == Exit.NO_CRDS
    assert not caught.value.transient
    assert plane.apis_asked == 1


def test_an_api_server_that_becomes_ready_within_the_wait_passes(plane: Plane) -> None:
    plane.ready = [False, False, True]
    plane.crds_after = 2  # the third look at discovery finds the CRDs
    check_cluster(_client(plane.url), wait=5.0, retry=0.05)
    assert plane.apis_asked == 3


def test_a_cluster_in_the_tested_range_passes_quietly(plane: Plane) -> None:
    plane.ready, plane.crds_after = [True], 0
    with structlog.testing.capture_logs() as logged:
        server = check_cluster(_client(plane.url))
    assert server.git_version == "v1.36.0"
    assert [e for e in logged if e["log_level"] == "warning"] == []


def test_a_cluster_older_than_the_range_is_named_in_a_warning_and_still_runs(plane: Plane) -> None:
    plane.ready, plane.crds_after, plane.minor = [True], 0, "32"
    with structlog.testing.capture_logs() as logged:
        server = check_cluster(_client(plane.url))
    assert server.minor_pair == (1, 32)
    warnings = [e for e in logged if e["log_level"] == "warning"]
    assert len(warnings) == 1
    assert "v1.32.0 is older than 1.33" in warnings[0]["event"]
    assert warnings[0]["kubernetes"] == "v1.32.0"
