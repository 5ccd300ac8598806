"""The API seam (controller/k8s/api.py) against a real HTTP server on loopback: what it sends
(verbs, paths, queries, headers, the bearer token as the client configuration refreshes it) and
how it reads the answers (JSON, Status errors, no answer at all). The dependency-floors test runs
these with the lowest declared ``kubernetes`` and ``aiohttp``."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp import web
from kubernetes import client

from controller.k8s import api
from controller.k8s.api import MERGE_PATCH, USER_AGENT, ApiError, KubeApi
from harness.fakes import StandIn, serving


async def echo(_: web.Request) -> web.Response:
    """200 with a body and a list, each carrying managedFields (the seam drops them)."""
    return web.json_response(
        {
            "metadata": {"name": "x", "resourceVersion": "7", "managedFields": [{"manager": "m"}]},
            "items": [{"metadata": {"name": "i", "managedFields": [{"manager": "m"}]}}],
        }
    )


@pytest.fixture
async def server() -> AsyncIterator[StandIn]:
    async with serving(echo) as stand_in:
        yield stand_in


def kube(
    url: str,
    token: str = "t0ken",  # noqa: S107
    clock: Callable[[], float] | None = None,
) -> tuple[KubeApi, client.Configuration]:
    cfg = client.Configuration()
    cfg.host = url
    cfg.api_key = {"authorization": f"Bearer {token}"}
    seam = KubeApi(client.ApiClient(cfg), connections=2, clock=clock or time.monotonic)
    return seam, cfg


async def test_a_list_sends_its_query_and_reads_json_without_managed_fields(
    server: StandIn,
) -> None:
    k, _ = kube(server.url)
    try:
        data = await k.request(
            "GET",
            api.AGENTS.path("team a"),
            query=[("limit", "500"), ("labelSelector", "app.kubernetes.io/managed-by=bindery")],
            accept=api.META_LIST,
        )
    finally:
        await k.close()
    seen = server.seen[0]
    assert seen.method == "GET"
    assert seen.path == "/apis/bindery.dev/v1alpha1/namespaces/team%20a/agentspecs"
    assert seen.query == [
        ("limit", "500"),
        ("labelSelector", "app.kubernetes.io/managed-by=bindery"),
    ]
    assert seen.headers["accept"] == api.META_LIST
    assert seen.headers["authorization"] == "Bearer t0ken"
    assert seen.headers["user-agent"] == USER_AGENT
    assert "content-type" not in seen.headers
    assert data["metadata"] == {"name": "x", "resourceVersion": "7"}
    assert data["items"] == [{"metadata": {"name": "i"}}]


async def test_a_write_names_its_field_manager_and_content_type(server: StandIn) -> None:
    k, _ = kube(server.url)
    try:
        await k.merge_patch(api.CONFIG_MAPS, "team", "a-bindings", {"data": {"k": "v"}})
        await k.delete(api.LEASES, "team", "hold", uid="u1", resource_version="5")
    finally:
        await k.close()
    patch, delete = server.seen
    assert (patch.method, patch.path) == ("PATCH", "/api/v1/namespaces/team/configmaps/a-bindings")
    assert patch.query == [("fieldManager", "bindery")]
    assert patch.headers["content-type"] == MERGE_PATCH
    assert patch.body == {"data": {"k": "v"}}
    assert delete.method == "DELETE"
    assert delete.query == []
    assert delete.body["preconditions"] == {"uid": "u1", "resourceVersion": "5"}


def rotating(cfg: client.Configuration, *tokens: str) -> list[str]:
    """Make ``cfg`` rotate its token to each of ``tokens`` in turn, as in-cluster configuration
    does; the returned list records the tokens handed out."""
    queue, handed = list(tokens), []

    def refresh(conf: client.Configuration) -> None:
        handed.append(queue.pop(0))
        conf.api_key = {"authorization": f"Bearer {handed[-1]}"}

    cfg.refresh_api_key_hook = refresh  # type: ignore[assignment]
    return handed


async def test_the_token_is_read_from_the_configuration_again_once_it_may_have_rotated(
    server: StandIn,
) -> None:
    clock = [100.0]
    k, cfg = kube(server.url, token="first", clock=lambda: clock[0])
    try:
        await k.request("GET", "/version")
        handed = rotating(cfg, "second", "third")
        clock[0] += api.AUTH_TTL / 2
        await k.request("GET", "/version")  # reused: the refresh hook is not asked
        clock[0] += api.AUTH_TTL
        await k.request("GET", "/version")
        await k.request("GET", "/version")
    finally:
        await k.close()
    assert handed == ["second"]
    assert [s.headers["authorization"] for s in server.seen] == [
        "Bearer first",
        "Bearer first",
        "Bearer second",
        "Bearer second",
    ]


async def test_a_status_answer_becomes_an_api_error_that_names_the_reason(server: StandIn) -> None:
    status = {"kind": "Status", "reason": "NotFound", "message": 'agentspecs "a" not found'}
    server.answers = [(404, json.dumps(status).encode()), (500, b"<html>proxy error</html>")]
    k, _ = kube(server.url)
    try:
        assert await k.get(api.AGENTS, "team", "a") is None
        with pytest.raises(ApiError) as raised:
            await k.request("GET", "/version")
    finally:
        await k.close()
    assert raised.value.status == 500
    assert "proxy error" in raised.value.message
    assert not raised.value.unreachable


async def test_no_answer_at_all_is_unreachable() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    k, _ = kube(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ApiError) as raised:
            await k.request("GET", "/version")
    finally:
        await k.close()
    assert raised.value.unreachable
    assert "no answer from the API server" in str(raised.value)


async def test_a_status_s_causes_reach_the_api_error(server: StandIn) -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "c" is forbidden: unable to create new content in namespace team '
        "because it is being terminated",
        "reason": "Forbidden",
        "details": {
            "name": "c",
            "kind": "configmaps",
            "causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}],
        },
        "code": 403,
    }
    server.answers = [(403, json.dumps(status).encode())]
    k, _ = kube(server.url)
    try:
        with pytest.raises(ApiError) as raised:
            await k.create(api.CONFIG_MAPS, {"metadata": {"name": "c", "namespace": "team"}})
    finally:
        await k.close()
    assert (raised.value.status, raised.value.reason) == (403, "Forbidden")
    assert raised.value.causes == ("NamespaceTerminating",)
    assert raised.value.namespace_terminating


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # the last of a repeated key, as json.loads
        "123456789012345678901234567890",
        "-9223372036854775809",
        "[1e2, 1.0, 0.1, -0, 1E400, 2.5e-308]",
        '"\\u00e9\\n\\t\\"\\\\ \\ud83d\\ude00 é"',
        '{"a": {"b": [true, false, null, {}, []]}}',
        '"\\ud800"',  # a lone surrogate: pydantic-core refuses it, the standard library not
    ],
)
def test_decoded_json_equals_the_standard_librarys(text: str) -> None:
    expected = json.loads(text)
    for raw in (text, text.encode()):
        decoded = api.decode_json(raw)
        assert decoded == expected
        assert json.dumps(decoded) == json.dumps(expected)  # the same types, all the way down


def test_json_neither_parser_reads_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Expecting"):
        api.decode_json(b'{"a":')
