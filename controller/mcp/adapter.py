"""The adapter: an MCP server over one session's delivered bindings document.

:class:`BindingsAdapter` holds the current document (a :class:`~controller.mcp.content.Snapshot`),
builds the SDK's low-level :class:`~mcp.server.lowlevel.Server` over it, and, when the document
is replaced, tells every connected client in the way its protocol generation understands:

* 2026-07-28 and later: an event on the server's subscription bus, which the SDK's
  ``subscriptions/listen`` handler forwards to the streams that asked for it
  (``resourcesListChanged``, ``resourceSubscriptions``);
* 2025-11-25 and earlier (the handshake era): ``notifications/resources/list_changed``, sent
  unsolicited on each connection's standalone (GET) stream, and
  ``notifications/resources/updated`` for the URIs the connection subscribed to with
  ``resources/subscribe``. The SDK broadcasts nothing in this era, so the adapter keeps a
  registry of the connections it served.

Reading never acknowledges: only ``bindery_acknowledge`` writes ``Applied``, through the session
library, to the file the delivery sidecar records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio.to_thread
import mcp_types as types
import structlog
from mcp.server import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourcesListChanged,
    ResourceUpdated,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from controller import __version__
from controller.domain.errors import InvalidInputError
from controller.domain.results import BoundResource
from controller.mcp import content
from controller.mcp._session import (
    AcknowledgeError,
    Bindings,
    BindingsError,
    BindingsWatcher,
    ResolveError,
    acknowledge,
    digest_of,
    refuse,
    resource_json,
)
from controller.mcp.content import Snapshot

log = structlog.get_logger("bindery.mcp")

NOT_FOUND = -32602
"""JSON-RPC error for an unknown resource URI (the 2026-07-28 code; invalid params)."""

Resolver = Callable[[Bindings, str, str, str], BoundResource]
"""``(bindings, tool, slot, value) -> BoundResource``: resolves a deferred slot (blocking);
raises ``ResolveError``."""


class BinderyServer(Server[Any]):
    """The SDK's low-level server, announcing ``listChanged`` to handshake-era clients.

    Over HTTP the SDK builds the ``initialize`` result from :meth:`create_initialization_options`
    with default notification options, which say ``listChanged: false`` for resources and
    tools; the adapter does send ``list_changed``, so its default says so.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(resources_changed=True, tools_changed=True),
            experimental_capabilities,
            extensions,
        )


@dataclass
class _Peer:
    """A handshake-era connection: where to send, and the URIs it subscribed to."""

    session: ServerSession
    subscriptions: set[str] = field(default_factory=set)


