"""The sweep: objects that vanished without a DELETED event leave the view.

A watch reports a deletion only if it is connected when it happens. An object deleted between
the start-up LIST and kopf's own listing, or while a watch is re-established after an API-server
restart or a 410 Gone, produces no event and would otherwise stay in the view for good: claimants
waiting for a deleted holder, a deleted agent's session recreated against the garbage collector.
The sweep lists each kind (metadata only) and removes what the listing proves gone: an object
absent from a listing taken at resourceVersion R, whose stored version is not newer than R.

It runs shortly after kopf lists a kind again (which is what kopf does after every reconnect),
and every ``period`` seconds as a backstop. Kopf's first listing of a kind is not swept: the view
held nothing of that kind before it that a listing could prove gone (unless catching up read
some itself; see :meth:`Sweeper.listed`). The same listing shows changes whose events were
lost (kopf stops watching a namespace it sees terminating, possibly before the agents in it are
marked deleted): those objects are read again.

Start-up uses the same listing the other way round (:meth:`Sweeper.listing`,
:meth:`Sweeper.catch_up`): a metadata LIST says what exists, kopf's own listing delivers the
bodies, and the first pass waits until the view holds every listed object at its listed version
or newer. Every object is transferred once; whatever kopf has not delivered after a stall
(deleted in between, say) is settled by a listing and a read of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from controller.k8s import api
from controller.k8s.api import KubeApi
from controller.reconcile.store import Store, key_of, resource_version

log = structlog.get_logger("bindery.resync")

Observe = Callable[[api.Endpoint, dict[str, Any], bool], None]
"""``observe(endpoint, body, deleted)``: where the sweep's findings go (the intake)."""

Listing = dict[api.Endpoint, dict[str, str]]
"""What a metadata LIST showed: ``namespace/name`` -> resourceVersion, by endpoint."""


def behind(stored: dict[str, dict[str, Any]], listed: dict[str, str]) -> dict[str, str]:
    """The listed keys the view does not hold at their listed version or newer."""
    out = {}
    for key, rv in listed.items():
        body = stored.get(key)
        if body is None:
            out[key] = rv
            continue
        try:
            if int(resource_version(body)) < int(rv):
                out[key] = rv
        except ValueError:
            if resource_version(body) != rv:
                out[key] = rv
    return out


def missed(stored: dict[str, dict[str, Any]], listed: dict[str, str]) -> list[str]:
    """Keys the listing shows at a version newer than the stored one, or not stored at all:
    changes whose events were lost (a namespace kopf stopped watching while it terminates)."""
    out = []
    for key, rv in listed.items():
        body = stored.get(key)
        try:
            if body is None or int(rv) > int(resource_version(body)):
                out.append(key)
        except ValueError:
            continue
    return out


def vanished(
    stored: dict[str, dict[str, Any]], list_rv: str, listed: dict[str, str], namespace: str = ""
) -> list[dict[str, Any]]:
    """The stored bodies a listing at ``list_rv`` proves deleted (in ``namespace``, or all)."""
    try:
        at = int(list_rv)
    except ValueError:
        return []
    gone = []
    for key, body in stored.items():
        if key in listed or (namespace and not key.startswith(f"{namespace}/")):
            continue
        try:
            if int(resource_version(body)) <= at:
                gone.append(body)
        except ValueError:
            continue
    return gone


