"""The adapter as a process on the loopback (``python -m controller.mcp serve``), spoken to over
Streamable HTTP by the Python SDK's client in both protocol generations and by an independent
client, the TypeScript SDK's: list, read, subscribe or listen, notifications after the document
is replaced (within a second), acknowledge, a stale digest refused, refuse. And where it refuses
to serve: a foreign Host or Origin, an address off the loopback, the node's network."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.subscriptions import ResourceUpdated

from controller.mcp.content import BINDINGS_URI, META
from tests.mcp.serving import REPO, Served, adapter_process, free_port, node_probe
from tests.mcp.support import WORK_URI, deliver, document, read_ack, sha

CHANGES = 10


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    (tmp_path / "bindings").mkdir()
    deliver(tmp_path / "bindings" / "bindings.json", document(0))
    with adapter_process(tmp_path) as served:
        yield served


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def p99(samples: list[float]) -> float:
    return sorted(samples)[min(len(samples) - 1, round(0.99 * (len(samples) - 1)))]


def report(what: str, samples: list[float]) -> None:
    print(
        f"{what}: {len(samples)} changes, p50 {statistics.median(samples) * 1000:.1f} ms, "
        f"p99 {p99(samples) * 1000:.1f} ms"
    )


async def exercise_tools(client: Client, served: Served) -> None:
    """Read, acknowledge a stale digest (refused), acknowledge, refuse: as a model would."""
    listed = await client.list_resources()
    assert [r.uri for r in listed.resources] == [
        BINDINGS_URI,
        "git://acme/app/r0",
        "worktree://acme/app",
        WORK_URI,
    ]
    work = listed.resources[-1]
    assert work.name == "work"
    assert work.meta is not None
    assert work.meta[f"{META}alias"] == "login-bug"
    read = (await client.read_resource(BINDINGS_URI)).contents[0]
    assert isinstance(read, types.TextResourceContents)
    assert read.text == served.bindings.read_text()
    assert not served.ack.exists(), "reading is never acknowledging"

    current = sha(served.bindings.read_text())
    stale = await client.call_tool("bindery_acknowledge", {"digest": sha(document(99))})
    assert stale.is_error
    assert current in text(stale)
    assert not served.ack.exists()
    done = await client.call_tool("bindery_acknowledge", {"digest": current})
    assert not done.is_error, text(done)
    assert (read_ack(served.ack)["digest"], read_ack(served.ack)["state"]) == (current, "Applied")
    refused = await client.call_tool("bindery_refuse", {"digest": current, "reason": "no repo"})
    assert not refused.is_error, text(refused)
    assert (read_ack(served.ack)["state"], read_ack(served.ack)["message"]) == (
        "Refused",
        "no repo",
    )


async def test_a_handshake_era_client(served: Served) -> None:
    arrivals: list[tuple[float, str, str]] = []

    async def handler(message: Any) -> None:
        method = getattr(message, "method", "")
        if method.startswith("notifications/resources"):
            uri = getattr(getattr(message, "params", None), "uri", "")
            arrivals.append((time.monotonic(), method, uri))

    async with Client(served.url, mode="legacy", message_handler=handler) as client:
        assert client.protocol_version == "2025-11-25"
        capabilities = client.server_capabilities.resources
        assert capabilities is not None
        assert (capabilities.subscribe, capabilities.list_changed) == (True, True)
        await exercise_tools(client, served)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe: this generation's own way
            await client.subscribe_resource(BINDINGS_URI)
        latencies = []
        for n in range(1, CHANGES + 1):
            arrivals.clear()
            t0 = time.monotonic()
            deliver(served.bindings, document(n))
            while not any(m.endswith("/updated") for _, m, _ in arrivals):
                assert time.monotonic() - t0 < 5, f"no notification for change {n}: {arrivals}"
                await asyncio.sleep(0.005)
            await asyncio.sleep(0.02)
            assert [(m, u) for _, m, u in arrivals] == [
                ("notifications/resources/list_changed", ""),
                ("notifications/resources/updated", BINDINGS_URI),
            ]
            latencies.append(arrivals[-1][0] - t0)
        final = await client.call_tool("bindery_bindings", {})
    assert isinstance(final.structured_content, dict)
    assert final.structured_content["digest"] == sha(document(CHANGES))
    report("2025-11-25 resources/updated", latencies)
    assert p99(latencies) <= 1.0


async def test_a_2026_client(served: Served) -> None:
    async with Client(served.url, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        await exercise_tools(client, served)
        latencies = []
        async with client.listen(
            resources_list_changed=True, resource_subscriptions=[BINDINGS_URI, WORK_URI]
        ) as subscription:
            events = subscription.__aiter__()
            for n in range(1, CHANGES + 1):
                t0 = time.monotonic()
                deliver(served.bindings, document(n, work=n % 2 == 0))
                seen = set()
                while ResourceUpdated(BINDINGS_URI) not in seen:
                    seen.add(await asyncio.wait_for(events.__anext__(), 5))
                latencies.append(time.monotonic() - t0)
                # The work item comes and goes with every change: its resource is updated too.
                while ResourceUpdated(WORK_URI) not in seen:
                    seen.add(await asyncio.wait_for(events.__anext__(), 5))
        current = await client.call_tool("bindery_bindings", {})
    assert isinstance(current.structured_content, dict)
    assert current.structured_content["digest"] == sha(document(CHANGES, work=True))
    report("2026-07-28 subscriptions/listen", latencies)
    assert p99(latencies) <= 1.0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_typescript_sdk_reads_acknowledges_and_hears_changes(served: Served, mode: str) -> None:
    probe = subprocess.Popen(
        [*node_probe(), served.url, mode, "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert probe.stdout is not None
        ready = json.loads(probe.stdout.readline() or "{}")
        assert ready.get("ready"), probe.stderr.read() if probe.stderr else ""
        assert ready["protocolVersion"] == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert ready["text"] == document(0)
        assert ready["digest"] == sha(document(0))
        assert ready["staleIsError"] is True
        assert sha(document(0)) in ready["staleText"]
        assert ready["acknowledgedIsError"] is False
        assert read_ack(served.ack)["digest"] == sha(document(0))
        work = next(r for r in ready["resources"] if r["uri"] == WORK_URI)
        assert work["meta"][f"{META}fence"]["uid"]
        assert ready["tools"] == ["bindery_bindings", "bindery_acknowledge", "bindery_refuse"]
        lines = []
        for n in (1, 2, 3):
            t0 = time.time()
            deliver(served.bindings, document(n))
            while True:
                line = json.loads(probe.stdout.readline())
                lines.append(line)
                if line.get("uri") == BINDINGS_URI:
                    break
            assert line["at"] / 1000 - t0 <= 1.0
        final = json.loads(probe.stdout.readline())
        assert probe.wait(30) == 0
    finally:
        if probe.poll() is None:
            probe.kill()
            probe.wait()
    for line in lines:
        print(json.dumps(line))
    methods = [line["notification"] for line in lines]
    assert methods.count("notifications/resources/list_changed") == 3
    assert methods.count("notifications/resources/updated") == 3
    assert final == {"final": sha(document(3))}


# ------------------------------------------------------------------------------ refusals


def post(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = urllib.request.Request(  # noqa: S310 - a loopback URL the test built
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            status: int = response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    return status


def test_a_foreign_host_or_origin_is_refused(served: Served) -> None:
    assert post(served.url, {"Host": "attacker.example"}) == 421
    assert post(served.url, {"Origin": "http://attacker.example"}) == 403
    assert post(served.url, {"Origin": f"http://localhost:{served.port}"}) not in (403, 421)


def run_serve(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    deliver_to = tmp_path / "bindings.json"
    deliver(deliver_to, document(0))
    return subprocess.run(
        [
            sys.executable, "-m", "controller.mcp", "serve",
            f"--bindings={deliver_to}", "--resolve=off", *args,
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip


def test_it_refuses_to_start_on_the_nodes_network(tmp_path: Path) -> None:
    proc = run_serve(
        tmp_path,
        f"--listen=127.0.0.1:{free_port()}",
        env={"POD_IP": "10.0.0.5", "HOST_IP": "10.0.0.5"},
    )
    assert proc.returncode == 2
    assert "hostNetwork" in proc.stderr


def test_it_refuses_an_address_off_the_loopback(tmp_path: Path) -> None:
    proc = run_serve(tmp_path, "--listen=0.0.0.0:7411")
    assert proc.returncode == 2
    assert "loopback" in proc.stderr
