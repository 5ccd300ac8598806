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
some itself; see :meth:`Sweeper.read_directly` and ``catchup``). The same listing shows changes
whose events were lost (kopf stops watching a namespace it sees terminating, possibly before
the agents in it are marked deleted): those objects are read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import structlog

from controller.k8s import api
from controller.k8s.api import KubeApi
from controller.reconcile.clock import LOOP_CLOCK, Clock, Timer
from controller.reconcile.store import Store, resource_version

log = structlog.get_logger("bindery.resync")

Observe = Callable[[api.Endpoint, dict[str, Any], bool], None]
"""``observe(endpoint, body, deleted)``: where the sweep's findings go (the intake)."""


def scopes(endpoint: api.Endpoint, namespaces: Sequence[str]) -> list[str]:
    """The namespaces to list ``endpoint`` in: each watched one, or all ("") at once."""
    return list(namespaces) if endpoint.namespaced and namespaces else [""]


Versions = tuple[str, str, dict[str, str]]
"""One namespace's metadata LIST: ``(namespace, list resourceVersion, key -> resourceVersion)``."""


class Lister:
    """Lists the kinds in the view (metadata only) in each watched namespace, and reads single
    objects into the view: what the sweep and catching up at start-up both do."""

    def __init__(
        self,
        kube: KubeApi,
        observe: Observe,
        *,
        kinds: Sequence[tuple[api.Endpoint, str]],
        namespaces: Sequence[str] = (),
    ) -> None:
        self.api = kube
        self.observe = observe
        self.kinds = list(kinds)
        """(endpoint, label selector) of every kind in the view."""
        self.namespaces = list(namespaces)

    def scopes(self, endpoint: api.Endpoint) -> list[str]:
        return scopes(endpoint, self.namespaces)

    def selector(self, endpoint: api.Endpoint) -> str:
        return dict(self.kinds).get(endpoint, "")

    async def versions(
        self, endpoint: api.Endpoint
    ) -> AsyncIterator[tuple[str, str, dict[str, str]]]:
        """``(namespace, list resourceVersion, key -> resourceVersion)`` for each namespace."""
        for namespace in self.scopes(endpoint):
            list_rv, listed = await self.api.list_versions(
                endpoint, namespace, self.selector(endpoint)
            )
            yield namespace, list_rv, listed

    async def read(self, endpoint: api.Endpoint, key: str) -> bool:
        """Read ``key`` again into the view; whether it still exists."""
        ns, _, name = key.rpartition("/")
        found = await self.api.get(endpoint, ns, name)
        if found is not None:
            self.observe(endpoint, found, False)
        return found is not None


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
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.api = kube
        self.store = store
        self.observe = observe
        self.lister = Lister(kube, observe, kinds=kinds, namespaces=namespaces)
        self.kinds = self.lister.kinds
        self.period = period
        self.settle = settle
        self.clock = clock
        self._soon: dict[api.Endpoint, Timer] = {}
        self._last: dict[api.Endpoint, float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self.max_reads = 500
        """Objects read again per sweep at most (the watch delivers them too, in time)."""
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

    def read_directly(self, endpoint: api.Endpoint) -> None:
        """The view now holds objects of ``endpoint`` that kopf did not list (catching up read
        them itself): kopf's listing of that kind must be swept, first or not."""
        self._first.pop(endpoint, None)

    def watched(self, endpoint: api.Endpoint) -> None:
        """A watch event of ``endpoint`` arrived: kopf's first listing of it is over."""
        if endpoint in self._first:
            del self._first[endpoint]

    def relisted(self, endpoint: api.Endpoint) -> None:
        """kopf is listing ``endpoint`` (start-up or a reconnect): sweep it once the listing has
        been quiet for ``settle`` seconds (one sweep per listing, however long it takes)."""
        now = self.clock.now()
        self._last[endpoint] = now
        if endpoint not in self._soon:
            self._soon[endpoint] = self.clock.call_at(
                now + self.settle, lambda: self._spawn(endpoint)
            )

    def _spawn(self, endpoint: api.Endpoint) -> None:
        quiet_at = self._last.get(endpoint, 0.0) + self.settle
        if quiet_at > self.clock.now():  # still listing: wait for it to end
            self._soon[endpoint] = self.clock.call_at(quiet_at, lambda: self._spawn(endpoint))
            return
        self._soon.pop(endpoint, None)
        task = asyncio.get_running_loop().create_task(self._sweep_logged(endpoint))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every_period(self) -> None:
        while True:
            await self.clock.sleep(self.period)
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

    async def sweep(self, endpoint: api.Endpoint) -> int:
        """List ``endpoint``; forget what the listing proves deleted and read again what it
        shows changed unseen. How many objects were put right."""
        count = 0
        async for namespace, list_rv, listed in self.lister.versions(endpoint):
            stored = self.store.of(endpoint)
            for body in vanished(stored, list_rv, listed, namespace):
                self.observe(endpoint, body, True)
                count += 1
            for key in missed(stored, listed)[: self.max_reads]:
                if await self.lister.read(endpoint, key):
                    count += 1
        return count