class BindingsAdapter:
    """Serves one session's bindings over MCP.

    ``bindings_file`` is the delivered document; ``ack_file`` the acknowledgement file (None:
    the session library's default, ``$BINDERY_ACK_FILE`` else the mounted path); ``resolver``
    resolves deferred slots (None: ``bindery_resolve`` is not listed).
    """

    def __init__(
        self,
        bindings_file: Path,
        *,
        ack_file: Path | None = None,
        resolver: Resolver | None = None,
        poll_interval: float = 0.05,
    ) -> None:
        self.bindings_file = bindings_file
        self.ack_file = ack_file
        self.resolver = resolver
        self.poll_interval = poll_interval
        self.snapshot: Snapshot | None = None
        self.bus = InMemorySubscriptionBus()
        self._peers: dict[object, _Peer] = {}
        self.server = self._build()

    # ----------------------------------------------------------------------- the document

    def load(self) -> list[str]:
        """Read the delivered file; the resources that changed (empty when nothing did, or when
        it cannot be read now: a missing or half-written file is read again on the next poll)."""
        try:
            raw = self.bindings_file.read_bytes()
        except OSError:
            return []
        if self.snapshot is not None and digest_of(raw) == self.snapshot.digest:
            return []
        try:
            snapshot = Snapshot.of(raw, f"the bindings file {self.bindings_file}")
        except BindingsError as exc:
            log.warning("bindings file unreadable", path=str(self.bindings_file), error=str(exc))
            return []
        changed = content.changed_uris(self.snapshot, snapshot)
        self.snapshot = snapshot
        log.info("bindings document", digest=snapshot.digest, changed=changed)
        return changed

    async def refresh(self) -> list[str]:
        """:meth:`load`, then tell every client what changed."""
        changed = self.load()
        if changed:
            await self.notify(changed)
        return changed

    async def notify(self, changed: list[str]) -> None:
        """The resource list changed (each resource's ``_meta`` carries the digest), and so did
        the contents of ``changed``: publish on the bus, and send to handshake-era peers."""
        await self.bus.publish(ResourcesListChanged())
        for uri in changed:
            await self.bus.publish(ResourceUpdated(uri))
        for key, peer in list(self._peers.items()):
            try:
                await peer.session.send_resource_list_changed()
                for uri in changed:
                    if uri in peer.subscriptions:
                        await peer.session.send_resource_updated(uri)
            except Exception as exc:  # a peer gone mid-send: forget it, keep the others
                log.info("mcp client gone", error=str(exc) or type(exc).__name__)
                self._peers.pop(key, None)

    async def watch(self) -> None:
        """Follow the delivered file until cancelled: each new document is loaded and
        notified. The session library's watcher notices the replacement; the adapter then
        reads the exact bytes it serves."""
        watcher = BindingsWatcher(self.bindings_file, interval=self.poll_interval)
        async for _ in watcher.achanges():
            try:
                await self.refresh()
            except Exception:  # one failed notification must not end the watch
                log.exception("bindings document not notified", path=str(self.bindings_file))

    # ----------------------------------------------------------------------- the server

    def _seen(self, ctx: ServerRequestContext[Any]) -> _Peer | None:
        """Register a handshake-era connection (once), so that notifications reach it."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return None
        # The low-level context does not expose the connection; its session proxy holds it.
        connection = ctx.session._connection
        peer = self._peers.get(connection)
        if peer is None:
            peer = self._peers[connection] = _Peer(ctx.session)
            connection.exit_stack.callback(self._peers.pop, connection, None)
        return peer

    def _build(self) -> BinderyServer:
        async def on_initialized(
            ctx: ServerRequestContext[Any], _params: types.NotificationParams | None
        ) -> None:
            self._seen(ctx)

        async def list_resources(
            ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            self._seen(ctx)
            return types.ListResourcesResult(resources=content.resources(self.snapshot))

        async def read_resource(
            ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            self._seen(ctx)
            contents = content.read(self.snapshot, params.uri)
            if contents is None:
                raise MCPError(
                    NOT_FOUND,
                    f"no resource {params.uri!r} in the current bindings document (digest "
                    f"{self.snapshot.digest if self.snapshot else 'none yet'}): list the "
                    "resources again, the document may have changed",
                )
            return types.ReadResourceResult(contents=[contents])

        async def subscribe(
            ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
        ) -> types.EmptyResult:
            peer = self._seen(ctx)
            if peer is not None:
                peer.subscriptions.add(params.uri)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            peer = self._seen(ctx)
            if peer is not None:
                peer.subscriptions.discard(params.uri)
            return types.EmptyResult()

        async def list_tools(
            ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            self._seen(ctx)
            return types.ListToolsResult(tools=content.tool_list(resolve=self.resolver is not None))

        async def call_tool(
            ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            self._seen(ctx)
            return await self.call(params.name, params.arguments or {})

        server = BinderyServer(
            "bindery",
            version=__version__,
            title="Bindery bindings",
            instructions=content.INSTRUCTIONS,
            on_list_resources=list_resources,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_subscriptions_listen=ListenHandler(self.bus),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
        )
        server.add_notification_handler(
            "notifications/initialized", types.NotificationParams, on_initialized
        )
        return server

    # ----------------------------------------------------------------------- the tools

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """One tool call; a refusal is a result with ``isError`` (the model reads it)."""
        if name == content.RESOLVE_TOOL and self.resolver is None:
            name = ""  # not listed: as unknown as any other name
        if name not in content.TOOLS:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {name!r}: this server has "
                + ", ".join(t.name for t in content.tool_list(resolve=self.resolver is not None)),
            )
        # A document replaced since the last poll is the current one: read it before answering.
        await self.refresh()
        snapshot = self.snapshot
        if snapshot is None:
            return content.error_result(
                f"no bindings document has been delivered yet at {self.bindings_file}: the "
                "delivery sidecar writes it before the runtime starts; retry in a moment"
            )
        try:
            if name == content.BINDINGS_TOOL:
                return content.bindings_result(snapshot)
            strings = _strings(name, arguments)
            if name == content.RESOLVE_TOOL:
                return await self._resolve(snapshot, strings)
            return self._acknowledge(name, snapshot, strings)
        except _RefusedError as exc:
            return content.error_result(str(exc))

    def _acknowledge(
        self, name: str, snapshot: Snapshot, arguments: dict[str, str]
    ) -> types.CallToolResult:
        digest = arguments.get("digest", "")
        verb = "acknowledge" if name == content.ACKNOWLEDGE_TOOL else "refuse"
        if digest != snapshot.digest:
            raise _RefusedError(
                f"cannot {verb} {digest or 'an empty digest'}: it is not the current bindings "
                f"document's digest ({snapshot.digest}); the document changed since you read it. "
                "Call bindery_bindings, apply what it says, and "
                f"{verb} its digest."
            )
        try:
            if name == content.ACKNOWLEDGE_TOOL:
                acknowledge(snapshot.bindings, self.ack_file)
            else:
                refuse(snapshot.bindings, arguments.get("reason", ""), self.ack_file)
        except AcknowledgeError as exc:
            raise _RefusedError(str(exc)) from exc
        state = "Applied" if verb == "acknowledge" else "Refused"
        log.info(f"bindings {verb}d", digest=digest, state=state)
        return content.text_result(f"{digest}: {state}.", {"digest": digest, "state": state})

    async def _resolve(self, snapshot: Snapshot, arguments: dict[str, str]) -> types.CallToolResult:
        resolver = self.resolver
        if resolver is None:
            raise _RefusedError(f"{content.RESOLVE_TOOL} is not offered by this server")
        tool, slot, value = (arguments.get(k, "") for k in ("tool", "slot", "value"))
        try:
            bound = await anyio.to_thread.run_sync(resolver, snapshot.bindings, tool, slot, value)
        except ResolveError as exc:
            raise _RefusedError(str(exc)) from exc
        structured = bound.model_dump(mode="json", by_alias=True, exclude_defaults=True)
        return content.text_result(resource_json(bound), structured)


class _RefusedError(InvalidInputError):
    """A tool call the adapter refuses; its text is the result the model reads."""


def _strings(tool: str, arguments: dict[str, Any]) -> dict[str, str]:
    schema = content.TOOLS[tool].input_schema
    missing = [k for k in schema.get("required", []) if not isinstance(arguments.get(k), str)]
    if missing:
        raise _RefusedError(
            f"{tool}: give {', '.join(repr(k) for k in missing)} as "
            f"string{'s' if len(missing) > 1 else ''} (see the tool's input schema)"
        )
    return {k: v for k, v in arguments.items() if isinstance(v, str)}
