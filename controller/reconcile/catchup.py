"""Start-up catch-up: the first pass waits until the view holds what a metadata LIST showed.

A metadata LIST says what exists (:meth:`CatchUp.listing`), kopf's own listing delivers the
bodies, and the first pass waits (:meth:`CatchUp.catch_up`) until the view holds every listed
object at its listed version or newer. Every object is transferred once; whatever kopf has not
delivered after a stall (deleted in between, say) is settled by a listing and a read of its own,
and the sweeper is told so (its first listing of that kind must then be swept too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from time import perf_counter
from typing import Any

import structlog

from controller.k8s import api
from controller.k8s.api import KubeApi
from controller.reconcile.clock import LOOP_CLOCK, Clock
from controller.reconcile.resync import Lister, Observe
from controller.reconcile.store import Store, key_of, resource_version

log = structlog.get_logger("bindery.resync")

POLL_SHARE = 50
"""Catching up pauses at least this many times as long as its last look took (≤ 2 % of the loop)."""

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


class CatchUp:
    """Lists what exists at start-up and waits until the view holds it."""

    def __init__(
        self,
        kube: KubeApi,
        store: Store,
        observe: Observe,
        *,
        kinds: Sequence[tuple[api.Endpoint, str]],
        namespaces: Sequence[str] = (),
        read_directly: Callable[[api.Endpoint], None] = lambda endpoint: None,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.api = kube
        self.store = store
        self.observe = observe
        self.lister = Lister(kube, observe, kinds=kinds, namespaces=namespaces)
        self.kinds = self.lister.kinds
        self.read_directly = read_directly
        """Told of each kind whose objects catching up read itself (``Sweeper.read_directly``)."""
        self.clock = clock
        self.max_gets = 20
        """Objects read one by one when catching up; more are read with one LIST."""

    async def listing(self) -> Listing:
        """Every object of every kind in the view, by key and version (metadata only); the
        kinds and namespaces are listed side by side."""
        every = [
            (endpoint, selector, namespace)
            for endpoint, selector in self.kinds
            for namespace in self.lister.scopes(endpoint)
        ]
        found = await asyncio.gather(
            *(self.api.list_versions(e, namespace, selector) for e, selector, namespace in every),
            return_exceptions=True,  # every listing ends before the first failure is raised
        )
        out: Listing = {endpoint: {} for endpoint, _ in self.kinds}
        for (endpoint, _, _), result in zip(every, found, strict=True):
            if isinstance(result, BaseException):
                raise result
            out[endpoint].update(result[1])
        return out

    async def catch_up(self, listing: Listing, *, stall: float = 3.0, poll: float = 0.05) -> None:
        """Return once the view holds everything ``listing`` showed, at that version or newer.

        The watches deliver it (kopf lists every kind when it starts). When nothing has arrived
        for ``stall`` seconds, what is still missing is settled directly: listed again, read when
        still there, forgotten when gone.

        Looking costs time in proportion to what is still missing (125,000 keys at 50,000
        agents), and it competes with the watches for the one event loop: the pause between two
        looks is at least ``POLL_SHARE`` times the last look, so looking takes a bounded share
        of the loop however large the fleet, and looks grow frequent again as the rest arrives.
        """
        started = perf_counter()
        waiting = {e: behind(self.store.of(e), listed) for e, listed in listing.items()}
        took = perf_counter() - started
        count, since = -1, self.clock.now()
        while remaining := sum(len(keys) for keys in waiting.values()):
            if remaining != count:
                count, since = remaining, self.clock.now()
            elif self.clock.now() - since >= stall:
                log.info("reading what the watches have not delivered", objects=remaining)
                try:
                    for endpoint, keys in waiting.items():
                        if keys:
                            await self._settle(endpoint, keys)
                except api.ApiError as exc:  # the API server away: the watches or a retry
                    log.warning("catching up failed; will try again", error=str(exc))
                since = self.clock.now()
            await self.clock.sleep(max(poll, POLL_SHARE * took))
            started = perf_counter()
            waiting = {e: behind(self.store.of(e), keys) for e, keys in waiting.items() if keys}
            took = perf_counter() - started

    async def _settle(self, endpoint: api.Endpoint, keys: dict[str, str]) -> None:
        """Read the objects ``keys`` names that still exist into the view; either way, they are
        no longer waited for."""
        self.read_directly(endpoint)  # the view now holds objects kopf did not list
        if len(keys) > self.max_gets:  # nothing delivered yet, most likely: one LIST, not N GETs
            selector = self.lister.selector(endpoint)
            for namespace in self.lister.scopes(endpoint):
                for body in await self.api.list_all(endpoint, namespace, selector):
                    if key_of(body) in keys:
                        self.observe(endpoint, body, False)
            keys.clear()
            return
        now: dict[str, str] = {}
        async for _, _, listed in self.lister.versions(endpoint):
            now.update(listed)
        for key in list(keys):
            del keys[key]
            if key in now:
                await self.lister.read(endpoint, key)
