"""The worker pool: takes requests from the queue and runs each kind's reconciler, with backoff."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import structlog

from controller import metrics
from controller.domain.refs import Kind, Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile.kinds import Reconciler
from controller.reconcile.queue import WorkQueue
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, StaleWriteError

log = structlog.get_logger("bindery.reconciler")


class WorkerPool:
    """``workers`` tasks dispatching queued requests through a table of per-kind reconcilers.

    A failed pass is retried with per-request exponential backoff; a request is never run twice
    at once (the queue guarantees it).
    """

    def __init__(
        self,
        queue: WorkQueue[Request],
        store: Store,
        reconcilers: Mapping[Kind, Reconciler],
        *,
        workers: int,
    ) -> None:
        self.queue = queue
        self.store = store
        self.reconcilers = reconcilers
        self.workers = workers
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(i), name=f"bindery-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
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
                delay = self.queue.retry_delay(request)
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
            finally:
                self.queue.done(request)

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
