"""The MCP adapter served in process to the SDK's own client, in both protocol generations:
resources, notifications after a new document, and the tools (real files under tmp_path)."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from controller.domain.results import BoundResource
from controller.mcp import BindingsAdapter
from controller.mcp._session import Bindings, ResolveError
from controller.mcp.access import AccessError, host_network, loopback_listen, refuse_host_network
from controller.mcp.content import BINDINGS_URI, META
from tests.mcp.support import WORK_URI, deliver, document, read_ack, sha

LEGACY = "legacy"
MODERN = "auto"  # in process, the client speaks the newest generation the server serves


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "bindings").mkdir()
    (tmp_path / "ack").mkdir()
    bindings = tmp_path / "bindings" / "bindings.json"
    deliver(bindings, document(1))
    return bindings, tmp_path / "ack" / "ack.json"


@pytest.fixture
def adapter(files: tuple[Path, Path]) -> BindingsAdapter:
    bindings, ack = files
    adapter = BindingsAdapter(bindings, ack_file=ack)
    adapter.load()
    return adapter


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.arrived = asyncio.Event()

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)
        self.arrived.set()

    def methods(self) -> list[tuple[str, str]]:
        out = []
        for m in self.messages:
            method = getattr(m, "method", "")
            uri = getattr(getattr(m, "params", None), "uri", "")
            if method.startswith("notifications/resources"):
                out.append((method, uri))
        return out


async def connect(adapter: BindingsAdapter, mode: str, inbox: Inbox | None = None) -> Client:
    """A client of ``adapter`` (entered by the test itself: a client lives in one task)."""
    return Client(adapter.server, mode=mode, message_handler=inbox)


@pytest.fixture(params=[LEGACY, MODERN])
def mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# ------------------------------------------------------------------------------ the handshake


async def test_both_generations_are_served(adapter: BindingsAdapter) -> None:
    async with await connect(adapter, LEGACY) as old, await connect(adapter, MODERN) as new:
        assert old.protocol_version == "2025-11-25"
        assert new.protocol_version == "2026-07-28"


async def test_handshake_clients_are_told_the_lists_change(adapter: BindingsAdapter) -> None:
    """The SDK's default initialize result says listChanged false; the adapter says true."""
    plain = Server("plain", on_list_resources=lambda c, p: None)  # type: ignore[arg-type,return-value]
    resources_capability = plain.create_initialization_options().capabilities.resources
    assert resources_capability is not None
    assert resources_capability.list_changed is False
    async with await connect(adapter, LEGACY) as c:
        capabilities = c.server_capabilities
        assert capabilities.resources is not None
        assert capabilities.resources.list_changed is True
        assert capabilities.resources.subscribe is True
        assert capabilities.tools is not None
        assert capabilities.tools.list_changed is True


async def test_the_instructions_reach_the_client(adapter: BindingsAdapter, mode: str) -> None:
    async with await connect(adapter, mode) as client:
        assert client.instructions is not None
        assert "bindery_acknowledge" in client.instructions


# ------------------------------------------------------------------------------ resources


async def test_list_and_read(adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]) -> None:
    async with await connect(adapter, mode) as client:
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources][:1] == [BINDINGS_URI]
        assert WORK_URI in [r.uri for r in listed.resources]
        got = await client.read_resource(BINDINGS_URI)
        content = got.contents[0]
        assert isinstance(content, types.TextResourceContents)
        assert content.text == files[0].read_text()
        assert content.meta is not None
        assert content.meta[f"{META}digest"] == sha(document(1))


async def test_an_unknown_uri_is_invalid_params(adapter: BindingsAdapter, mode: str) -> None:
    async with await connect(adapter, mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("git://not-bound")
        assert caught.value.error.code == -32602
        assert "list the resources again" in caught.value.error.message


async def test_reading_is_never_acknowledging(
    adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]
) -> None:
    async with await connect(adapter, mode) as client:
        await client.list_resources()
        await client.read_resource(BINDINGS_URI)
        await client.call_tool("bindery_bindings", {})
        assert not files[1].exists()


# ------------------------------------------------------------------------------ notifications


