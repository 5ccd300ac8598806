"""The controller's own list+watch of the objects it creates (kopf watches the five kinds).

The objects the controller creates for agents are most of what a large fleet holds: one bindings
ConfigMap per agent, a StatefulSet, Pod, PersistentVolumeClaim and acknowledgement Lease per
session, a Lease per work hold. The view needs each version of them and nothing else: no
handler matching, no per-object task, no body wrapper, which kopf's pipeline spends on every
object it lists (about 0.3 ms each, the greater part of a 50,000-agent start-up). An
:class:`Informer` lists one kind in pages, each object into the view as its page arrives, then
watches from the listing's version, as client-go's reflector does:

- a watch the API server ends (every ``WATCH_TIMEOUT`` seconds) is opened again from the last
  version seen (bookmarks keep that version current while nothing changes);
- a version too old to watch from (410 Gone, say after the API server was away for long) is
  listed again, and what that listing proves gone (absent, and not newer than the listing) is
  observed as deleted: a deletion nobody saw never stays in the view;
- any other failure (the API server away, a broken connection) is retried with backoff, from
  the last version seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import aclosing

import structlog

from controller.k8s import api
from controller.k8s.api import KubeApi
from controller.reconcile.clock import LOOP_CLOCK, Clock
from controller.reconcile.resync import Observe, scopes, vanished
from controller.reconcile.store import Store, key_of, resource_version

log = structlog.get_logger("bindery.informer")

BACKOFFS = (0.5, 1.0, 2.0, 3.0)
"""Seconds between attempts after a failure (the last repeats): back within seconds once the
API server is."""


class Informer:
    """Keeps the view's objects of one kind (matching ``selector``, in ``namespace`` or all)
    current: a listing, then a watch from its version, for as long as it runs."""

    def __init__(
        self,
        kube: KubeApi,
        store: Store,
        observe: Observe,
        *,
        endpoint: api.Endpoint,
        selector: str = "",
        namespace: str = "",
        page: int = api.LIST_PAGE,
        seconds: int = api.WATCH_TIMEOUT,
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.api = kube
        self.store = store
        self.observe = observe
        self.endpoint = endpoint
        self.selector = selector
        self.namespace = namespace
        self.page = page
        self.seconds = seconds
        """How long each watch lasts before the API server ends it (and the next begins)."""
        self.clock = clock
        self.synced = asyncio.Event()
        """Set once the view holds a whole listing (and stays set)."""
        self.version = ""
        """The version the next watch starts from (empty: list first)."""
        self.listings = 0
        """How many listings have been observed (the first, then one per 410 Gone)."""

    @property
    def where(self) -> str:
        return f"{self.endpoint.plural} in {self.namespace or 'all namespaces'}"

    async def run(self) -> None:
        """List, then watch, until cancelled; never raises anything else."""
        failures = 0
        while True:
            try:
                if not self.version:
                    await self.list()
                began = self.clock.now()
                await self.watch()
                failures = 0
                if self.clock.now() - began < BACKOFFS[0]:  # ended at once: do not spin
                    await self.clock.sleep(BACKOFFS[0])
            except api.ApiError as exc:
                if exc.status == 410:  # too old to watch from: list again
                    log.info("a watch expired; listing again", objects=self.where)
                    self.version = ""
                    continue
                delay = BACKOFFS[min(failures, len(BACKOFFS) - 1)]
                failures += 1
                log.warning(
                    "watching failed; retrying",
                    objects=self.where,
                    error=str(exc),
                    retry_seconds=delay,
                    hint="check that the API server is reachable and that the controller's "
                    f"role may list and watch {self.endpoint.plural}",
                )
                await self.clock.sleep(delay)

    async def list(self) -> None:
        """Observe one consistent listing page by page, then what it proves gone as deleted."""
        listed: dict[str, str] = {}
        version = ""
        pages = self.api.list_pages(self.endpoint, self.namespace, self.selector, self.page)
        async for at, items in pages:
            version = at  # every page is of the one listing, at its resourceVersion
            for body in items:
                listed[key_of(body)] = resource_version(body)
                self.observe(self.endpoint, body, False)
        for body in vanished(self.store.of(self.endpoint), version, listed, self.namespace):
            self.observe(self.endpoint, body, True)
        self.version = version
        self.listings += 1
        self.synced.set()

    async def watch(self) -> None:
        """Observe the changes after :attr:`version` until the API server ends the watch."""
        events = self.api.watch(
            self.endpoint, self.namespace, self.selector, self.version, seconds=self.seconds
        )
        async with aclosing(events):
            async for kind, body in events:
                self.version = resource_version(body) or self.version
                if kind != "BOOKMARK":
                    self.observe(self.endpoint, body, kind == "DELETED")


class Informers:
    """One :class:`Informer` per owned kind and watched namespace (or one for all)."""

    def __init__(
        self,
        kube: KubeApi,
        store: Store,
        observe: Observe,
        *,
        kinds: Sequence[tuple[api.Endpoint, str]],
        namespaces: Sequence[str] = (),
        clock: Clock = LOOP_CLOCK,
    ) -> None:
        self.informers = [
            Informer(
                kube,
                store,
                observe,
                endpoint=endpoint,
                selector=selector,
                namespace=namespace,
                clock=clock,
            )
            for endpoint, selector in kinds
            for namespace in scopes(endpoint, namespaces)
        ]
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        if not self._tasks:
            loop = asyncio.get_running_loop()
            self._tasks = [loop.create_task(informer.run()) for informer in self.informers]

    async def synced(self) -> None:
        """Return once the view holds a whole listing of every kind (:meth:`start` first)."""
        if self.informers and not self._tasks:
            raise RuntimeError(
                "the owned kinds' informers are not running, so their listing would never"
                " come: call Controller.watch() before Controller.catch_up()"
            )
        await asyncio.gather(*(informer.synced.wait() for informer in self.informers))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
