"""The worker pool: takes requests from the queue and runs each kind's reconciler, with backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import structlog

from controller.domain.refs import Kind, Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile import metrics
from controller.reconcile.kinds import Reconciler
from controller.reconcile.queue import WorkQueue
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, StaleWriteError

log = structlog.get_logger("bindery.reconciler")


class WorkerPool:
    """``workers`` tasks dispatching queued requests through a table of per-kind reconcilers.

    A failed pass is retried with per-request exponential backoff; a request is never run twice
    at once (the queue guarantees it).

    While the API server is away (no answer, or 503 while it starts or stops), every pass fails
    and its backoff grows towards a minute; so that none of them waits that long once it is
    back, the requests that failed that way are *parked*: one of them, the probe, is retried
    every ``probe_seconds``, and the first pass that gets an answer again (the probe's or any
    other) requeues all of them.
    """

    def __init__(
        self,
        queue: WorkQueue[Request],
        store: Store,
        reconcilers: Mapping[Kind, Reconciler],
        *,
        workers: int,
        probe_seconds: float = 2.0,
    ) -> None:
        self.queue = queue
        self.store = store
        self.reconcilers = reconcilers
        self.workers = workers
        self.probe_seconds = probe_seconds
        self._tasks: list[asyncio.Task[None]] = []
        self._parked: set[Request] = set()
        self._probe: Request | None = None
        self._release: asyncio.TimerHandle | None = None
        self._released_at = float("-inf")

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(i), name=f"bindery-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
        if self._release is not None:
            self._release.cancel()
            self._release = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self, index: int) -> None:
        while True:
            request = await self.queue.get()
            metrics.QUEUE_DEPTH.set(len(self.queue))
            try:
                await self.process(request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self._retry_delay(request, exc)
                metrics.RECONCILES.labels(request.kind.value, "error").inc()
                # An API refusal is expected now and then (conflicts, a webhook, RBAC); anything
                # else is a bug worth its traceback. Either way the request is retried with backoff.
                expected = isinstance(exc, ApiError | StaleWriteError | ForeignObjectError)
                report = log.warning if expected else log.exception
                report(
                    "reconcile failed; retrying",
                    kind=request.kind.value,
                    key=request.ref.key,
                    retry_in=delay,
                    error=str(exc),
                )
                self.queue.add_after(request, delay)
            else:
                self.queue.forget(request)
                self._answered(request)
            finally:
                self.queue.done(request)

    def _retry_delay(self, request: Request, exc: Exception) -> float:
        delay = self.queue.retry_delay(request)
        if not (isinstance(exc, ApiError) and exc.away):
            self._answered(request)  # the API server answered: it is there
            return delay
        self._parked.add(request)
        if self._probe in (None, request):
            self._probe = request
            return min(delay, self.probe_seconds)
        return delay

    def _answered(self, request: Request) -> None:
        """A pass got its answers: whatever waits for the API server to come back goes now (at
        most once per ``probe_seconds``, so a request that alone gets no answer cannot spin)."""
        if request == self._probe:
            self._probe = None
        if self._parked and self._release is None:
            loop = asyncio.get_running_loop()
            wait = max(0.0, self._released_at + self.probe_seconds - loop.time())
            self._release = loop.call_later(wait, self._release_parked)

    def _release_parked(self) -> None:
        self._release = None
        self._released_at = asyncio.get_running_loop().time()
        parked, self._parked, self._probe = self._parked, set(), None
        log.info("the API server answers again; retrying the passes it failed", count=len(parked))
        for item in parked:
            self.queue.forget(item)
            self.queue.add(item)

    async def process(self, request: Request) -> None:
        """Run one pass for ``request`` (nothing if its object is no longer in the view)."""
        started = time.perf_counter()
        body = self.store.get(api.ENDPOINTS[request.kind], request.ref.key)
        reconciler = self.reconcilers[request.kind]
        if body is None:
            await reconciler.gone(request)
            return
        changed = await reconciler.reconcile(request, body)
        elapsed = time.perf_counter() - started
        outcome = "changed" if changed else "unchanged"
        metrics.RECONCILES.labels(request.kind.value, outcome).inc()
        metrics.RECONCILE_SECONDS.labels(request.kind.value).observe(elapsed)
        md: dict[str, Any] = body.get("metadata") or {}
        (log.info if changed else log.debug)(
            "reconciled",
            kind=request.kind.value,
            namespace=md.get("namespace", ""),
            name=md.get("name"),
            generation=md.get("generation"),
            outcome=outcome,
            ms=round(elapsed * 1000, 2),
        )