async def test_a_handshake_client_hears_list_changed_and_updated_for_what_it_subscribed(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    inbox = Inbox()
    async with await connect(adapter, LEGACY, inbox) as c:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is the 2025 era's own way
            await c.subscribe_resource(BINDINGS_URI)
            await c.subscribe_resource(WORK_URI)
        deliver(files[0], document(2))
        assert await adapter.refresh()
        await asyncio.wait_for(inbox.arrived.wait(), 2)
        await asyncio.sleep(0.05)
    assert inbox.methods() == [
        ("notifications/resources/list_changed", ""),
        ("notifications/resources/updated", BINDINGS_URI),
    ]  # the work binding did not change, and git://acme/app/r2 was not subscribed


async def test_unsubscribed_uris_are_not_updated(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    inbox = Inbox()
    async with await connect(adapter, LEGACY, inbox) as c:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await c.subscribe_resource(BINDINGS_URI)
            await c.unsubscribe_resource(BINDINGS_URI)
        deliver(files[0], document(2, work=False))
        await adapter.refresh()
        await asyncio.wait_for(inbox.arrived.wait(), 2)
        await asyncio.sleep(0.05)
    assert inbox.methods() == [("notifications/resources/list_changed", "")]


async def test_a_modern_client_hears_through_its_listen_stream(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    async with (
        await connect(adapter, MODERN) as c,
        c.listen(
            resources_list_changed=True, resource_subscriptions=[BINDINGS_URI, WORK_URI]
        ) as sub,
    ):
        deliver(files[0], document(2, work=False))  # the work item handed off
        await adapter.refresh()
        events = sub.__aiter__()
        got = [await asyncio.wait_for(events.__anext__(), 2) for _ in range(3)]
    assert got == [ResourcesListChanged(), ResourceUpdated(BINDINGS_URI), ResourceUpdated(WORK_URI)]


async def test_the_same_document_again_notifies_nothing(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    deliver(files[0], document(1))  # a new file (inode), the same bytes
    assert await adapter.refresh() == []


async def test_a_half_written_document_is_not_served(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    files[0].write_text(document(2)[:40])
    assert await adapter.refresh() == []
    assert adapter.snapshot is not None
    assert adapter.snapshot.digest == sha(document(1))
    deliver(files[0], document(2))
    assert BINDINGS_URI in await adapter.refresh()


async def test_the_watch_notices_a_replacement(
    adapter: BindingsAdapter, files: tuple[Path, Path]
) -> None:
    async with (
        await connect(adapter, MODERN) as c,
        c.listen(resource_subscriptions=[BINDINGS_URI]) as sub,
    ):
        watching = asyncio.create_task(adapter.watch())
        try:
            await asyncio.sleep(0.1)
            deliver(files[0], document(3))
            event = await asyncio.wait_for(sub.__aiter__().__anext__(), 2)
        finally:
            watching.cancel()
    assert event == ResourceUpdated(BINDINGS_URI)
    assert adapter.snapshot is not None
    assert adapter.snapshot.digest == sha(document(3))


# ------------------------------------------------------------------------------ the tools


async def test_bindings_tool_gives_the_document_and_its_digest(
    adapter: BindingsAdapter, mode: str
) -> None:
    async with await connect(adapter, mode) as client:
        result = await client.call_tool("bindery_bindings", {})
        assert not result.is_error
        assert structured(result)["digest"] == sha(document(1))
        assert structured(result)["bindings"]["agent"] == {"namespace": "a", "name": "dev"}
        assert [c.text for c in result.content if isinstance(c, types.TextContent)] == [
            f"digest: {sha(document(1))}",
            document(1),
        ]


async def test_acknowledge_writes_applied_for_the_current_digest(
    adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]
) -> None:
    async with await connect(adapter, mode) as client:
        result = await client.call_tool("bindery_acknowledge", {"digest": sha(document(1))})
        assert not result.is_error, text(result)
        assert structured(result) == {"digest": sha(document(1)), "state": "Applied"}
        record = read_ack(files[1])
        assert (record["digest"], record["state"], record["message"]) == (
            sha(document(1)),
            "Applied",
            "",
        )


async def test_a_stale_digest_is_refused_and_nothing_is_written(
    adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]
) -> None:
    async with await connect(adapter, mode) as client:
        stale = sha(document(1))
        deliver(files[0], document(2))  # replaced since the client read it (no poll yet)
        result = await client.call_tool("bindery_acknowledge", {"digest": stale})
        assert result.is_error
        assert sha(document(2)) in text(result)
        assert "bindery_bindings" in text(result)
        assert not files[1].exists()
        result = await client.call_tool("bindery_refuse", {"digest": stale, "reason": "no"})
        assert result.is_error
        assert not files[1].exists()


async def test_the_newest_document_is_the_one_acknowledged(
    adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]
) -> None:
    async with await connect(adapter, mode) as client:
        deliver(files[0], document(2))  # not polled yet: the tool reads it first
        result = await client.call_tool("bindery_acknowledge", {"digest": sha(document(2))})
        assert not result.is_error, text(result)
        assert read_ack(files[1])["digest"] == sha(document(2))


async def test_refuse_writes_refused_with_the_reason(
    adapter: BindingsAdapter, mode: str, files: tuple[Path, Path]
) -> None:
    async with await connect(adapter, mode) as client:
        result = await client.call_tool(
            "bindery_refuse", {"digest": sha(document(1)), "reason": "the worktree is gone"}
        )
        assert not result.is_error, text(result)
        record = read_ack(files[1])
        assert (record["state"], record["message"]) == ("Refused", "the worktree is gone")


async def test_a_refusal_needs_a_reason_and_arguments_are_strings(
    adapter: BindingsAdapter, mode: str
) -> None:
    async with await connect(adapter, mode) as client:
        result = await client.call_tool(
            "bindery_refuse", {"digest": sha(document(1)), "reason": " "}
        )
        assert result.is_error
        assert "needs a reason" in text(result)
        result = await client.call_tool("bindery_acknowledge", {"digest": 7})
        assert result.is_error


async def test_an_ack_directory_that_is_missing_is_reported(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    adapter = BindingsAdapter(files[0], ack_file=tmp_path / "nowhere" / "ack.json")
    async with await connect(adapter, MODERN) as c:
        result = await c.call_tool("bindery_acknowledge", {"digest": sha(document(1))})
    assert result.is_error
    assert "does not exist" in text(result)


async def test_before_any_document_the_tools_say_so(tmp_path: Path) -> None:
    adapter = BindingsAdapter(tmp_path / "bindings.json", ack_file=tmp_path / "ack.json")
    async with await connect(adapter, MODERN) as c:
        result = await c.call_tool("bindery_bindings", {})
        assert result.is_error
        assert "no bindings document has been delivered yet" in text(result)
        assert [r.uri for r in (await c.list_resources()).resources] == [BINDINGS_URI]
        with pytest.raises(MCPError):
            await c.read_resource(BINDINGS_URI)


async def test_resolve_is_not_listed_nor_callable_without_a_resolver(
    adapter: BindingsAdapter, mode: str
) -> None:
    async with await connect(adapter, mode) as client:
        assert "bindery_resolve" not in [t.name for t in (await client.list_tools()).tools]
        with pytest.raises(MCPError, match="unknown tool"):
            await client.call_tool("bindery_resolve", {"tool": "t", "slot": "s", "value": "v"})


async def test_resolve_answers_with_the_resource_or_the_reason(files: tuple[Path, Path]) -> None:
    calls: list[tuple[str, str, str, str]] = []

    def resolver(bindings: Bindings, tool: str, slot: str, value: str) -> BoundResource:
        calls.append((bindings.digest, tool, slot, value))
        if value == "missing":
            raise ResolveError(f"agent a/dev, tool {tool!r}: no Resource {value!r}")
        return BoundResource(uri="git://acme/app", type="repo", name=value, namespace="a")

    adapter = BindingsAdapter(files[0], ack_file=files[1], resolver=resolver)
    async with await connect(adapter, MODERN) as c:
        assert "bindery_resolve" in [t.name for t in (await c.list_tools()).tools]
        ok = await c.call_tool("bindery_resolve", {"tool": "git", "slot": "repo", "value": "app"})
        bad = await c.call_tool(
            "bindery_resolve", {"tool": "git", "slot": "repo", "value": "missing"}
        )
    assert not ok.is_error
    assert structured(ok) == {
        "uri": "git://acme/app",
        "type": "repo",
        "name": "app",
        "namespace": "a",
    }
    assert bad.is_error
    assert "no Resource 'missing'" in text(bad)
    assert calls[0] == (sha(document(1)), "git", "repo", "app")


# ------------------------------------------------------------------------------ where it serves


@pytest.mark.parametrize(
    ("listen", "expected"),
    [
        ("127.0.0.1:7411", ("127.0.0.1", 7411)),
        ("[::1]:8000", ("::1", 8000)),
        ("127.0.0.2:1", ("127.0.0.2", 1)),
    ],
)
def test_loopback_addresses_are_accepted(listen: str, expected: tuple[str, int]) -> None:
    assert loopback_listen(listen) == expected


@pytest.mark.parametrize(
    "listen",
    ["0.0.0.0:7411", "10.1.2.3:7411", "localhost:7411", "127.0.0.1", "127.0.0.1:0", ":7411"],
)
def test_anything_else_is_refused(listen: str) -> None:
    with pytest.raises(AccessError, match="loopback"):
        loopback_listen(listen)


def test_host_network_is_a_pod_ip_equal_to_the_node_ip() -> None:
    assert host_network({"POD_IP": "10.0.0.5", "HOST_IP": "10.0.0.5"})
    assert not host_network({"POD_IP": "10.244.0.7", "HOST_IP": "10.0.0.5"})
    assert not host_network({})  # outside a pod
    with pytest.raises(AccessError, match="hostNetwork"):
        refuse_host_network({"POD_IP": "10.0.0.5", "HOST_IP": "10.0.0.5"})
    refuse_host_network({"POD_IP": "10.244.0.7", "HOST_IP": "10.0.0.5"})