class Sweeper:
    """Lists each watched kind now and then and forgets the objects that are gone."""

    def __init__(
        self,
        kube: KubeApi,
        store: Store,
        observe: Observe,
        *,
        kinds: Sequence[tuple[api.Endpoint, str]],
        namespaces: Sequence[str] = (),
        period: float = 60.0,
        settle: float = 2.0,
    ) -> None:
        self.api = kube
        self.store = store
        self.observe = observe
        self.kinds = list(kinds)
        """(endpoint, label selector) of every kind in the view."""
        self.namespaces = list(namespaces)
        self.period = period
        self.settle = settle
        self._soon: dict[api.Endpoint, asyncio.TimerHandle] = {}
        self._last: dict[api.Endpoint, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self.max_reads = 500
        """Objects read again per sweep at most (the watch delivers them too, in time)."""
        self.max_gets = 20
        """Objects read one by one when catching up; more are read with one LIST."""
        self._first: dict[api.Endpoint, set[str]] = {endpoint: set() for endpoint, _ in kinds}
        """The keys kopf's first listing of each kind has delivered so far, while it lasts."""

    def start(self) -> None:
        self._loop = asyncio.get_running_loop().create_task(self._every_period())

    async def stop(self) -> None:
        for handle in self._soon.values():
            handle.cancel()
        self._soon.clear()
        tasks = [*self._tasks, *([self._loop] if self._loop else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._loop = None

    def soon(self) -> None:
        """Sweep every kind shortly (the API server said a watched namespace is terminating)."""
        for endpoint, _ in self.kinds:
            self.relisted(endpoint)

    def listed(self, endpoint: api.Endpoint, key: str) -> None:
        """kopf's listing delivered ``key``: sweep ``endpoint`` after the listing, unless this is
        kopf's first listing of it. Whatever the view holds of that kind came from that listing
        (and the watch that follows it), so there is nothing it could have missed. A key listed
        twice before any watch event means kopf has begun to list again (a reconnect)."""
        first = self._first.get(endpoint)
        if first is not None:
            if key not in first:
                first.add(key)
                return
            del self._first[endpoint]
        self.relisted(endpoint)

    def watched(self, endpoint: api.Endpoint) -> None:
        """A watch event of ``endpoint`` arrived: kopf's first listing of it is over."""
        if endpoint in self._first:
            del self._first[endpoint]

    def relisted(self, endpoint: api.Endpoint) -> None:
        """kopf is listing ``endpoint`` (start-up or a reconnect): sweep it once the listing has
        been quiet for ``settle`` seconds (one sweep per listing, however long it takes)."""
        loop = asyncio.get_running_loop()
        self._last[endpoint] = loop.time()
        if endpoint not in self._soon:
            self._soon[endpoint] = loop.call_later(self.settle, self._spawn, endpoint)

    def _spawn(self, endpoint: api.Endpoint) -> None:
        loop = asyncio.get_running_loop()
        quiet_at = self._last.get(endpoint, 0.0) + self.settle
        if quiet_at > loop.time():  # still listing: wait for it to end
            self._soon[endpoint] = loop.call_at(quiet_at, self._spawn, endpoint)
            return
        self._soon.pop(endpoint, None)
        task = asyncio.get_running_loop().create_task(self._sweep_logged(endpoint))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every_period(self) -> None:
        while True:
            await asyncio.sleep(self.period)
            for endpoint, _ in self.kinds:
                await self._sweep_logged(endpoint)

    async def _sweep_logged(self, endpoint: api.Endpoint) -> None:
        try:
            gone = await self.sweep(endpoint)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the API unreachable: the next sweep tries again
            log.warning("sweep failed; will try again", kind=endpoint.plural, error=str(exc))
            return
        if gone:
            log.info("put right objects changed while unwatched", kind=endpoint.plural, count=gone)

    async def listing(self) -> Listing:
        """Every object of every kind in the view, by key and version (metadata only); the
        kinds and namespaces are listed side by side."""
        scopes = [
            (endpoint, selector, namespace)
            for endpoint, selector in self.kinds
            for namespace in (self.namespaces if endpoint.namespaced and self.namespaces else [""])
        ]
        found = await asyncio.gather(
            *(self.api.list_versions(e, namespace, selector) for e, selector, namespace in scopes),
            return_exceptions=True,  # every listing ends before the first failure is raised
        )
        out: Listing = {endpoint: {} for endpoint, _ in self.kinds}
        for (endpoint, _, _), result in zip(scopes, found, strict=True):
            if isinstance(result, BaseException):
                raise result
            out[endpoint].update(result[1])
        return out

    async def catch_up(self, listing: Listing, *, stall: float = 3.0, poll: float = 0.05) -> None:
        """Return once the view holds everything ``listing`` showed, at that version or newer.

        The watches deliver it (kopf lists every kind when it starts). When nothing has arrived
        for ``stall`` seconds, what is still missing is settled directly: listed again, read when
        still there, forgotten when gone.
        """
        waiting = {e: behind(self.store.of(e), listed) for e, listed in listing.items()}
        loop = asyncio.get_running_loop()
        count, since = -1, loop.time()
        while remaining := sum(len(keys) for keys in waiting.values()):
            if remaining != count:
                count, since = remaining, loop.time()
            elif loop.time() - since >= stall:
                log.info("reading what the watches have not delivered", objects=remaining)
                try:
                    for endpoint, keys in waiting.items():
                        if keys:
                            await self._settle(endpoint, keys)
                except api.ApiError as exc:  # the API server away: the watches or a retry
                    log.warning("catching up failed; will try again", error=str(exc))
                since = loop.time()
            await asyncio.sleep(poll)
            waiting = {e: behind(self.store.of(e), keys) for e, keys in waiting.items() if keys}

    async def _settle(self, endpoint: api.Endpoint, keys: dict[str, str]) -> None:
        """Read the objects ``keys`` names that still exist into the view; either way, they are
        no longer waited for."""
        # The view now holds objects kopf did not list: its listing of this kind must be swept.
        self._first.pop(endpoint, None)
        selector = dict(self.kinds).get(endpoint, "")
        scopes = self.namespaces if endpoint.namespaced and self.namespaces else [""]
        if len(keys) > self.max_gets:  # nothing delivered yet, most likely: one LIST, not N GETs
            for namespace in scopes:
                for body in await self.api.list_all(endpoint, namespace, selector):
                    if key_of(body) in keys:
                        self.observe(endpoint, body, False)
            keys.clear()
            return
        now: dict[str, str] = {}
        for namespace in scopes:
            now.update((await self.api.list_versions(endpoint, namespace, selector))[1])
        for key in list(keys):
            del keys[key]
            if key in now:
                ns, _, name = key.rpartition("/")
                found = await self.api.get(endpoint, ns, name)
                if found is not None:
                    self.observe(endpoint, found, False)

    async def sweep(self, endpoint: api.Endpoint) -> int:
        """List ``endpoint``; forget what the listing proves deleted and read again what it
        shows changed unseen. How many objects were put right."""
        selector = dict(self.kinds).get(endpoint, "")
        scopes = self.namespaces if endpoint.namespaced and self.namespaces else [""]
        count = 0
        for namespace in scopes:
            list_rv, listed = await self.api.list_versions(endpoint, namespace, selector)
            stored = self.store.of(endpoint)
            for body in vanished(stored, list_rv, listed, namespace):
                self.observe(endpoint, body, True)
                count += 1
            for key in missed(stored, listed)[: self.max_reads]:
                ns, _, name = key.rpartition("/")
                found = await self.api.get(endpoint, ns, name)
                if found is not None:
                    self.observe(endpoint, found, False)
                    count += 1
        return count
