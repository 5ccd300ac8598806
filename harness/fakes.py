"""Stand-ins for the Kubernetes API server, shared by the unit tests.

``ScriptedApi``: the controller's API seam (:class:`controller.k8s.api.KubeApi`) in memory,
versions numbered like etcd, a write refused on cue (with a status, or a whole API Status body).
It pins the *order* of a reconcile pass in milliseconds; that the API server itself behaves this
way (create-if-absent, preconditions, generation bumps) is proven against the real one in
tests/integration/.

``ListingApi``: the reads of a sweep (listings, gets) over one kind's objects, each recorded, a
few refused as if the API server were away.

``StandIn``: an HTTP server on loopback in place of kube-apiserver, for code that speaks HTTP
itself (the seam, the start-up checks): it records every request, gives the answers queued for
it, then what its handler answers. ``serving`` runs it on the running event loop (async clients),
``serving_in_thread`` on a loop of its own (synchronous clients).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from controller.k8s import api
from controller.k8s.api import ApiError, Endpoint

NS = "team"
"""The namespace the paths of scripted refusals name."""
Body = dict[str, Any]
Write = tuple[str, str, str]
"""(verb, plural, name)."""


@dataclass
class ScriptedApi:
    """Objects in memory, versions numbered like etcd, and writes refused on cue."""

    objects: dict[tuple[str, str, str], Body] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    refuse: dict[Write, int | Body] = field(default_factory=dict)
    """A write to refuse once: with this HTTP status (reason ``Scripted``), or with this API
    Status body (its ``code`` the HTTP status), as the API server would send it."""
    _rv: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def seed(self, endpoint: Endpoint, body: Body) -> Body:
        body = copy.deepcopy(body)
        md = body["metadata"]
        md.setdefault("uid", f"{md['name']}-uid")
        md["resourceVersion"] = str(next(self._rv))
        self.objects[(endpoint.plural, md.get("namespace", ""), md["name"])] = body
        return copy.deepcopy(body)

    def _check(self, verb: str, endpoint: Endpoint, name: str) -> None:
        answer = self.refuse.pop((verb, endpoint.plural, name), None)
        if isinstance(answer, dict):
            raise ApiError(int(answer["code"]), verb, endpoint.path(NS, name), answer)
        if answer is not None:
            raise ApiError(answer, verb, endpoint.path(NS, name), {"reason": "Scripted"})

    def _write(self, verb: str, endpoint: Endpoint, body: Body) -> Body:
        md = body["metadata"]
        md["resourceVersion"] = str(next(self._rv))
        self.objects[(endpoint.plural, md.get("namespace", ""), md["name"])] = body
        self.writes.append((verb, endpoint.plural, md["name"]))
        return copy.deepcopy(body)

    async def get(self, endpoint: Endpoint, namespace: str, name: str) -> Body | None:
        found = self.objects.get((endpoint.plural, namespace, name))
        return copy.deepcopy(found) if found else None

    async def create(self, endpoint: Endpoint, body: Body) -> Body:
        if endpoint is api.EVENTS:
            self.events.append(body["reason"])
            return body
        md = body["metadata"]
        self._check("create", endpoint, md["name"])
        if (endpoint.plural, md.get("namespace", ""), md["name"]) in self.objects:
            raise ApiError(409, "POST", endpoint.path(NS), {"reason": "AlreadyExists"})
        body = copy.deepcopy(body)
        md = body["metadata"]
        md["uid"] = f"{md['name']}-uid-{next(self._rv)}"
        md.setdefault("generation", 1)
        return self._write("create", endpoint, body)

    def _current(self, endpoint: Endpoint, namespace: str, name: str, rv: str) -> Body:
        current = self.objects.get((endpoint.plural, namespace, name))
        if current is None:
            raise ApiError(404, "PATCH", endpoint.path(namespace, name), {})
        if rv and current["metadata"]["resourceVersion"] != rv:
            raise ApiError(409, "PATCH", endpoint.path(namespace, name), {"reason": "Conflict"})
        return copy.deepcopy(current)

    async def merge_patch(
        self, endpoint: Endpoint, namespace: str, name: str, patch: Body, sub: str = ""
    ) -> Body:
        self._check("patch", endpoint, name)
        current = self._current(
            endpoint, namespace, name, patch.get("metadata", {}).get("resourceVersion", "")
        )
        for key, value in patch.items():
            if key == "metadata":
                current["metadata"].update({k: v for k, v in value.items() if k != "rv"})
            else:
                current.setdefault(key, {}).update(value)
        return self._write("patch", endpoint, current)

    async def json_patch_at(
        self, endpoint: Endpoint, namespace: str, name: str, rv: str, ops: list[Body]
    ) -> Body:
        self._check("patch", endpoint, name)
        current = self._current(endpoint, namespace, name, rv)
        for op in ops:
            *parents, last = op["path"].strip("/").split("/")
            target = current
            for p in parents:
                target = target.setdefault(p, {})
            target[last] = op["value"]
        return self._write("patch", endpoint, current)

    async def replace_status(
        self, endpoint: Endpoint, namespace: str, name: str, status: Body
    ) -> Body:
        self._check("status", endpoint, name)
        current = self._current(endpoint, namespace, name, "")
        current["status"] = copy.deepcopy(status)
        return self._write("status", endpoint, current)

    async def delete(
        self,
        endpoint: Endpoint,
        namespace: str,
        name: str,
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> bool:
        self._check("delete", endpoint, name)
        current = self.objects.get((endpoint.plural, namespace, name))
        if current is None:
            return False
        md = current["metadata"]
        if (uid and md["uid"] != uid) or (
            resource_version and md["resourceVersion"] != resource_version
        ):
            raise ApiError(409, "DELETE", endpoint.path(namespace, name), {"reason": "Conflict"})
        del self.objects[(endpoint.plural, namespace, name)]
        self.writes.append(("delete", endpoint.plural, name))
        return True


@dataclass
class ListingApi:
    """What the API server holds of one kind in namespace ``NS`` (by name), answering the reads
    a sweep makes (metadata listings, full listings, gets) and recording each."""

    objects: dict[str, Body] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    fail: int = 0
    """Requests to refuse (as an API server that is away) before answering again."""

    def _answer(self, verb: str) -> None:
        self.requests.append(verb)
        if self.fail:
            self.fail -= 1
            raise ApiError(0, verb, "/", {"message": "connection refused"})

    async def list_versions(
        self, endpoint: Endpoint, namespace: str = "", label_selector: str = ""
    ) -> tuple[str, dict[str, str]]:
        self._answer("list_versions")
        return "999", {
            f"{NS}/{n}": b["metadata"]["resourceVersion"] for n, b in self.objects.items()
        }

    async def list_all(
        self, endpoint: Endpoint, namespace: str = "", label_selector: str = ""
    ) -> list[Body]:
        self._answer("list_all")
        return list(self.objects.values())

    async def get(self, endpoint: Endpoint, namespace: str, name: str) -> Body | None:
        self._answer("get")
        return self.objects.get(name)


@dataclass
class Seen:
    """One request the stand-in server received."""

    method: str
    path: str
    query: list[tuple[str, str]]
    headers: dict[str, str]
    """Lower-cased names."""
    body: Any


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class StandIn:
    """An HTTP server on loopback in place of kube-apiserver (see the module)."""

    handler: Handler
    url: str = ""
    seen: list[Seen] = field(default_factory=list)
    answers: list[tuple[int, bytes]] = field(default_factory=list)
    """Answers to give first, in order, as JSON (then the handler's)."""

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.seen.append(
            Seen(
                request.method,
                request.raw_path.split("?")[0],
                list(request.query.items()),
                {k.lower(): v for k, v in request.headers.items()},
                json.loads(raw) if raw else None,
            )
        )
        if self.answers:
            status, text = self.answers.pop(0)
            return web.Response(status=status, body=text, content_type="application/json")
        return await self.handler(request)

    async def _start(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return runner


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[StandIn]:
    """A :class:`StandIn` on the running event loop, for as long as the block runs."""
    server = StandIn(handler)
    runner = await server._start()
    try:
        yield server
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def serving_in_thread(handler: Handler, timeout: float = 10.0) -> Iterator[StandIn]:
    """A :class:`StandIn` on an event loop in a thread of its own, for synchronous clients."""
    server = StandIn(handler)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        runner = asyncio.run_coroutine_threadsafe(server._start(), loop).result(timeout)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        loop.close()
